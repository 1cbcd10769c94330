#pragma once
// Internals of <celer/queue.hpp>: the actor behind every celer::queue<T>, holding values as
// their msgpack bytes (one registered actor class serves every T). Defined, and registered,
// in runtime/src/queue_actor.cpp. Include <celer/queue.hpp>, not this header.

#include <celer/codec.hpp>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>

namespace celer::detail {

/// What a queue call answers: done (with the value, for a get), or not within its wait.
struct queue_reply {
  bool ok = false;
  std::string item;
  std::uint64_t size = 0;
  MSGPACK_DEFINE(ok, item, size)
};

/// A FIFO of packed values with room for `maxsize` (0: no bound). Its calls run on
/// several threads (max_concurrency): a put or get that must wait blocks on a condition
/// variable, woken by the get or put it waits for, for at most `wait_ms` (the client asks
/// again while its own timeout allows), so that a waiting call never holds the actor for
/// long: stopping it, and calls beyond its threads, wait a slice at most.
class queue_actor {
public:
  explicit queue_actor(std::uint64_t maxsize) : maxsize_(maxsize) {}
  /// Adds `item` when there is room, waiting up to `wait_ms` for some (0: not at all).
  queue_reply put(std::string item, std::int64_t wait_ms);
  /// Takes the oldest item, waiting up to `wait_ms` for one (0: not at all).
  queue_reply get(std::int64_t wait_ms);
  std::uint64_t size();

private:
  const std::uint64_t maxsize_;
  std::mutex mutex_;  // guards items_
  std::condition_variable not_empty_, not_full_;
  std::deque<std::string> items_;
};

queue_actor* make_queue_actor(std::uint64_t maxsize);

} // namespace celer::detail
