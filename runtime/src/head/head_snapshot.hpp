#pragma once
// What the head knows of actors and placement groups, as a copy other threads may read:
// the HTTP server's /api/actors and /api/placement_groups (docs/dashboard.md). The head
// publishes a new copy on each tick (every heartbeat_ms) when something changed; readers
// take the latest without asking the head, so a busy head is never held up by a dashboard.
//
//   auto board = std::make_shared<head_snapshot_board>();
//   h->publish_to(board);                       // before the head runs
//   auto s = board->latest();                   // any thread; null before the first tick

#include "head/task_table.hpp"
#include "protocol/messages.hpp"

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace celer {

struct actor_summary {
  actor_id id;
  std::string name;
  /// The shared namespace its name lives in ("" for its job's own; task_spec::name_space).
  std::string name_space;
  /// The class (the constructor's registered name when it has none).
  std::string class_name;
  job_id job;
  protocol::actor_state state = protocol::actor_state::pending;
  node_id node;
  /// Its worker process's endpoint ("" while it has none).
  std::string worker;
  std::uint32_t restarts = 0;
  std::int32_t max_restarts = 0;
  /// Why it died ("" while it has not).
  std::string death_reason;
  protocol::resource_set resources;
  std::int32_t priority = 0;
  bool preemptible = false;
  /// Detached (actor_options::lifetime): it outlives its creator's job.
  bool detached = false;
};

/// How long the head took to handle messages of one kind: a histogram of its handler's
/// time (the transport's decryption and decoding, on its receiver thread, come before and
/// are not counted). Two clock reads per message. /metrics: celer_head_heartbeat_seconds.
struct handling_histogram {
  /// Upper bounds, in seconds; counts[bounds.size()] holds what took longer.
  static constexpr std::array<double, 12> bounds{1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5,
                                                 1e-4, 2e-4, 5e-4, 1e-3, 1e-2, 1e-1};
  std::array<std::uint64_t, bounds.size() + 1> counts{};
  std::uint64_t count = 0;
  std::uint64_t sum_ns = 0;
  void add(std::chrono::nanoseconds took) noexcept {
    const double s = static_cast<double>(took.count()) / 1e9;
    std::size_t b = 0;
    while (b < bounds.size() && s > bounds[b]) ++b;
    ++counts[b];
    ++count;
    sum_ns += static_cast<std::uint64_t>(took.count() < 0 ? 0 : took.count());
  }
};

struct head_snapshot {
  /// When the head made it.
  std::chrono::system_clock::time_point taken;
  std::vector<actor_summary> actors;
  std::vector<protocol::placement_group_info> groups;
  /// Actor restarts since this head started (for /metrics).
  std::uint64_t actor_restarts = 0;
  /// What each running job's tasks did, as its driver last said (drivers started by hand
  /// and submitted ones alike); and the totals of the jobs that ended since the head started.
  std::vector<std::pair<job_id, protocol::task_counts>> job_tasks;
  protocol::task_counts ended_tasks;
  /// The last counts of the 1,000 jobs that ended most recently.
  std::vector<std::pair<job_id, protocol::task_counts>> ended_job_tasks;
  /// The time the head took to handle each node heartbeat since it started.
  handling_histogram heartbeats;
  /// Each job's recent tasks (the head's own table, thread-safe: not a copy).
  std::shared_ptr<const task_table> task_list;
  /// A job's counts, running or recently ended; null when its driver never said.
  [[nodiscard]] std::optional<protocol::task_counts> tasks_of(const job_id& job) const;
  /// Everything together: the ended jobs' totals and the running jobs' counts.
  [[nodiscard]] protocol::task_counts all_tasks() const;
};

/// `into` += `more`: totals, what waits and runs, and the latency histogram.
void add_task_counts(protocol::task_counts& into, const protocol::task_counts& more);

/// Where the head leaves its snapshots. Thread-safe.
class head_snapshot_board {
public:
  void publish(std::shared_ptr<const head_snapshot> s) {
    std::lock_guard lock(m_);
    latest_ = std::move(s);
  }
  [[nodiscard]] std::shared_ptr<const head_snapshot> latest() const {
    std::lock_guard lock(m_);
    return latest_;
  }

private:
  mutable std::mutex m_;
  std::shared_ptr<const head_snapshot> latest_;
};

/// "PENDING", "ALIVE", "RESTARTING", "DEAD" (Ray's names).
[[nodiscard]] const char* actor_state_name(protocol::actor_state s) noexcept;
/// "PENDING", "CREATED", "REMOVED".
[[nodiscard]] const char* group_state_name(protocol::group_state s) noexcept;
/// "PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD".
[[nodiscard]] const char* bundle_strategy_name(bundle_strategy s) noexcept;

} // namespace celer
