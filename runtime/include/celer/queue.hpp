#pragma once
/// `celer::queue<T>`: a first-in first-out queue shared by the driver, tasks and actors,
/// held by an actor (Ray's ray.util.queue.Queue). Pass it to tasks and actors as an
/// argument: every copy is the same queue.
///
///   celer::queue<int> q({.maxsize = 100});              // celer::make_queue<int>(): no bound
///   q.put(1);                                          // waits while the queue is full
///   celer::task(consume).remote(q);                    // int consume(celer::queue<int> q)
///   int v = q.get(std::chrono::seconds(5));            // waits up to 5 s, else queue_empty_error
///   if (q.empty()) ...;
///   q.shutdown();                                      // kills its actor

#include <celer/api.hpp>
#include <celer/codec.hpp>
#include <celer/detail/queue_actor.hpp>
#include <celer/error.hpp>
#include <celer/options.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace celer {

/// A put found the queue full: at once (put_nowait) or for as long as its timeout allowed
/// (code resource_exhausted, or deadline_exceeded after a wait).
class queue_full_error : public exception {
public:
  queue_full_error(error_code code, const std::string& message) : exception(code, message) {}
};
/// A get found the queue empty: at once (get_nowait) or for as long as its timeout allowed
/// (code not_found, or deadline_exceeded after a wait).
class queue_empty_error : public exception {
public:
  queue_empty_error(error_code code, const std::string& message) : exception(code, message) {}
};

/// Options of a celer::queue.
struct queue_options {
  /// Items it holds at most; 0 is no bound (a put never waits).
  std::size_t maxsize = 0;
  /// Its actor's options (name, resources, placement). `max_concurrency` is how many puts
  /// and gets run at once, waiting ones included (at least 2; below that, 8): a call beyond
  /// them waits at most one slice of a waiting call (1 s).
  actor_options actor;
};

/// A FIFO of T values held by an actor. put/get wait (a `timeout` bounds it, else as long
/// as it takes) while it is full/empty; the _nowait forms do not. Calls from any process of
/// the job, concurrently; items come out in the order they went in. When its actor is gone
/// (shutdown, its node died) calls throw actor_died_error.
template <class T>
class queue {
public:
  /// An empty handle, no queue (what a task's queue parameter is decoded into): assign it
  /// one made with queue(options).
  queue() = default;
  /// Creates the queue's actor (`celer::queue<int> q({.maxsize = 10})`; with no bound,
  /// `celer::make_queue<int>()`). Throws what actor creation throws (infeasible_error, ...).
  explicit queue(queue_options options) : maxsize_(options.maxsize) {
    auto o = std::move(options.actor);
    if (o.max_concurrency < 2) o.max_concurrency = 8;
    actor_ = celer::actor(&detail::make_queue_actor).options(std::move(o)).remote(std::uint64_t{maxsize_});
  }
  /// Adds `value`, waiting while the queue is full: throws queue_full_error when `timeout`
  /// passes first.
  void put(const T& value, timeout_t timeout = {}) {
    const auto reply = wait_for([&](std::int64_t ms) { return call_put(value, ms); }, timeout);
    if (!reply.ok) {
      throw queue_full_error(error_code::deadline_exceeded,
                             "celer::queue::put: the queue stayed full (" + std::to_string(maxsize_) +
                               " items) for the whole timeout");
    }
  }
  /// Adds `value` if there is room now; else throws queue_full_error.
  void put_nowait(const T& value) {
    if (!call_put(value, 0).ok) {
      throw queue_full_error(error_code::resource_exhausted,
                             "celer::queue::put_nowait: the queue is full (" + std::to_string(maxsize_) + " items)");
    }
  }
  /// Takes the oldest value, waiting while the queue is empty: throws queue_empty_error
  /// when `timeout` passes first.
  T get(timeout_t timeout = {}) {
    auto reply = wait_for([&](std::int64_t ms) { return call_get(ms); }, timeout);
    if (!reply.ok) {
      throw queue_empty_error(error_code::deadline_exceeded,
                              "celer::queue::get: the queue stayed empty for the whole timeout");
    }
    return detail::unpack<T>(reply.item, "a celer::queue item");
  }
  /// Takes the oldest value if there is one now; else throws queue_empty_error.
  T get_nowait() {
    auto reply = call_get(0);
    if (!reply.ok) throw queue_empty_error(error_code::not_found, "celer::queue::get_nowait: the queue is empty");
    return detail::unpack<T>(reply.item, "a celer::queue item");
  }
  /// How many items it holds now.
  [[nodiscard]] std::size_t size() const {
    return static_cast<std::size_t>(celer::get(actor_.task(&detail::queue_actor::size).remote()));
  }
  [[nodiscard]] bool empty() const { return size() == 0; }
  [[nodiscard]] bool full() const { return maxsize_ != 0 && size() >= maxsize_; }
  [[nodiscard]] std::size_t maxsize() const noexcept { return maxsize_; }
  /// Kills the queue's actor: its items are gone, and every copy's calls fail from now on.
  void shutdown() { celer::kill(actor_); }
  /// Whether this is a queue (not an empty handle).
  [[nodiscard]] bool valid() const noexcept { return actor_.valid(); }

  MSGPACK_DEFINE(actor_, maxsize_)

private:
  /// How long one call may wait on the actor (a slice: see queue_actor).
  static constexpr std::int64_t slice_ms = 1000;

  detail::queue_reply call_put(const T& value, std::int64_t wait_ms) const {
    return celer::get(actor_.task(&detail::queue_actor::put).remote(detail::pack(value), wait_ms));
  }
  detail::queue_reply call_get(std::int64_t wait_ms) const {
    return celer::get(actor_.task(&detail::queue_actor::get).remote(wait_ms));
  }
  /// Calls `one(ms)` until it succeeds or `timeout` passes, each call waiting at most a
  /// slice on the actor (woken at once by the put or get it waits for).
  template <class Call>
  detail::queue_reply wait_for(Call one, timeout_t timeout) const {
    using clock = std::chrono::steady_clock;
    // No optional here: GCC 12 at -O2 takes its time point for uninitialised.
    const bool bounded = timeout.has_value();
    const clock::time_point deadline = clock::now() + timeout.value_or(std::chrono::nanoseconds(0));
    for (;;) {
      std::int64_t ms = slice_ms;
      if (bounded) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock::now()).count();
        ms = std::clamp<std::int64_t>(left, 0, slice_ms);
      }
      auto reply = one(ms);
      if (reply.ok || (bounded && clock::now() >= deadline)) return reply;
    }
  }

  actor_handle<detail::queue_actor> actor_;
  std::size_t maxsize_ = 0;
};

/// A new queue of T values (`celer::make_queue<int>()`: no bound).
template <class T>
queue<T> make_queue(queue_options options = {}) {
  return queue<T>(std::move(options));
}

} // namespace celer
