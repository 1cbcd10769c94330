#include "worker/running_calls.hpp"

#include <algorithm>

namespace celer {

running_calls::slot* running_calls::start(const task_id& task) {
  std::lock_guard lock(mutex_);
  slot* free = nullptr;
  for (auto& s : slots_) {
    if (!s->in_use) {
      free = s.get();
      break;
    }
  }
  if (free == nullptr) free = slots_.emplace_back(std::make_unique<slot>()).get();
  free->in_use = true;
  free->task = task;
  bool early = false;
  if (!early_.empty()) {
    if (auto it = std::find(early_.begin(), early_.end(), task); it != early_.end()) {
      early_.erase(it);
      early = true;
    }
  }
  free->cancelled.store(early, std::memory_order_relaxed);
  free->consumed = 0;
  return free;
}

void running_calls::finish(slot* s) {
  std::lock_guard lock(mutex_);
  s->in_use = false;
  s->task = {};
}

bool running_calls::cancel(const task_id& task) {
  std::lock_guard lock(mutex_);
  for (auto& s : slots_) {
    if (s->in_use && s->task == task) {
      s->cancelled.store(true, std::memory_order_relaxed);
      room_.notify_all();
      return true;
    }
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
  for (auto& s : slots_) {
    if (s->in_use && s->task == task) {
      if (consumed > s->consumed) {
        s->consumed = consumed;
        room_.notify_all();
      }
      return;
    }
  }
}

std::size_t running_calls::running() const {
  std::lock_guard lock(mutex_);
  return static_cast<std::size_t>(
    std::count_if(slots_.begin(), slots_.end(), [](const auto& s) { return s->in_use; }));
}

} // namespace celer
