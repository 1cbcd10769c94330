#pragma once
/// Coroutine actors (docs/api.md, "Coroutine actors"; Ray's async actors): an actor method
/// that returns `celer::future<T>` is a C++20 coroutine. `co_await` on an object ref (a
/// task's result, another actor's call, a put) suspends the call without holding the actor's
/// thread: the actor runs its next calls meanwhile, and the call goes on, on the same
/// thread, once the value is there. One actor thread keeps thousands of calls in flight.
///
///   struct gateway {
///     celer::actor_handle<model> m;
///     celer::future<std::string> ask(std::string question) {
///       auto tokens = co_await celer::task(tokenize).remote(question);  // the thread is free
///       co_return co_await m.task(&model::answer).remote(tokens);
///     }
///   };
///   CELER_REMOTE(make_gateway, &gateway::ask);
///   ...
///   std::string a = celer::get(g.task(&gateway::ask).remote("why?"));  // a plain object_ref
///
/// - `co_await ref` gives the value, or throws what `celer::get(ref)` throws (the error of
///   the task that made it), inside the coroutine, where it can be caught.
/// - `co_await` on another `celer::future<U>` (a helper coroutine of yours) runs it in the
///   same call.
/// - Between two suspensions a call has the actor's thread to itself: the actor's state
///   needs no lock (with max_concurrency or concurrency groups, calls resume on the threads
///   of their group, as they started).
/// - A call cancelled while suspended (celer::cancel) resumes at once: its co_await throws
///   task_cancelled_error, and its result is the cancellation.
/// - `celer::get` inside a coroutine still waits in place (the thread blocks, as in any
///   call): co_await instead.
/// - Called locally (a unit test), `f.get()` runs the coroutine to its end, each co_await
///   waiting in place.

#include <celer/api.hpp>
#include <celer/error.hpp>
#include <celer/handles.hpp>

#include <coroutine>
#include <cstddef>
#include <exception>
#include <memory>
#include <string>
#include <tuple>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

namespace celer {

template <class T>
class future;

namespace detail {

/// Parks the coroutine call running on this thread until `ref` is ready; the worker then
/// resumes `h` on the call's thread. False when `ref` is ready now, or when no coroutine
/// call runs on this thread (then it waited for `ref` in place): `h` goes on at once.
bool suspend_on(const object_ref<void>& ref, std::coroutine_handle<> h);
/// Throws task_cancelled_error when the call running on this thread was cancelled.
void throw_if_cancelled();
/// While one lives on this thread, co_await waits in place (future::get runs there).
class wait_in_place {
public:
  wait_in_place();
  ~wait_in_place();
  wait_in_place(const wait_in_place&) = delete;
  wait_in_place& operator=(const wait_in_place&) = delete;
};

/// The operands a future's co_await handles itself.
template <class A>
inline constexpr bool is_future_operand_v = false;
template <class U>
inline constexpr bool is_future_operand_v<object_ref<U>> = true;
template <class U>
inline constexpr bool is_future_operand_v<future<U>> = true;

/// A co_await on an object ref.
template <class T>
class ref_awaiter {
public:
  explicit ref_awaiter(object_ref<T> ref) : ref_(std::move(ref)) {}
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> h) { return suspend_on(erase(ref_), h); }
  T await_resume() {
    throw_if_cancelled();
    return celer::get(ref_);
  }

private:
  object_ref<T> ref_;
};

/// What a coroutine hands back: its value (none for void) or what it threw.
template <class T>
class future_outcome {
public:
  template <class U>
  void return_value(U&& v) {
    value_.emplace(std::forward<U>(v));
  }
  T take() {
    if (error_) std::rethrow_exception(error_);
    return std::move(*value_);
  }

protected:
  std::optional<T> value_;
  std::exception_ptr error_;
};
template <>
class future_outcome<void> {
public:
  void return_void() noexcept {}
  void take() {
    if (error_) std::rethrow_exception(error_);
  }

protected:
  std::exception_ptr error_;
};

/// The worker's way into a future (the coroutine's frame), kept out of its public surface.
struct future_access {
  template <class T>
  static std::coroutine_handle<> handle(const future<T>& f) noexcept {
    return f.handle_;
  }
  template <class T>
  static T take(future<T>& f) {
    return f.handle_.promise().take();
  }
};

} // namespace detail

template <class T>
class [[nodiscard]] future {
  static_assert(!std::is_reference_v<T>, "celer::future<T> holds a value: T is not a reference");

public:
  using value_type = T;

  struct promise_type : detail::future_outcome<T> {
    /// Who awaits this one (a coroutine that co_awaited it): resumed when it ends.
    std::coroutine_handle<> continuation;

