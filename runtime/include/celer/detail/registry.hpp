#pragma once
// Internals of <celer/remote.hpp>: the registry of remote functions, factories and methods,
// and the invokers that decode a call's arguments, run it and encode its result. Include
// <celer/remote.hpp>, not this header.

#include <celer/codec.hpp>
#include <celer/error.hpp>
#include <celer/fwd.hpp>
#include <celer/generator.hpp>

#include <array>
#include <coroutine>
#include <cstddef>
#include <cstdint>
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

/// Raw bytes of a function or member-function pointer (with its type, the registry's key).
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

/// What the registry finds an entry by: the pointer's type and its bytes. The bytes alone
/// are ambiguous: a virtual `A::foo` and a virtual `B::foo` in the same vtable slot have the
/// same bytes, but `int (A::*)()` and `int (B::*)()` are different types.
struct remote_key {
  const std::type_info* type = nullptr;
  target_bytes bytes{};
  friend bool operator==(const remote_key& a, const remote_key& b) noexcept {
    return a.bytes == b.bytes &&
           (a.type == b.type || (a.type != nullptr && b.type != nullptr && *a.type == *b.type));
  }
};
template <class F>
remote_key key_of(F f) {
  return {&typeid(F), target_of(f)};
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
/// Where a generator's values go as the worker runs it (the worker's, per call).
class item_sink {
public:
  /// One value, packed; false when the stream is to stop here (its call was cancelled).
  virtual bool item(std::string packed) = 0;

protected:
  ~item_sink() = default;
};
/// Runs a generator (a function or method returning celer::generator<T>): decodes `args`,
/// calls, and hands each value to `sink` in order; returns how many it handed over.
using stream_fn = std::uint64_t (*)(const remote_entry&, void* instance,
                                    const std::vector<arg_bytes>& args, item_sink& sink);
/// A coroutine method's call (it returns celer::future<T>; <celer/future.hpp>), made by
/// start_fn: it holds the decoded arguments (a parameter taken by reference binds to them)
/// and the coroutine, which has not run yet, until it is destroyed.
class coroutine_call {
public:
  virtual ~coroutine_call() = default;
  /// The coroutine's outermost frame: resumed first to start it; done once it ended.
  [[nodiscard]] virtual std::coroutine_handle<> handle() const noexcept = 0;
  /// Its packed result once it ended; throws what its body threw.
  virtual std::string result() = 0;
};
using start_fn = std::unique_ptr<coroutine_call> (*)(const remote_entry&, void* instance,
                                                     const std::vector<arg_bytes>& args);
/// start_fn of a method returning celer::future<T> (defined in <celer/future.hpp>, which
/// such a method's own file includes).
template <class F>
std::unique_ptr<coroutine_call> start_coroutine(const remote_entry& e, void* instance,
                                                const std::vector<arg_bytes>& args);

/// Runs a factory: decodes `args` and returns the new actor instance.
using make_fn = std::shared_ptr<void> (*)(const remote_entry&, const std::vector<arg_bytes>& args);

/// For methods: the instance that `factory` made, as a pointer to the method's class.
using as_class_fn = void* (*)(const remote_entry& factory, void* instance);

struct remote_entry {
  std::string name;
  remote_kind kind = remote_kind::function;
  std::size_t arity = 0;
  remote_key key;
  call_fn call = nullptr;
  make_fn make = nullptr;
  /// For factories and methods: the actor class (typeid name), to check handles.
  std::string class_type;
  /// For factories and methods: the actor class itself.
  const std::type_info* actor_type = nullptr;
  /// For factories: throws an instance it made as a pointer to its class (see as_class).
  void (*throw_instance)(void* instance) = nullptr;
  /// For methods: an instance of a derived class as a pointer to the method's class, null
  /// when that class is not an unambiguous public base of the factory's.
  as_class_fn as_class = nullptr;
  /// For functions and methods returning a std::tuple of N values: N (each value is its own
  /// object: the worker splits the packed tuple). 0: the result is one object.
  std::uint32_t split_returns = 0;
  /// For generators (returning celer::generator<T>): runs them value by value; `call` then
  /// refuses (a generator's values are objects of their own, never one result).
  stream_fn stream = nullptr;
  /// For coroutine methods (returning celer::future<T>): starts the call, which the worker
  /// runs between its co_awaits; `call` then refuses.
  start_fn start = nullptr;
};

template <class R>
inline constexpr bool is_generator_v = false;
template <class T>
inline constexpr bool is_generator_v<generator<T>> = true;

template <class R>
inline constexpr bool is_future_v = false;
template <class T>
inline constexpr bool is_future_v<future<T>> = true;
/// The value a function returning R gives its callers: R, or T for a celer::future<T>.
template <class R>
struct unwrap_future {
  using type = R;
};
template <class T>
struct unwrap_future<future<T>> {
  using type = T;
};

/// split_returns of a function returning R.
template <class R>
inline constexpr std::uint32_t split_returns_of = 0;
template <class... T>
inline constexpr std::uint32_t split_returns_of<std::tuple<T...>> = sizeof...(T);

/// Thrown by an invoker when the arguments on the wire do not match the signature.
class argument_error : public exception {
public:
  explicit argument_error(const std::string& message)
    : exception(error_code::invalid_argument, message) {}
};

/// `call` of a coroutine method: refused (the worker starts it through `start`).
inline std::string call_coroutine(const remote_entry& e, void*, const std::vector<arg_bytes>&) {
  throw argument_error(e.name + " is a coroutine (it returns celer::future<T>): the worker runs it "
                                "between its co_awaits, not as a plain call");
}

/// Records an entry (CELER_REMOTE, at static initialisation). The same function again
/// under the same name changes nothing; another function under a taken name is kept aside,
/// and celer::init reports it (invalid_argument) instead of anything running the wrong code.
void register_remote(remote_entry entry);
/// The entry registered under `name`, or nullptr.
const remote_entry* find_remote(std::string_view name);
/// The entry registered for this function or member-function pointer, or nullptr.
const remote_entry* find_remote(const remote_key& key);
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
  /// The parameters as declared, and as values (what the wire carries).
  using params = std::tuple<A...>;
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
  using params = std::tuple<A...>;
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

/// A decoded argument as parameter P takes it: moved, except into a non-const lvalue
/// reference, which binds to the decoded copy (what the function changes in it stays in the
/// worker and is not sent back, as in Ray).
template <class P, class T>
constexpr decltype(auto) pass_arg(T& arg) noexcept {
  if constexpr (std::is_lvalue_reference_v<P> && !std::is_const_v<std::remove_reference_t<P>>) {
    return (arg);
  } else {
    return std::move(arg);
  }
}

template <class F>
std::string call_remote(const remote_entry& e, void* instance,
                        const std::vector<arg_bytes>& raw) {
  using traits = remote_traits<F>;
  using args_t = typename traits::args;
  using params_t = typename traits::params;
  constexpr std::size_t n = std::tuple_size_v<args_t>;
  [[maybe_unused]] auto args = decode_args<args_t>(e, raw, std::make_index_sequence<n>{});
  F f = target_as<F>(e.key.bytes);
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    if constexpr (traits::kind == remote_kind::method) {
      // `instance` is an object of the method's class (the worker adjusted a derived
      // actor's pointer to this base); a virtual method calls the most derived override.
      auto* self = static_cast<typename traits::actor_class*>(instance);
      return pack_result<typename traits::result>([&]() -> decltype(auto) {
        return (self->*f)(pass_arg<std::tuple_element_t<I, params_t>>(std::get<I>(args))...);
      });
    } else {
      return pack_result<typename traits::result>([&]() -> decltype(auto) {
        return f(pass_arg<std::tuple_element_t<I, params_t>>(std::get<I>(args))...);
      });
    }
  }(std::make_index_sequence<n>{});
}

