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
  s->actor_restarts = restarts_total_;
  s->heartbeats = heartbeat_times_;
  s->actors.reserve(actors_.size());
  for (const auto& [id, a] : actors_) {
    actor_summary x;
    x.id = id;
    x.name = a.spec.actor_name;
    x.class_name = a.spec.class_type.empty() ? a.spec.function : a.spec.class_type;
    x.job = a.spec.job;
    x.state = a.state;
    x.node = a.node;
    x.worker = a.worker.endpoint;
    x.restarts = a.restarts;
    x.max_restarts = a.spec.max_restarts;
    if (a.state == protocol::actor_state::dead) x.death_reason = a.fail.message;
    x.resources = a.spec.resources;
    x.priority = a.spec.priority;
    x.preemptible = a.spec.preemptible;
    s->actors.push_back(std::move(x));
  }
  s->groups.reserve(groups_.size());
  for (const auto& [id, g] : groups_) s->groups.push_back(g.info);
  jobs_.fill(*s);
  board_->publish(std::move(s));
}

} // namespace celer
