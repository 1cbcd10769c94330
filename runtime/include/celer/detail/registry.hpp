#pragma once
// Internals of <celer/remote.hpp>: the registry of remote functions, factories and methods,
// and the invokers that decode a call's arguments, run it and encode its result. Include
// <celer/remote.hpp>, not this header.

#include <celer/codec.hpp>
#include <celer/error.hpp>

#include <array>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

namespace celer::detail {

enum class remote_kind : unsigned char { function, factory, method };

/// Raw bytes of a function or member-function pointer: the registry's lookup key.
using target_bytes = std::array<char, 2 * sizeof(void*)>;

template <class F>
target_bytes target_of(F f) {
  static_assert(sizeof(F) <= sizeof(target_bytes));
  target_bytes out{};
  std::memcpy(out.data(), &f, sizeof(F));
  return out;
}
template <class F>
F target_as(const target_bytes& t) {
  F f;
  std::memcpy(&f, t.data(), sizeof(F));
  return f;
}

struct remote_entry;
/// One argument as a call receives it: its msgpack bytes and, when those are a view of the
/// object store, what keeps them mapped (then `bytes` and `array` arguments are views too).
struct arg_bytes {
  std::string_view data;
  std::shared_ptr<const void> keep;
  arg_bytes(std::string_view d, std::shared_ptr<const void> k = nullptr)  // NOLINT: implicit
    : data(d), keep(std::move(k)) {}
  arg_bytes(const std::string& s) : data(s) {}  // NOLINT: implicit, for calls from tests
};
/// Runs a function or method: decodes `args`, calls, and returns the msgpack-encoded result.
using call_fn = std::string (*)(const remote_entry&, void* instance,
                                const std::vector<arg_bytes>& args);
/// Runs a factory: decodes `args` and returns the new actor instance.
using make_fn = std::shared_ptr<void> (*)(const remote_entry&, const std::vector<arg_bytes>& args);

struct remote_entry {
  std::string name;
  remote_kind kind = remote_kind::function;
  std::size_t arity = 0;
  target_bytes target{};
  call_fn call = nullptr;
  make_fn make = nullptr;
  /// For factories and methods: the actor class (typeid name), to check handles.
  std::string class_type;
};

/// Thrown by an invoker when the arguments on the wire do not match the signature.
class argument_error : public exception {
public:
  explicit argument_error(const std::string& message)
    : exception(error_code::invalid_argument, message) {}
};

void register_remote(remote_entry entry);
/// The entry registered under `name`, or nullptr.
const remote_entry* find_remote(std::string_view name);
/// The entry registered for this function pointer, or nullptr.
const remote_entry* find_remote(const target_bytes& target);
/// Splits the stringified argument list of CELER_REMOTE into names.
std::vector<std::string> split_remote_names(std::string_view spelled);

template <class T>
struct factory_result {
  using type = void;
};
template <class T>
struct factory_result<T*> {
  using type = T;
};
template <class T>
struct factory_result<std::unique_ptr<T>> {
  using type = T;
};
template <class T>
struct factory_result<std::shared_ptr<T>> {
  using type = T;
};

template <class F>
struct remote_traits;
template <class R, class... A>
struct remote_traits<R (*)(A...)> {
  using result = R;
  using args = std::tuple<std::decay_t<A>...>;
  using actor_class = typename factory_result<R>::type;
  static constexpr remote_kind kind =
    std::is_class_v<actor_class> ? remote_kind::factory : remote_kind::function;
};
template <class R, class... A>
struct remote_traits<R (*)(A...) noexcept> : remote_traits<R (*)(A...)> {};
template <class R, class C, class... A>
struct remote_traits<R (C::*)(A...)> {
  using result = R;
  using args = std::tuple<std::decay_t<A>...>;
  using actor_class = C;
  static constexpr remote_kind kind = remote_kind::method;
};
template <class R, class C, class... A>
struct remote_traits<R (C::*)(A...) const> : remote_traits<R (C::*)(A...)> {};
template <class R, class C, class... A>
struct remote_traits<R (C::*)(A...) noexcept> : remote_traits<R (C::*)(A...)> {};
template <class R, class C, class... A>
struct remote_traits<R (C::*)(A...) const noexcept> : remote_traits<R (C::*)(A...)> {};

template <class F>
using remote_result_t = typename remote_traits<F>::result;
template <class F>
using remote_args_t = typename remote_traits<F>::args;

template <class Tuple, std::size_t... I>
Tuple decode_args(const remote_entry& e, const std::vector<arg_bytes>& args,
                  std::index_sequence<I...>) {
  if (args.size() != sizeof...(I)) {
    throw argument_error(e.name + " takes " + std::to_string(sizeof...(I)) + " argument(s), " +
                         std::to_string(args.size()) + " given");
  }
  try {
    return Tuple{unpack<std::tuple_element_t<I, Tuple>>(
      args[I].data, "argument " + std::to_string(I + 1) + " of " + e.name,
      args[I].keep ? &args[I].keep : nullptr)...};
  } catch (const exception& ex) {
    throw argument_error(ex.what());
  }
}

template <class R>
std::string pack_result(auto&& call) {
  if constexpr (std::is_void_v<R>) {
    call();
    return pack(msgpack::type::nil_t());
  } else {
    return pack(call());
  }
}

template <class F>
std::string call_remote(const remote_entry& e, void* instance,
                        const std::vector<arg_bytes>& raw) {
  using traits = remote_traits<F>;
  using args_t = typename traits::args;
  auto args = decode_args<args_t>(e, raw, std::make_index_sequence<std::tuple_size_v<args_t>>{});
  F f = target_as<F>(e.target);
  if constexpr (traits::kind == remote_kind::method) {
    auto* self = static_cast<typename traits::actor_class*>(instance);
    return pack_result<typename traits::result>([&]() -> decltype(auto) {
      return std::apply([&](auto&... a) -> decltype(auto) { return (self->*f)(std::move(a)...); },
                        args);
    });
  } else {
    return pack_result<typename traits::result>([&]() -> decltype(auto) {
      return std::apply([&](auto&... a) -> decltype(auto) { return f(std::move(a)...); }, args);
    });
  }
}

template <class F>
std::shared_ptr<void> make_remote(const remote_entry& e, const std::vector<arg_bytes>& raw) {
  using traits = remote_traits<F>;
  using args_t = typename traits::args;
  using T = typename traits::actor_class;
  auto args = decode_args<args_t>(e, raw, std::make_index_sequence<std::tuple_size_v<args_t>>{});
  F f = target_as<F>(e.target);
  auto made = std::apply([&](auto&... a) { return f(std::move(a)...); }, args);
  if constexpr (std::is_pointer_v<decltype(made)>) {
    return std::shared_ptr<void>(std::shared_ptr<T>(made));
  } else {
    return std::shared_ptr<void>(std::shared_ptr<T>(std::move(made)));
  }
}

template <class F>
remote_entry make_entry(std::string name, F f) {
  using traits = remote_traits<F>;
  remote_entry e;
  e.name = std::move(name);
  e.kind = traits::kind;
  e.arity = std::tuple_size_v<typename traits::args>;
  e.target = target_of(f);
  if constexpr (traits::kind == remote_kind::factory) {
    e.make = &make_remote<F>;
    e.class_type = typeid(typename traits::actor_class).name();
  } else {
    e.call = &call_remote<F>;
    if constexpr (traits::kind == remote_kind::method) {
      e.class_type = typeid(typename traits::actor_class).name();
    }
  }
  return e;
}

/// Registers every function given to one CELER_REMOTE invocation.
struct registrar {
  template <class... F>
  explicit registrar(std::string_view spelled, F... fs) {
    auto names = split_remote_names(spelled);
    std::size_t i = 0;
    (register_remote(make_entry(names.at(i++), fs)), ...);
  }
};

} // namespace celer::detail
