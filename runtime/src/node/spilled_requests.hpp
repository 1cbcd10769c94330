#pragma once
// The lease requests a node spilled to the head lately, by request id, and when: resent
// when the head says it restarted (one it received but had not placed yet is lost with it).
// Forgotten when the request comes back here from the head, when its owner cancels it or
// goes, and after `memory` (group requests, which the head holds until their group is
// created, after `group_memory`).
//
//   spilled.remember(m, now)        // as it goes to the head
//   spilled.placed(id)              // back here from the head
//   spilled.forget_if(match)        // cancelled, or its owner or job went
//   spilled.expire(now)             // each tick
//   spilled.resend(now, send)       // the head restarted
//
// One of the node agent's pieces. Threads: the agent's (one message at a time).

#include "protocol/messages.hpp"

#include <chrono>
#include <functional>
#include <unordered_map>

namespace celer {

class spilled_requests {
public:
  using time_point = std::chrono::steady_clock::time_point;
  static constexpr std::chrono::seconds memory{30};
  static constexpr std::chrono::seconds group_memory{600};

  void remember(const protocol::request_lease& m, time_point now) { spilled_[m.spec.id] = {m, now}; }
  void placed(const task_id& request) { spilled_.erase(request); }
  [[nodiscard]] bool holds(const task_id& request) const { return spilled_.contains(request); }
  /// Forgets those whose (owner, request id, job) `match` picks.
  void forget_if(const std::function<bool(const address&, const task_id&, const job_id&)>& match) {
    std::erase_if(spilled_, [&](const auto& e) {
      const auto& s = e.second.request.spec;
      return match(s.owner, s.id, s.job);
    });
  }
  void expire(time_point now) {
    std::erase_if(spilled_, [&](const auto& e) {
      const bool group = e.second.request.spec.where.how == scheduling_strategy::kind::placement_group;
      return now - e.second.at > (group ? group_memory : memory);
    });
  }
  /// Sends each again (`send`), remembered as sent at `now`.
  void resend(time_point now, const std::function<void(const protocol::request_lease&)>& send) {
    for (auto& [id, s] : spilled_) {
      s.at = now;
      send(s.request);
    }
  }
  [[nodiscard]] std::size_t size() const noexcept { return spilled_.size(); }

private:
  struct spilled {
    protocol::request_lease request;
    time_point at;
  };
  std::unordered_map<task_id, spilled> spilled_;
};

} // namespace celer
