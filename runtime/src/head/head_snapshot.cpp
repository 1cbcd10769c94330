// The head's snapshots for other threads (head_snapshot.hpp).
#include "head/head.hpp"

namespace celer {

const char* actor_state_name(protocol::actor_state s) noexcept {
  switch (s) {
    case protocol::actor_state::pending: return "PENDING";
    case protocol::actor_state::alive: return "ALIVE";
    case protocol::actor_state::restarting: return "RESTARTING";
    case protocol::actor_state::dead: return "DEAD";
  }
  return "UNKNOWN";
}

const char* group_state_name(protocol::group_state s) noexcept {
  switch (s) {
    case protocol::group_state::pending: return "PENDING";
    case protocol::group_state::created: return "CREATED";
    case protocol::group_state::removed: return "REMOVED";
  }
  return "UNKNOWN";
}

const char* bundle_strategy_name(bundle_strategy s) noexcept {
  switch (s) {
    case bundle_strategy::pack: return "PACK";
    case bundle_strategy::spread: return "SPREAD";
    case bundle_strategy::strict_pack: return "STRICT_PACK";
    case bundle_strategy::strict_spread: return "STRICT_SPREAD";
  }
  return "?";
}

void add_task_counts(protocol::task_counts& into, const protocol::task_counts& more) {
  into.submitted += more.submitted;
  into.finished += more.finished;
  into.failed += more.failed;
  into.retried += more.retried;
  into.waiting += more.waiting;
  into.running += more.running;
  if (into.latency.size() < more.latency.size()) into.latency.resize(more.latency.size());
  for (std::size_t i = 0; i < more.latency.size(); ++i) into.latency[i] += more.latency[i];
  into.latency_sum_us += more.latency_sum_us;
}

protocol::task_counts head_snapshot::all_tasks() const {
  auto all = ended_tasks;
  for (const auto& [job, c] : job_tasks) add_task_counts(all, c);
  return all;
}

std::optional<protocol::task_counts> head_snapshot::tasks_of(const job_id& job) const {
  for (const auto& [j, c] : job_tasks)
    if (j == job) return c;
  for (const auto& [j, c] : ended_job_tasks)
    if (j == job) return c;
  return std::nullopt;
}

void head::publish_snapshot() {
  auto s = std::make_shared<head_snapshot>();
  s->taken = std::chrono::system_clock::now();
  s->heartbeats = liveness_.heartbeat_times();
  actors_.fill(*s);
  groups_.fill(*s);
  jobs_.fill(*s);
  board_->publish(std::move(s));
}

} // namespace celer
