// Who a job key belongs to (job_keys.hpp).
#include "transport/job_keys.hpp"

#include <utility>

namespace celer {

void job_key_table::add(const std::string& key, const job_id& job) {
  std::lock_guard lock(mutex_);
  if (forgetful_ && keys_.size() >= max_forgetful_keys) keys_.clear();
  keys_[key] = job;
}

void job_key_table::erase(const std::string& key) {
  std::lock_guard lock(mutex_);
  keys_.erase(key);
}

std::optional<job_id> job_key_table::find(const std::string& key) const {
  std::lock_guard lock(mutex_);
  if (auto it = keys_.find(key); it != keys_.end()) return it->second;
  return std::nullopt;
}

std::optional<std::string> job_key_table::key_of(const job_id& job) const {
  std::lock_guard lock(mutex_);
  for (const auto& [key, j] : keys_) {
    if (j == job) return key;
  }
  return std::nullopt;
}

std::vector<job_id> job_key_table::jobs() const {
  std::lock_guard lock(mutex_);
  std::vector<job_id> out;
  out.reserve(keys_.size());
  for (const auto& [_, job] : keys_) out.push_back(job);
  return out;
}

std::size_t job_key_table::size() const {
  std::lock_guard lock(mutex_);
  return keys_.size();
}

bool key_lookups::wait(const std::string& key, zap_request r) {
  auto& waiting = by_key_[key];
  waiting.push_back(std::move(r));
  ++waiting_;
  return waiting.size() == 1;
}

std::vector<zap_request> key_lookups::answered(std::string_view key) {
  auto it = by_key_.find(std::string(key));
  if (it == by_key_.end()) return {};
  auto out = std::move(it->second);
  by_key_.erase(it);
  waiting_ -= out.size();
  return out;
}

std::vector<zap_request> key_lookups::expired(std::chrono::steady_clock::time_point now) {
  std::vector<zap_request> out;
  for (auto it = by_key_.begin(); it != by_key_.end();) {
    if (now - it->second.front().since < timeout) {
      ++it;
      continue;
    }
    waiting_ -= it->second.size();
    for (auto& r : it->second) out.push_back(std::move(r));
    it = by_key_.erase(it);
  }
  return out;
}

} // namespace celer