    future get_return_object() noexcept {
      return future(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    /// Nothing runs until the worker (or an awaiting coroutine, or get) starts it.
    std::suspend_always initial_suspend() noexcept { return {}; }
    struct final_awaiter {
      bool await_ready() const noexcept { return false; }
      std::coroutine_handle<> await_suspend(std::coroutine_handle<promise_type> h) noexcept {
        auto next = h.promise().continuation;
        return next ? next : std::noop_coroutine();
      }
      void await_resume() const noexcept {}
    };
    final_awaiter final_suspend() noexcept { return {}; }
    void unhandled_exception() noexcept { this->error_ = std::current_exception(); }

    template <class U>
    detail::ref_awaiter<U> await_transform(object_ref<U> ref) {
      return detail::ref_awaiter<U>(std::move(ref));
    }
    template <class U>
    auto await_transform(future<U>&& inner) {
      return typename future<U>::awaiter(std::move(inner));
    }
    /// (A named future is taken over: it is empty after the co_await.)
    template <class U>
    auto await_transform(future<U>& inner) {
      return typename future<U>::awaiter(std::move(inner));
    }
    /// Anything else awaitable is awaited as it is.
    template <class A>
      requires(!detail::is_future_operand_v<std::remove_cvref_t<A>>)
    A&& await_transform(A&& a) noexcept {
      return std::forward<A>(a);
    }
  };

  /// co_await of a future inside another coroutine: runs it, then goes on with its result.
  class awaiter {
  public:
    explicit awaiter(future f) : f_(std::move(f)) {}
    bool await_ready() const noexcept { return !f_.handle_ || f_.handle_.done(); }
    std::coroutine_handle<> await_suspend(std::coroutine_handle<> outer) noexcept {
      f_.handle_.promise().continuation = outer;
      return f_.handle_;
    }
    T await_resume() { return f_.handle_.promise().take(); }

  private:
    future f_;
  };

  future() = default;
  future(future&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  future& operator=(future&& other) noexcept {
    if (this != &other) {
      destroy();
      handle_ = std::exchange(other.handle_, {});
    }
    return *this;
  }
  future(const future&) = delete;
  future& operator=(const future&) = delete;
  ~future() { destroy(); }

  /// Runs the coroutine here to its end, each co_await waiting in place, and returns its
  /// value or throws what it threw (for calling a coroutine method locally, in a test).
  T get() {
    if (!handle_) throw exception(error_code::failed_precondition, "celer::future::get on an empty future");
    {
      detail::wait_in_place here;
      if (!handle_.done()) handle_.resume();
    }
    if (!handle_.done()) {
      throw exception(error_code::failed_precondition,
                      "celer::future::get: the coroutine suspended on something other than a celer "
                      "object ref or future, which get cannot wait for");
    }
    return handle_.promise().take();
  }

private:
  friend struct detail::future_access;
  explicit future(std::coroutine_handle<promise_type> h) noexcept : handle_(h) {}
  void destroy() noexcept {
    if (handle_) handle_.destroy();
  }
  std::coroutine_handle<promise_type> handle_;
};

namespace detail {

/// A started call of coroutine method F (registry.hpp's coroutine_call).
template <class F>
class coroutine_call_of final : public coroutine_call {
  using traits = remote_traits<F>;
  using args_t = typename traits::args;
  using params_t = typename traits::params;
  using value_t = typename unwrap_future<std::remove_cvref_t<typename traits::result>>::type;
  static constexpr std::size_t n = std::tuple_size_v<args_t>;

public:
  coroutine_call_of(const remote_entry& e, void* instance, const std::vector<arg_bytes>& raw)
    : args_(decode_args<args_t>(e, raw, std::make_index_sequence<n>{})) {
    F f = target_as<F>(e.key.bytes);
    auto* self = static_cast<typename traits::actor_class*>(instance);
    // The coroutine starts suspended: it runs when the worker resumes handle().
    future_ = [&]<std::size_t... I>(std::index_sequence<I...>) {
      return (self->*f)(pass_arg<std::tuple_element_t<I, params_t>>(std::get<I>(args_))...);
    }(std::make_index_sequence<n>{});
  }
  [[nodiscard]] std::coroutine_handle<> handle() const noexcept override {
    return future_access::handle(future_);
  }
  std::string result() override {
    return pack_result<value_t>([&]() -> decltype(auto) { return future_access::take(future_); });
  }

private:
  args_t args_;
  future<value_t> future_;
};

template <class F>
std::unique_ptr<coroutine_call> start_coroutine(const remote_entry& e, void* instance,
                                                const std::vector<arg_bytes>& args) {
  return std::make_unique<coroutine_call_of<F>>(e, instance, args);
}

} // namespace detail
} // namespace celer