/// `call` of a generator: refused (the worker streams generators through `stream`).
inline std::string call_generator(const remote_entry& e, void*, const std::vector<arg_bytes>&) {
  throw argument_error(e.name + " is a generator (it returns celer::generator<T>): it is run as a "
                                "stream, not as a call with one result");
}

template <class F>
std::uint64_t stream_remote(const remote_entry& e, void* instance, const std::vector<arg_bytes>& raw,
                            item_sink& sink) {
  using traits = remote_traits<F>;
  using args_t = typename traits::args;
  using params_t = typename traits::params;
  constexpr std::size_t n = std::tuple_size_v<args_t>;
  [[maybe_unused]] auto args = decode_args<args_t>(e, raw, std::make_index_sequence<n>{});
  F f = target_as<F>(e.key.bytes);
  auto gen = [&]<std::size_t... I>(std::index_sequence<I...>) {
    if constexpr (traits::kind == remote_kind::method) {
      auto* self = static_cast<typename traits::actor_class*>(instance);
      return (self->*f)(pass_arg<std::tuple_element_t<I, params_t>>(std::get<I>(args))...);
    } else {
      return f(pass_arg<std::tuple_element_t<I, params_t>>(std::get<I>(args))...);
    }
  }(std::make_index_sequence<n>{});
  std::uint64_t count = 0;
  while (gen.next()) {
    ++count;
    if (!sink.item(pack(gen.value()))) break;
  }
  return count;
}

