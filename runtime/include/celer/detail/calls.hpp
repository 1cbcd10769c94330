#pragma once
// Internals of <celer/api.hpp>: the calls its templates make into the runtime (defined in
// runtime/src/api.cpp), and how they encode a call's arguments and decode a result. Include
// <celer/api.hpp>, not this header.

#include <celer/codec.hpp>
#include <celer/detail/failure.hpp>
#include <celer/detail/registry.hpp>
#include <celer/error.hpp>
#include <celer/fwd.hpp>
#include <celer/handles.hpp>
#include <celer/ids.hpp>
#include <celer/options.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace celer::detail {

std::string pending_reason_of_task(const object_id& id);
std::string pending_reason_of_actor(const actor_id& id);

template <class T>
struct is_object_ref : std::false_type {};
template <class T>
struct is_object_ref<object_ref<T>> : std::true_type {};
template <class T>
inline constexpr bool is_object_ref_v = is_object_ref<std::decay_t<T>>::value;

/// One argument on the wire: a msgpack value, or a reference resolved before the call.
struct arg_spec {
  bool is_ref = false;
  object_id ref;
  address owner;
  std::string value;
};

/// The outcome of reading one object: its msgpack payload, or why there is none. A large
/// object's payload is its bytes in the node's shared memory, mapped while `keep` lives.
struct fetched {
  bool ok = false;
  std::string payload;
  failure fail;
  const char* mapped = nullptr;
  std::size_t mapped_size = 0;
  std::shared_ptr<const void> keep;
  [[nodiscard]] std::string_view bytes() const noexcept {
    return mapped != nullptr ? std::string_view(mapped, mapped_size) : std::string_view(payload);
  }
};

object_ref<void> submit_task(const remote_entry& fn, std::vector<arg_spec> args,
                             const task_options& options);
/// A task whose function returns `num_returns` values (a std::tuple): one ref to each.
std::vector<object_ref<void>> submit_task(const remote_entry& fn, std::vector<arg_spec> args,
                                          const task_options& options, std::uint32_t num_returns);
object_ref<void> put_payload(std::string payload);
/// Values larger than this (inline_object_bytes) go to the node's object store.
std::size_t inline_object_limit();
/// Stores a value of `size` packed bytes, starting with byte `first`, in the node's object
/// store: `write` packs it straight into the store's memory.
object_ref<void> put_stored(std::size_t size, unsigned char first, const put_options& options,
                            const std::function<void(char*)>& write);
/// Reads objects; throws get_timeout_error when `timeout` passes first.
std::vector<fetched> fetch(const std::vector<object_ref<void>>& refs, timeout_t timeout);
/// Indices of refs that are ready, at least `num_returns` of them unless `timeout` passes.
std::vector<std::size_t> wait_ready(const std::vector<object_ref<void>>& refs,
                                    std::size_t num_returns, timeout_t timeout);
actor_id create_actor(const remote_entry& factory, std::vector<arg_spec> args,
                      const actor_options& options);
object_ref<void> submit_actor_call(const actor_id& actor, const remote_entry& method,
                                   std::vector<arg_spec> args, const call_options& options);
/// An actor call whose method returns `num_returns` values (a std::tuple): one ref to each.
std::vector<object_ref<void>> submit_actor_call(const actor_id& actor, const remote_entry& method,
                                                std::vector<arg_spec> args, const call_options& options,
                                                std::uint32_t num_returns);
/// The actor registered under `name`; throws not_found, or invalid_argument when it is not
/// of `class_type`.
actor_id find_named_actor(std::string_view name, std::string_view class_type, std::string_view name_space = {});
void kill_actor(const actor_id& actor, bool no_restart);
bool cancel(const object_ref<void>& ref, bool force, bool recursive);

/// A streaming generator's stream as its consumer's ref_stream holds it: the generator's
/// own return (its end). The last copy gone closes the stream (api.cpp).
struct stream_state {
  object_ref<void> end;
  explicit stream_state(object_ref<void> e) : end(std::move(e)) {}
  stream_state(const stream_state&) = delete;
  stream_state& operator=(const stream_state&) = delete;
  ~stream_state();
};
std::shared_ptr<stream_state> submit_stream(const remote_entry& fn, std::vector<arg_spec> args,
                                            const task_options& options);
std::shared_ptr<stream_state> submit_actor_stream(const actor_id& actor, const remote_entry& method,
                                                  std::vector<arg_spec> args, const call_options& options);
/// The next value's ref, nullopt after the last (ref_stream::next).
std::optional<object_ref<void>> stream_next(const stream_state& s, timeout_t timeout);

