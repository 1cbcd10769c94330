// The head's failure detection: nodes' and drivers' heartbeats, and the tick that declares
// the silent ones dead. Part of class head (head.hpp); split from head.cpp by
// responsibility.
#include "head/head.hpp"

#include "log.hpp"

#include <algorithm>
#include <string>
#include <utility>

namespace celer {
namespace {

std::string millis(std::chrono::steady_clock::duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) +
         " ms";
}

/// Jobs ended for a silent driver that the head still answers with job_ended.
constexpr std::size_t max_silenced_jobs = 1000;

} // namespace

void head::on(protocol::heartbeat& m) {
  const auto began = std::chrono::steady_clock::now();
  struct timed {
    handling_histogram& into;
    std::chrono::steady_clock::time_point began;
    ~timed() { into.add(std::chrono::steady_clock::now() - began); }
  } timing{heartbeat_times_, began};
  auto it = nodes_.find(m.node);
  if (it == nodes_.end()) return;
  auto& n = it->second;
  if (!n.alive) {
    // Declared dead, it stays dead: its work has failed over and its owners were told. It
    // hears so on each heartbeat until it goes (a node leaves when told; restarted, it
    // joins as a new node).
    (void)net_.send(n.addr, protocol::node_died{m.node, "the head declared this node dead earlier (" +
                                                          n.dead_reason + ")"});
    return;
  }
  n.last_seen = now_();
  n.workers = m.workers;
  n.store = m.store;
  n.waiting = std::move(m.waiting);
  n.gpu_samples = std::move(m.gpu_samples);
  n.preempting = std::move(m.preempting);
  n.worker_endpoints = std::move(m.worker_endpoints);
  view_.refresh(m.node, m.available, m.gpu_free, m.queued, m.queued_gpus);
}

void head::on(protocol::job_heartbeat& m) {
  // Ended because its driver went silent, it stays ended: its actors and workers were
  // stopped. A driver that speaks again (it, or its machine, stalled) is told why, so that
  // its waits fail instead of waiting for work that no longer runs.
  // (A running job's heartbeat, the common case, finds its job and looks no further.)
  auto it = jobs_.find(m.job);
  if (it == jobs_.end()) {
    const auto silenced = std::find_if(silenced_jobs_.begin(), silenced_jobs_.end(),
                                       [&](const auto& s) { return s.first == m.job; });
    if (silenced != silenced_jobs_.end()) {
      if (!m.driver.endpoint.empty()) {
        (void)net_.send(m.driver, protocol::job_ended{m.job, silenced->second});
      }
      return;
    }
    jobs_.emplace(m.job, now_());
    if (tables_) tables_->save_job(m.job);
  } else {
    it->second = now_();
  }
  cap_report(m.tasks);
  // A driver's own heartbeats carry its tasks' counts (a histogram, at least); the head's
  // job manager's, for a submitted job it supervises, carry none.
  if (!m.tasks.changes.empty() || m.tasks.changes_dropped > 0) {
    task_list_->apply(m.job, m.tasks.changes, m.tasks.changes_dropped);
    m.tasks.changes.clear();
  }
  if (!m.tasks.latency.empty()) job_tasks_[m.job] = std::move(m.tasks);
}

void head::cap_report(protocol::task_counts& t) {
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

void head::on(protocol::tick&) {
  save_subscribers();
  if (board_) publish_snapshot();
  if (!recovered_.empty()) {
    CELER_LOG(warn, "head", recovered_);
    recovered_.clear();
  }
  for (auto& [id, g] : groups_) {
    if (g.info.state == protocol::group_state::pending) try_reserve(g);
  }
  if (node_timeout_.count() <= 0) return;
  const auto now = now_();
  credit_own_stall(now);
  std::vector<std::pair<job_id, std::chrono::steady_clock::duration>> silent;
  for (const auto& [job, seen] : jobs_) {
    if (now - seen > node_timeout_) silent.emplace_back(job, now - seen);
  }
  for (const auto& [job, quiet] : silent) {
    CELER_LOG(warn, "head", "the driver of job " + job.short_hex() +
                              " stopped heartbeating; stopping the job's actors and workers");
    silenced_jobs_.emplace_back(
      job, "the head ended job " + job.short_hex() + ": its driver sent no heartbeat for " +
             millis(quiet) + " (node_timeout_ms is " + millis(node_timeout_) +
             "), so its actors and workers were stopped; run the driver again (if the driver's "
             "machine stalls that long, raise node_timeout_ms on the head)");
    if (silenced_jobs_.size() > max_silenced_jobs) silenced_jobs_.pop_front();
    protocol::job_finished done{job};
    on(done);
  }
  for (auto& [id, n] : nodes_) {
    if (n.alive && now - n.last_seen > node_timeout_) {
      declare_dead(id, n, "no heartbeat for " + millis(now - n.last_seen));
    }
  }
}

void head::credit_own_stall(std::chrono::steady_clock::time_point now) {
  if (tick_period_.count() <= 0) return;
  const auto previous = std::exchange(last_tick_, now);
  if (!previous) return;
  // A tick later than two periods means this head did not run meanwhile (its machine or
  // process stalled): heartbeats may wait unread behind it. Nobody is blamed for that time.
  const auto gap = now - *previous;
  if (gap <= 2 * tick_period_) return;
  const auto away = gap - tick_period_;
  for (auto& [id, n] : nodes_) {
    if (n.alive) n.last_seen = std::min(now, n.last_seen + away);
  }
  for (auto& [job, seen] : jobs_) seen = std::min(now, seen + away);
  CELER_LOG(warn, "head", "this head's tick came " + millis(gap) + " after the last (every " +
                            millis(tick_period_) + "): it was stalled for " + millis(away) +
                            ", which counts against no node's or driver's heartbeats");
}

} // namespace celer