template <class F>
std::shared_ptr<void> make_remote(const remote_entry& e, const std::vector<arg_bytes>& raw) {
  using traits = remote_traits<F>;
  using args_t = typename traits::args;
  using params_t = typename traits::params;
  using T = typename traits::actor_class;
  constexpr std::size_t n = std::tuple_size_v<args_t>;
  [[maybe_unused]] auto args = decode_args<args_t>(e, raw, std::make_index_sequence<n>{});
  F f = target_as<F>(e.key.bytes);
  auto made = [&]<std::size_t... I>(std::index_sequence<I...>) {
    return f(pass_arg<std::tuple_element_t<I, params_t>>(std::get<I>(args))...);
  }(std::make_index_sequence<n>{});
  // The instance is kept as a T* (the factory's class); as_class finds its bases.
  if constexpr (std::is_pointer_v<decltype(made)>) {
    return std::shared_ptr<void>(std::shared_ptr<T>(made));
  } else {
    return std::shared_ptr<void>(std::shared_ptr<T>(std::move(made)));
  }
}

template <class T>
[[noreturn]] void throw_instance(void* instance) {
  throw static_cast<T*>(instance);
}

/// `instance`, made by `factory` (a T*), as a C*, or null when C is not an unambiguous
/// public base of T. Catching the thrown T* as a C* applies the language's own
/// derived-to-base conversion, offsets of multiple inheritance and virtual bases included,
/// without knowing T here. It costs a throw: the worker does it once per actor and class.
template <class C>
void* instance_as(const remote_entry& factory, void* instance) {
  if (factory.throw_instance == nullptr) return nullptr;
  try {
    factory.throw_instance(instance);
  } catch (C* self) {
    return self;
  } catch (...) {
  }
  return nullptr;
}

template <class F>
remote_entry make_entry(std::string name, F f) {
  using traits = remote_traits<F>;
  remote_entry e;
  e.name = std::move(name);
  e.kind = traits::kind;
  e.arity = std::tuple_size_v<typename traits::args>;
  e.key = key_of(f);
  if constexpr (traits::kind == remote_kind::factory) {
    using T = typename traits::actor_class;
    e.make = &make_remote<F>;
    e.class_type = typeid(T).name();
    e.actor_type = &typeid(T);
    e.throw_instance = &throw_instance<T>;
  } else {
    using R = std::remove_cvref_t<typename traits::result>;
    if constexpr (is_generator_v<R>) {
      e.call = &call_generator;
      e.stream = &stream_remote<F>;
    } else if constexpr (is_future_v<R>) {
      static_assert(traits::kind == remote_kind::method,
                    "celer::future<T> is for actor methods (coroutine actors): a task that awaits a "
                    "value waits with celer::get");
      e.call = &call_coroutine;
      e.start = &start_coroutine<F>;
      e.split_returns = split_returns_of<typename unwrap_future<R>::type>;
    } else {
      e.call = &call_remote<F>;
      e.split_returns = split_returns_of<R>;
    }
    if constexpr (traits::kind == remote_kind::method) {
      using C = typename traits::actor_class;
      e.class_type = typeid(C).name();
      e.actor_type = &typeid(C);
      e.as_class = &instance_as<C>;
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
