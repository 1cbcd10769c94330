// Which shared namespaces each job is let into (namespace_grants.hpp).
#include "transport/namespace_grants.hpp"

#include "transport/credentials.hpp"

#include <algorithm>
#include <utility>

namespace celer {

void namespace_grants::grant(const job_id& job, std::vector<std::string> namespaces) {
  std::lock_guard lock(mutex_);
  if (namespaces.empty()) {
    grants_.erase(job);
    return;
  }
  grants_[job] = std::move(namespaces);
}

void namespace_grants::host(const std::string& name_space) {
  std::lock_guard lock(mutex_);
  hosted_[namespace_job(name_space)] = name_space;
}

void namespace_grants::forget(const job_id& job) {
  std::lock_guard lock(mutex_);
  grants_.erase(job);
  hosted_.erase(job);
}

bool namespace_grants::may_enter_locked(const job_id& job, std::string_view name_space) const {
  auto it = grants_.find(job);
  if (it == grants_.end() || name_space.empty()) return false;
  return std::any_of(it->second.begin(), it->second.end(),
                     [&](const std::string& n) { return n == every || n == name_space; });
}

bool namespace_grants::may_enter(const job_id& job, std::string_view name_space) const {
  std::lock_guard lock(mutex_);
  return may_enter_locked(job, name_space);
}

bool namespace_grants::may_meet(const job_id& a, const job_id& b) const {
  std::lock_guard lock(mutex_);
  if (auto host = hosted_.find(b); host != hosted_.end() && may_enter_locked(a, host->second)) return true;
  if (auto host = hosted_.find(a); host != hosted_.end() && may_enter_locked(b, host->second)) return true;
  return false;
}

std::optional<std::string> namespace_grants::hosted(const job_id& job) const {
  std::lock_guard lock(mutex_);
  if (auto it = hosted_.find(job); it != hosted_.end()) return it->second;
  return std::nullopt;
}

} // namespace celer
