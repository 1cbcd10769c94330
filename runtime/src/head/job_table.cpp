// The head's job table (job_table.hpp).
#include "head/job_table.hpp"

#include "log.hpp"

#include <algorithm>

namespace celer {

job_table::job_table(transport& net, head_tables* tables, clock now, live_node where)
  : net_(net), tables_(tables), now_(std::move(now)), where_(std::move(where)) {}

void job_table::restore(const std::vector<job_id>& jobs, time_point heard) {
  for (const auto& job : jobs) heard_[job] = heard;
}

void job_table::on(protocol::job_heartbeat& m) {
  // Ended because its driver went silent, it stays ended: its actors and workers were
  // stopped. A driver that speaks again (it, or its machine, stalled) is told why, so that
  // its waits fail instead of waiting for work that no longer runs.
  // (A running job's heartbeat, the common case, finds its job and looks no further.)
  auto it = heard_.find(m.job);
  if (it == heard_.end()) {
    const auto silenced = std::find_if(silenced_.begin(), silenced_.end(),
                                       [&](const auto& s) { return s.first == m.job; });
    if (silenced != silenced_.end()) {
      if (!m.driver.endpoint.empty()) {
        (void)net_.send(m.driver, protocol::job_ended{m.job, silenced->second});
      }
      return;
    }
    heard_.emplace(m.job, now_());
    if (tables_ != nullptr) tables_->save_job(m.job);
  } else {
    it->second = now_();
  }
  // The driver's own heartbeats name its core (the job manager's, for a submitted job, none).
  if (!m.driver.endpoint.empty() && m.driver.endpoint.size() <= head_guard::max_endpoint_bytes) {
    drivers_[m.job] = m.driver;
  }
  cap_report(m.tasks);
  // A driver's own heartbeats carry its tasks' counts (a histogram, at least); the head's
  // job manager's, for a submitted job it supervises, carry none.
  if (!m.tasks.changes.empty() || m.tasks.changes_dropped > 0) {
    task_list_->apply(m.job, m.tasks.changes, m.tasks.changes_dropped);
    m.tasks.changes.clear();
  }
  if (!m.tasks.latency.empty()) tasks_[m.job] = std::move(m.tasks);
}

void job_table::on(protocol::user_log& m) {
  auto it = drivers_.find(m.job);
  if (it == drivers_.end() || !heard_.contains(m.job)) return;
  if (m.lines.size() > protocol::user_log::max_lines) m.lines.resize(protocol::user_log::max_lines);
  for (auto& line : m.lines) {
    if (line.text.size() > protocol::user_log::max_text) line.text.resize(protocol::user_log::max_text);
    if (line.function.size() > protocol::user_log::max_text) line.function.resize(protocol::user_log::max_text);
  }
  (void)net_.send(it->second, std::move(m));
}

void job_table::on(protocol::package_fetch& m) {
  const auto node = where_(m.node);
  if (!node) return;  // only a live registered node is answered
  protocol::package_data reply{m.digest, {}, {}, m.job};
  if (!read_package_) {
    reply.error = "this head keeps no working directories";
  } else if (auto archive = read_package_(m.job, m.digest)) {
    // A node that has it unpacked already only needs to know that the job may use it.
    if (!m.unpacked) reply.archive = std::move(*archive);
  } else {
    reply.error = archive.error().message();
  }
  (void)net_.send(*node, std::move(reply));
}

void job_table::ended(const job_id& job) {
  if (heard_.erase(job) > 0 && tables_ != nullptr) tables_->drop_job(job);
  drivers_.erase(job);
  if (auto t = tasks_.find(job); t != tasks_.end()) {
    t->second.waiting = t->second.running = 0;  // nothing of an ended job waits or runs
    add_task_counts(ended_tasks_, t->second);
    ended_job_tasks_.emplace_back(job, std::move(t->second));
    if (ended_job_tasks_.size() > max_ended_jobs) ended_job_tasks_.pop_front();
    tasks_.erase(t);
  }
  task_list_->ended(job);
}

std::vector<job_id> job_table::silence_quiet(time_point now, std::chrono::milliseconds timeout) {
  std::vector<job_id> out;
  for (const auto& [job, seen] : heard_) {
    if (now - seen <= timeout) continue;
    const auto quiet = now - seen;
    CELER_LOG(warn, "head", "the driver of job " + job.short_hex() +
                              " stopped heartbeating; stopping the job's actors and workers");
    silenced_.emplace_back(
      job, "the head ended job " + job.short_hex() + ": its driver sent no heartbeat for " + millis(quiet) +
             " (node_timeout_ms is " + millis(timeout) +
             "), so its actors and workers were stopped; run the driver again (if the driver's "
             "machine stalls that long, raise node_timeout_ms on the head)");
    if (silenced_.size() > max_silenced_jobs) silenced_.pop_front();
    out.push_back(job);
  }
  return out;
}

void job_table::credit(std::chrono::steady_clock::duration away, time_point now) {
  for (auto& [job, seen] : heard_) seen = std::min(now, seen + away);
}

std::vector<job_id> job_table::jobs() const {
  std::vector<job_id> out;
  out.reserve(heard_.size());
  for (const auto& [job, seen] : heard_) out.push_back(job);
  return out;
}

void job_table::fill(head_snapshot& s) const {
  s.job_tasks.assign(tasks_.begin(), tasks_.end());
  s.ended_tasks = ended_tasks_;
  s.ended_job_tasks.assign(ended_job_tasks_.begin(), ended_job_tasks_.end());
  s.task_list = task_list_;
}

void job_table::cap_report(protocol::task_counts& t) {
  // What a job reports is kept (task_table: its most recent 10,000 tasks), so each field is
  // capped as it arrives: a name, a detail, the rows of one heartbeat, the histogram.
  constexpr std::size_t max_function = 256, max_detail = 1024;
  const std::string marker = "...[truncated]";
  auto cap = [&](std::string& text, std::size_t limit) {
    if (text.size() <= limit) return;
    text.resize(limit - marker.size());
    // Not in the middle of a UTF-8 sequence: drop continuation bytes and their lead.
    while (!text.empty() && (static_cast<unsigned char>(text.back()) & 0xC0) == 0x80) text.pop_back();
    if (!text.empty() && static_cast<unsigned char>(text.back()) >= 0xC0) text.pop_back();
    text += marker;
  };
  if (t.changes.size() > protocol::max_task_changes) {
    t.changes_dropped += t.changes.size() - protocol::max_task_changes;
    t.changes.resize(protocol::max_task_changes);
  }
  for (auto& e : t.changes) {
    cap(e.function, max_function);
    cap(e.detail, max_detail);
  }
  if (t.latency.size() > protocol::scheduling_latency_bounds.size() + 1) {
    t.latency.resize(protocol::scheduling_latency_bounds.size() + 1);
  }
}

} // namespace celer
