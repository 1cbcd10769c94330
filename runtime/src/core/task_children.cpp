#include "core/task_children.hpp"

namespace celer {

void task_children::add(const task_id& parent, const object_id& child) {
  std::lock_guard lock(mutex_);
  children_[parent].push_back(child);
  count_.store(children_.size(), std::memory_order_release);
}

std::vector<object_id> task_children::take(const task_id& parent) {
  std::lock_guard lock(mutex_);
  auto it = children_.find(parent);
  if (it == children_.end()) return {};
  auto out = std::move(it->second);
  children_.erase(it);
  count_.store(children_.size(), std::memory_order_release);
  return out;
}

void task_children::forget(const task_id& parent) {
  if (count_.load(std::memory_order_acquire) == 0) return;
  std::lock_guard lock(mutex_);
  children_.erase(parent);
  count_.store(children_.size(), std::memory_order_release);
}

std::size_t task_children::parents() const {
  std::lock_guard lock(mutex_);
  return children_.size();
}

} // namespace celer
