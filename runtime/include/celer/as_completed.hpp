#pragma once
/// `celer::as_completed(refs)`: the refs in the order their objects become ready (hold a
/// value or an error), as a range to loop over; built on `celer::wait`.
///
///   std::vector<celer::object_ref<int>> refs = ...;
///   for (const celer::object_ref<int>& r : celer::as_completed(refs, std::chrono::seconds(30))) {
///     std::cout << celer::get(r) << "\n";   // ready: get does not block
///   }

#include <celer/api.hpp>
#include <celer/error.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace celer {

/// What `celer::as_completed` returns: a single-pass range of the refs, each yielded once,
/// as soon as it is ready. Incrementing the iterator waits (celer::wait) for the next one;
/// when `timeout` (for the whole loop) passes first, it throws get_timeout_error naming how
/// many refs were still pending. Not for use from several threads at once.
template <class T>
class completion_range {
public:
  completion_range(std::vector<object_ref<T>> refs, timeout_t timeout) : pending_(std::move(refs)) {
    if (timeout) deadline_ = std::chrono::steady_clock::now() + *timeout;
  }

  class iterator {
  public:
    using iterator_category = std::input_iterator_tag;
    using value_type = object_ref<T>;
    using difference_type = std::ptrdiff_t;
    using pointer = const object_ref<T>*;
    using reference = const object_ref<T>&;

    iterator() = default;
    explicit iterator(completion_range* range) : range_(range) { range_->advance(); }
    reference operator*() const { return range_->current_; }
    pointer operator->() const { return &range_->current_; }
    iterator& operator++() {
      range_->advance();
      return *this;
    }
    void operator++(int) { ++*this; }
    friend bool operator==(const iterator& it, std::default_sentinel_t) { return it.at_end(); }

  private:
    [[nodiscard]] bool at_end() const { return range_ == nullptr || range_->done_; }
    completion_range* range_ = nullptr;
  };

  iterator begin() { return iterator(this); }
  std::default_sentinel_t end() const { return {}; }
  /// Refs not yielded yet.
  [[nodiscard]] std::size_t pending() const noexcept { return pending_.size() + ready_.size(); }

private:
  /// Moves to the next ready ref, waiting for one when none is known to be ready.
  void advance() {
    if (ready_.empty()) {
      if (pending_.empty()) {
        done_ = true;
        return;
      }
      timeout_t left;
      if (deadline_) {
        left = std::max(std::chrono::nanoseconds(0), std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                       *deadline_ - std::chrono::steady_clock::now()));
      }
      // Every ref ready now comes back at once: later steps need no wait.
      auto got = celer::wait(pending_, /*num_returns=*/1, left);
      if (got.ready.empty()) {
        throw get_timeout_error("celer::as_completed: the timeout passed with " +
                                std::to_string(got.pending.size()) + " of the refs still pending");
      }
      ready_.assign(got.ready.rbegin(), got.ready.rend());  // taken from the back, in input order
      pending_ = std::move(got.pending);
    }
    current_ = std::move(ready_.back());
    ready_.pop_back();
  }

  std::vector<object_ref<T>> pending_;
  /// Ready and not yielded yet, the next at the back.
  std::vector<object_ref<T>> ready_;
  object_ref<T> current_;
  std::optional<std::chrono::steady_clock::time_point> deadline_;
  bool done_ = false;
};

/// The refs in the order they become ready (a value or an error: `get` then returns or
/// throws at once). `timeout` bounds the whole loop: when it passes, the step that waits
/// throws get_timeout_error.
template <class T>
completion_range<T> as_completed(std::vector<object_ref<T>> refs, timeout_t timeout = {}) {
  return completion_range<T>(std::move(refs), timeout);
}

} // namespace celer
