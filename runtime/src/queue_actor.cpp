// The actor behind celer::queue<T> (<celer/detail/queue_actor.hpp>), registered here: the
// queue's constructor names make_queue_actor, so every program using a queue links this file.
#include <celer/detail/queue_actor.hpp>
#include <celer/remote.hpp>

#include <chrono>

namespace celer::detail {

queue_reply queue_actor::put(std::string item, std::int64_t wait_ms) {
  std::unique_lock lock(mutex_);
  const auto room = [&] { return maxsize_ == 0 || items_.size() < maxsize_; };
  if (!room() && (wait_ms <= 0 || !not_full_.wait_for(lock, std::chrono::milliseconds(wait_ms), room))) {
    return {false, {}, items_.size()};
  }
  items_.push_back(std::move(item));
  const std::uint64_t size = items_.size();
  lock.unlock();
  not_empty_.notify_one();
  return {true, {}, size};
}

queue_reply queue_actor::get(std::int64_t wait_ms) {
  std::unique_lock lock(mutex_);
  const auto some = [&] { return !items_.empty(); };
  if (!some() && (wait_ms <= 0 || !not_empty_.wait_for(lock, std::chrono::milliseconds(wait_ms), some))) {
    return {false, {}, 0};
  }
  queue_reply r{true, std::move(items_.front()), 0};
  items_.pop_front();
  r.size = items_.size();
  lock.unlock();
  not_full_.notify_one();
  return r;
}

std::uint64_t queue_actor::size() {
  std::lock_guard lock(mutex_);
  return items_.size();
}

queue_actor* make_queue_actor(std::uint64_t maxsize) { return new queue_actor(maxsize); }

} // namespace celer::detail

CELER_REMOTE(celer::detail::make_queue_actor, &celer::detail::queue_actor::put, &celer::detail::queue_actor::get,
             &celer::detail::queue_actor::size);
