#pragma once
/// Forward declarations of celer's public types, for headers of yours that name them
/// (a member `celer::actor_handle<counter>`, a parameter `const celer::object_ref<T>&`)
/// without compiling the API or msgpack. The files that call celer include <celer/celer.hpp>.
///
///   #include <celer/fwd.hpp>
///   struct trainer_pool { std::vector<celer::actor_handle<trainer>> members; };

#include <celer/ids.hpp>

#include <chrono>
#include <cstdint>
#include <optional>

namespace celer {

// <celer/error.hpp>
enum class error_code : unsigned char;
class error;
template <class T>
class expected;
class exception;

// <celer/bytes.hpp>
class bytes;
template <class T>
class array;

// <celer/handles.hpp>
template <class T>
class object_ref;
template <class T>
class actor_handle;

// <celer/options.hpp>
struct scheduling_strategy;
enum class bundle_strategy : std::uint8_t;
struct bundle;
struct placement_group_options;
struct init_options;
struct resource_request;
struct task_options;
struct put_options;
struct actor_options;
struct kill_options;
struct call_options;

// <celer/generator.hpp>, <celer/ref_stream.hpp>
template <class T>
class generator;
template <class T>
class ref_stream;

// <celer/future.hpp>
template <class T>
class future;

// <celer/api.hpp>
template <class F>
class task_builder;
template <class F>
class actor_builder;
template <class Method>
class actor_call_builder;
class placement_group;
struct placement_group_state;
struct object_store_stats;
struct preemption;
template <class T>
struct wait_result;

/// How long `get`, `try_get` and `wait` may block: std::nullopt (the default) waits as long
/// as it takes; any std::chrono duration converts to it (`std::chrono::seconds(5)`).
using timeout_t = std::optional<std::chrono::nanoseconds>;

} // namespace celer
