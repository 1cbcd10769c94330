#pragma once
/// Streaming generators (docs/api.md, "Streaming generators"): a remote function or actor
/// method that returns `celer::generator<T>` is a C++20 coroutine that hands its values out
/// one by one with `co_yield`. Called remotely, it gives a `celer::ref_stream<T>`
/// (<celer/ref_stream.hpp>): one ref per value, in order, each readable while the
/// function still runs.
///
///   celer::generator<std::vector<float>> batches(std::string path, int size) {
///     reader r(path);
///     while (auto rows = r.next(size)) co_yield *rows;   // each batch its own object
///   }
///   CELER_REMOTE(batches);
///
/// Called locally (in a test), it is an input range: `for (auto& b : batches(p, 64))`.
/// An exception thrown in its body ends it; remotely the consumer meets it at the position
/// it happened (the ref after the last value fails with it).

#include <coroutine>
#include <cstddef>
#include <exception>
#include <iterator>
#include <optional>
#include <type_traits>
#include <utility>

namespace celer {

template <class T>
class generator {
  static_assert(!std::is_reference_v<T> && !std::is_void_v<T>,
                "celer::generator<T> yields values: T is neither a reference nor void");

public:
  using value_type = T;

  struct promise_type {
    std::optional<T> current;
    std::exception_ptr error;

    generator get_return_object() noexcept {
      return generator(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    template <class U = T>
      requires std::is_convertible_v<U&&, T>
    std::suspend_always yield_value(U&& value) noexcept(std::is_nothrow_constructible_v<T, U&&>) {
      current.emplace(std::forward<U>(value));
      return {};
    }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { error = std::current_exception(); }
    /// co_await is not for generators: a generator waits with celer::get.
    template <class U>
    std::suspend_never await_transform(U&&) = delete;
  };

  generator() = default;
  generator(generator&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  generator& operator=(generator&& other) noexcept {
    if (this != &other) {
      destroy();
      handle_ = std::exchange(other.handle_, {});
    }
    return *this;
  }
  generator(const generator&) = delete;
  generator& operator=(const generator&) = delete;
  ~generator() { destroy(); }

  /// Runs the body to its next co_yield: true with a value to take (value()), false once
  /// it returned. Rethrows what the body threw.
  bool next() {
    if (!handle_ || handle_.done()) return false;
    handle_.promise().current.reset();
    handle_.resume();
    if (handle_.promise().error) std::rethrow_exception(std::exchange(handle_.promise().error, {}));
    return !handle_.done();
  }
  /// The value the last next() stopped at.
  [[nodiscard]] T& value() { return *handle_.promise().current; }

  /// An input range over the values (for calling a generator locally).
  class iterator {
  public:
    using iterator_category = std::input_iterator_tag;
    using difference_type = std::ptrdiff_t;
    using value_type = T;
    iterator() = default;
    explicit iterator(generator* g) : g_(g) {}
    T& operator*() const { return g_->value(); }
    T* operator->() const { return &g_->value(); }
    iterator& operator++() {
      if (!g_->next()) g_ = nullptr;
      return *this;
    }
    void operator++(int) { ++*this; }
    friend bool operator==(const iterator& a, std::default_sentinel_t) noexcept { return a.g_ == nullptr; }

  private:
    generator* g_ = nullptr;
  };
  iterator begin() {
    iterator it(this);
    if (!next()) return iterator();
    return it;
  }
  std::default_sentinel_t end() const noexcept { return {}; }

private:
  explicit generator(std::coroutine_handle<promise_type> h) noexcept : handle_(h) {}
  void destroy() noexcept {
    if (handle_) handle_.destroy();
  }
  std::coroutine_handle<promise_type> handle_;
};

} // namespace celer
