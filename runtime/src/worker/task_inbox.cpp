#include "worker/task_inbox.hpp"

#include <algorithm>

namespace celer {

bool task_inbox::movable(const protocol::message& m) {
  const auto* exec = std::get_if<protocol::execute_task>(&m);
  return exec != nullptr && exec->spec.kind == protocol::task_kind::normal;
}

task_inbox::after task_inbox::deliver(protocol::message& m) {
  std::lock_guard lock(mutex_);
  if (blocked_ > 0 && movable(m)) return after::give_back;
  queue_.push_back(std::move(m));
  if (draining_) return after::nothing;
  draining_ = true;
  return after::wake;
}

std::optional<protocol::message> task_inbox::next() {
  std::lock_guard lock(mutex_);
  if (queue_.empty()) {
    draining_ = false;
    return std::nullopt;
  }
  auto m = std::move(queue_.front());
  queue_.pop_front();
  return m;
}

std::vector<protocol::task_spec> task_inbox::block() {
  std::lock_guard lock(mutex_);
  ++blocked_;
  std::vector<protocol::task_spec> out;
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (movable(*it)) {
      out.push_back(std::move(std::get<protocol::execute_task>(*it).spec));
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

void task_inbox::unblock() {
  std::lock_guard lock(mutex_);
  if (blocked_ > 0) --blocked_;
}

std::optional<protocol::task_spec> task_inbox::take(const task_id& id) {
  std::lock_guard lock(mutex_);
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    auto* exec = std::get_if<protocol::execute_task>(&*it);
    if (exec == nullptr || exec->spec.id != id || exec->spec.kind == protocol::task_kind::actor_creation) {
      continue;
    }
    auto spec = std::move(exec->spec);
    queue_.erase(it);
    return spec;
  }
  return std::nullopt;
}

std::vector<protocol::task_spec> task_inbox::withdraw(const std::vector<task_id>& ids) {
  std::lock_guard lock(mutex_);
  std::vector<protocol::task_spec> out;
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (movable(*it)) {
      auto& spec = std::get<protocol::execute_task>(*it).spec;
      if (std::find(ids.begin(), ids.end(), spec.id) != ids.end()) {
        out.push_back(std::move(spec));
        it = queue_.erase(it);
        continue;
      }
    }
    ++it;
  }
  return out;
}

std::size_t task_inbox::queued() const {
  std::lock_guard lock(mutex_);
  return queue_.size();
}

} // namespace celer
