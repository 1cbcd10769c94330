#pragma once
/// What `.remote(...)` gives for a streaming generator (a remote function or actor method
/// returning celer::generator<T>, <celer/generator.hpp>): its values as refs, in the order
/// it made them, each ready as soon as it was made, while the generator still runs. As
/// Ray's ObjectRefGenerator.
///
///   celer::ref_stream<std::vector<float>> s = celer::task(batches).remote(path, 64);
///   for (celer::object_ref<std::vector<float>> ref : s) train_on(celer::get(ref));
///
///   while (auto ref = s.next(std::chrono::seconds(5))) ...;  // or one at a time
///
/// The error that ends a generator comes at the position it happened: the ref after its
/// last value fails with it (get throws), and the stream ends after that. With
/// task_options::generator_backpressure N the generator waits while N values are not taken.
/// Dropping the stream (every copy) frees the values not taken; a generator still running
/// goes on to its end without waiting for a consumer (celer::cancel(stream) stops it).
/// Only the process that made the call reads its stream.

#include <celer/detail/calls.hpp>
#include <celer/fwd.hpp>
#include <celer/handles.hpp>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <utility>

namespace celer {

template <class T>
class ref_stream {
public:
  using value_type = T;
  ref_stream() = default;

  /// The ref to the next value, waiting for the generator to make it (up to `timeout`:
  /// get_timeout_error past it); nullopt once every value was taken. After a failure, the
  /// ref that fails with it, then nullopt.
  std::optional<object_ref<T>> next(timeout_t timeout = std::nullopt) {
    auto r = detail::stream_next(state(), timeout);
    if (!r) return std::nullopt;
    return detail::restore<T>(*r);
  }
  /// The generator's own return: ready once it ended; celer::get gives how many values it
  /// made, or throws the error that ended it.
  [[nodiscard]] object_ref<std::uint64_t> completed() const { return detail::restore<std::uint64_t>(state().end); }
  [[nodiscard]] bool valid() const noexcept { return s_ != nullptr; }

  /// The values as an input range, each `next()` without a timeout.
  class iterator {
  public:
    using iterator_category = std::input_iterator_tag;
    using difference_type = std::ptrdiff_t;
    using value_type = object_ref<T>;
    iterator() = default;
    explicit iterator(ref_stream* s) : s_(s) { ++*this; }
    const object_ref<T>& operator*() const { return *current_; }
    const object_ref<T>* operator->() const { return &*current_; }
    iterator& operator++() {
      current_ = s_->next();
      if (!current_) s_ = nullptr;
      return *this;
    }
    void operator++(int) { ++*this; }
    friend bool operator==(const iterator& a, std::default_sentinel_t) noexcept { return a.s_ == nullptr; }

  private:
    ref_stream* s_ = nullptr;
    std::optional<object_ref<T>> current_;
  };
  iterator begin() { return iterator(this); }
  std::default_sentinel_t end() const noexcept { return {}; }

private:
  template <class F>
  friend class task_builder;
  template <class Method>
  friend class actor_call_builder;
  explicit ref_stream(std::shared_ptr<detail::stream_state> s) : s_(std::move(s)) {}
  const detail::stream_state& state() const {
    if (!s_) throw exception(error_code::invalid_argument, "celer::ref_stream: an empty stream (default-made or moved from)");
    return *s_;
  }
  std::shared_ptr<detail::stream_state> s_;
};

} // namespace celer