template <class T>
object_ref<void> erase(const object_ref<T>& r) {
  return object_ref<void>(r.id(), r.owner(), r.hold());
}
template <class T>
object_ref<T> restore(const object_ref<void>& r) {
  return object_ref<T>(r.id(), r.owner(), r.hold());
}

/// The registered entry of `f`; throws not_found when `f` is not in any CELER_REMOTE.
template <class F>
const remote_entry& entry_of(F f, std::string_view what) {
  const remote_entry* e = find_remote(key_of(f));
  if (e == nullptr) {
    throw exception(error_code::not_found,
                    std::string("the ") + std::string(what) +
                      " passed to celer is not registered: list it in CELER_REMOTE(...)");
  }
  return *e;
}

/// Encodes one argument for parameter type P.
template <class P, class A>
arg_spec encode_arg(A&& a) {
  using D = std::decay_t<A>;
  arg_spec out;
  if constexpr (is_object_ref_v<P>) {
    static_assert(std::is_same_v<D, P>, "this parameter takes an object_ref of another type");
    out.value = pack(a);
  } else if constexpr (is_object_ref_v<D>) {
    static_assert(std::is_convertible_v<typename D::value_type, P>,
                  "an object_ref argument's value type does not match the parameter");
    out.is_ref = true;
    out.ref = a.id();
    out.owner = a.owner();
  } else if constexpr (std::is_same_v<D, P>) {
    out.value = pack(a);
  } else {
    static_assert(std::is_convertible_v<A&&, P>, "argument type does not match the parameter");
    out.value = pack(static_cast<P>(std::forward<A>(a)));
  }
  return out;
}

template <class Params, class... A, std::size_t... I>
std::vector<arg_spec> encode_args(std::index_sequence<I...>, A&&... a) {
  static_assert(sizeof...(A) == std::tuple_size_v<Params>,
                "wrong number of arguments for this remote function");
  std::vector<arg_spec> out;
  out.reserve(sizeof...(A));
  (out.push_back(encode_arg<std::tuple_element_t<I, Params>>(std::forward<A>(a))), ...);
  return out;
}

template <class F, class... A>
std::vector<arg_spec> encode_call(A&&... a) {
  using params = remote_args_t<F>;
  return encode_args<params>(std::make_index_sequence<sizeof...(A)>{}, std::forward<A>(a)...);
}

template <class T>
T decode_result(const fetched& f) {
  if (!f.ok) throw_failure(f.fail);
  if constexpr (!std::is_void_v<T>) {
    return unpack<T>(f.bytes(), "the object's value", f.keep ? &f.keep : nullptr);
  }
}

/// The value a call of a function returning R makes (a coroutine's celer::future<T>: T).
template <class R>
using ref_value_t = std::conditional_t<std::is_void_v<typename unwrap_future<std::decay_t<R>>::type>, void,
                                       std::decay_t<typename unwrap_future<std::decay_t<R>>::type>>;

/// What `.remote(...)` gives for a function returning R: one ref to the value, or, for a
/// std::tuple of N values, a std::tuple of N refs, each its own object (multiple returns).
/// (The worker splits the same tuples: remote_entry::split_returns.)
template <class R>
struct returns_of {
  static constexpr bool split = false;
  static constexpr bool stream = false;
  static constexpr std::uint32_t count = 1;
  using refs = object_ref<ref_value_t<R>>;
};
/// A streaming generator's: a ref_stream of its values (<celer/ref_stream.hpp>).
template <class T>
struct returns_of<generator<T>> {
  static constexpr bool split = false;
  static constexpr bool stream = true;
  static constexpr std::uint32_t count = 1;
  using refs = ref_stream<T>;
};
template <class... T>
struct returns_of<std::tuple<T...>> {
  static_assert(sizeof...(T) > 0, "a remote function returning std::tuple<> returns nothing: return void");
  static_assert(sizeof...(T) <= 1024, "a call returns at most 1,024 objects");
  static constexpr bool split = true;
  static constexpr bool stream = false;
  static constexpr std::uint32_t count = split_returns_of<std::tuple<T...>>;
  using refs = std::tuple<object_ref<std::decay_t<T>>...>;
};
/// A coroutine method's: those of the value it co_returns.
template <class T>
struct returns_of<future<T>> : returns_of<T> {};
template <class R>
using returns_t = returns_of<std::remove_cvref_t<R>>;

/// The refs of a call with several returns, typed.
template <class Refs>
Refs restore_all(const std::vector<object_ref<void>>& refs) {
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return Refs{restore<typename std::tuple_element_t<I, Refs>::value_type>(refs.at(I))...};
  }(std::make_index_sequence<std::tuple_size_v<Refs>>{});
}

} // namespace celer::detail
