#include "worker/running_calls.hpp"

#include <algorithm>

namespace celer {

running_calls::slot* running_calls::start(const task_id& task) {
  std::lock_guard lock(mutex_);
  slot* s = nullptr;
  if (!free_.empty()) {
    s = free_.back();
    free_.pop_back();
  } else {
    s = slots_.emplace_back(std::make_unique<slot>()).get();
  }
  s->in_use = true;
  s->task = task;
  by_task_[task] = s;
  bool early = false;
  if (!early_.empty()) {
    if (auto it = std::find(early_.begin(), early_.end(), task); it != early_.end()) {
      early_.erase(it);
      early = true;
    }
  }
  s->cancelled.store(early, std::memory_order_relaxed);
  s->consumed = 0;
  return s;
}

void running_calls::finish(slot* s) {
  std::lock_guard lock(mutex_);
  if (auto it = by_task_.find(s->task); it != by_task_.end() && it->second == s) by_task_.erase(it);
  s->in_use = false;
  s->task = {};
  free_.push_back(s);
}

running_calls::slot* running_calls::find(const task_id& task) const {
  auto it = by_task_.find(task);
  return it == by_task_.end() ? nullptr : it->second;
}

bool running_calls::cancel(const task_id& task) {
  std::lock_guard lock(mutex_);
  if (slot* s = find(task)) {
    s->cancelled.store(true, std::memory_order_relaxed);
    room_.notify_all();
    return true;
  }
  if (std::find(early_.begin(), early_.end(), task) == early_.end()) {
    if (early_.size() >= remembered) early_.pop_front();
    early_.push_back(task);
  }
  return false;
}

namespace {
bool room_for(const running_calls::slot& s, std::uint64_t produced, std::uint64_t window) {
  return s.cancelled.load(std::memory_order_relaxed) || s.consumed >= produced || produced - s.consumed < window;
}
} // namespace

bool running_calls::has_room(slot* s, std::uint64_t produced, std::uint64_t window) {
  std::lock_guard lock(mutex_);
  return room_for(*s, produced, window);
}

bool running_calls::wait_room(slot* s, std::uint64_t produced, std::uint64_t window) {
  std::unique_lock lock(mutex_);
  room_.wait(lock, [&] { return room_for(*s, produced, window); });
  return !s->cancelled.load(std::memory_order_relaxed);
}

void running_calls::acked(const task_id& task, std::uint64_t consumed) {
  std::lock_guard lock(mutex_);
  if (slot* s = find(task); s != nullptr && consumed > s->consumed) {
    s->consumed = consumed;
    room_.notify_all();
  }
}

std::size_t running_calls::running() const {
  std::lock_guard lock(mutex_);
  return by_task_.size();
}

} // namespace celer
