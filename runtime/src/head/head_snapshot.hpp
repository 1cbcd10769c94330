#pragma once
// What the head knows of actors and placement groups, as a copy other threads may read:
// the HTTP server's /api/actors and /api/placement_groups (docs/dashboard.md). The head
// publishes a new copy on each tick (every heartbeat_ms) when something changed; readers
// take the latest without asking the head, so a busy head is never held up by a dashboard.
//
//   auto board = std::make_shared<head_snapshot_board>();
//   h->publish_to(board);                       // before the head runs
//   auto s = board->latest();                   // any thread; null before the first tick

#include "protocol/messages.hpp"

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace celer {

struct actor_summary {
  actor_id id;
  std::string name;
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
};

struct head_snapshot {
  /// When the head made it.
  std::chrono::system_clock::time_point taken;
  std::vector<actor_summary> actors;
  std::vector<protocol::placement_group_info> groups;
  /// Actor restarts since this head started (for /metrics).
  std::uint64_t actor_restarts = 0;
};

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
