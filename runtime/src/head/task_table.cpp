#include "head/task_table.hpp"

#include <algorithm>
#include <cctype>

namespace celer {

task_table::task_table(std::size_t per_job, std::size_t ended_jobs)
  : per_job_(std::max<std::size_t>(1, per_job)), ended_jobs_(ended_jobs) {}

void task_table::apply(const job_id& job, const std::vector<protocol::task_event>& changes, std::uint64_t dropped) {
  std::lock_guard lock(mutex_);
  changes_dropped_ += dropped;
  if (changes.empty()) return;
  auto& t = jobs_[job];
  for (const auto& e : changes) {
    auto [at, fresh] = t.by_task.try_emplace(e.task, next_);
    if (fresh) {
      row r;
      r.task = e.task;
      r.job = job;
      r.submitted_ms = e.at_ms;
      t.rows.emplace(next_++, std::move(r));
    }
    auto& r = t.rows.at(at->second);
    if (!e.function.empty()) r.function = e.function;
    r.state = e.state;
    if (e.attempt > 0) r.attempt = e.attempt;
    r.updated_ms = e.at_ms;
    if (e.state == protocol::task_state::running) {
      r.node = e.detail;
      r.error.clear();
    } else if (!e.detail.empty()) {
      r.error = e.detail;
    }
  }
  while (t.rows.size() > per_job_) {
    t.by_task.erase(t.rows.begin()->second.task);
    t.rows.erase(t.rows.begin());
    ++rows_dropped_;
  }
}

void task_table::ended(const job_id& job) {
  std::lock_guard lock(mutex_);
  if (!jobs_.contains(job) || std::find(ended_.begin(), ended_.end(), job) != ended_.end()) return;
  ended_.push_back(job);
  while (ended_.size() > ended_jobs_) {
    auto gone = jobs_.find(ended_.front());
    if (gone != jobs_.end()) {
      rows_dropped_ += gone->second.rows.size();
      jobs_.erase(gone);
    }
    ended_.pop_front();
  }
}

task_table::page task_table::list(const query& q) const {
  std::lock_guard lock(mutex_);
  page p;
  p.changes_dropped = changes_dropped_;
  p.rows_dropped = rows_dropped_;
  std::vector<const row*> match;
  auto take = [&](const job_tasks& t) {
    for (auto it = t.rows.rbegin(); it != t.rows.rend(); ++it)
      if (!q.state || it->second.state == *q.state) match.push_back(&it->second);
  };
  for (const auto& [job, t] : jobs_)
    if (q.job.empty() || job.hex() == q.job || (q.job.size() == 8 && job.hex().starts_with(q.job))) take(t);
  // Newest first (by submission time; a job's own order breaks ties).
  std::stable_sort(match.begin(), match.end(), [](const row* a, const row* b) { return a->submitted_ms > b->submitted_ms; });
  p.total = match.size();
  for (std::size_t i = q.offset; i < match.size() && p.rows.size() < q.limit; ++i) p.rows.push_back(*match[i]);
  return p;
}

const char* task_state_name(protocol::task_state s) noexcept {
  switch (s) {
  case protocol::task_state::waiting: return "WAITING";
  case protocol::task_state::running: return "RUNNING";
  case protocol::task_state::finished: return "FINISHED";
  case protocol::task_state::failed: return "FAILED";
  }
  return "?";
}

std::optional<protocol::task_state> task_state_named(std::string name) {
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  for (auto s : {protocol::task_state::waiting, protocol::task_state::running, protocol::task_state::finished,
                 protocol::task_state::failed})
    if (name == task_state_name(s)) return s;
  return std::nullopt;
}

} // namespace celer
