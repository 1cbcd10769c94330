#include "core/pending_lease_requests.hpp"

#include <algorithm>

namespace celer {

task_id pending_lease_requests::open(std::size_t cls) {
  const task_id id = ids_.next();
  by_id_[id] = cls;
  if (per_class_.size() <= cls) per_class_.resize(cls + 1, 0);
  ++per_class_[cls];
  return id;
}

std::optional<std::size_t> pending_lease_requests::close(const task_id& id) {
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return std::nullopt;
  const std::size_t cls = it->second;
  by_id_.erase(it);
  --per_class_[cls];
  return cls;
}

std::vector<task_id> pending_lease_requests::withdraw(std::optional<std::size_t> cls) {
  std::vector<task_id> ids;
  for (auto it = by_id_.begin(); it != by_id_.end();) {
    if (cls && it->second != *cls) {
      ++it;
      continue;
    }
    ids.push_back(it->first);
    --per_class_[it->second];
    it = by_id_.erase(it);
  }
  return ids;
}

void pending_lease_requests::forget_all() {
  by_id_.clear();
  std::fill(per_class_.begin(), per_class_.end(), 0);
}

} // namespace celer
