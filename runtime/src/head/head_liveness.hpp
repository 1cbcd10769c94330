#pragma once
// The head's clock and the timing of its failure detection: how long a node or driver may be
// silent (node_timeout), when the head's ticks are due, and how long the head itself was
// stalled between two ticks (time that counts against nobody's heartbeats). The node table
// and job table keep who was heard when; the head asks them on each tick who has been silent
// too long (head::on(tick), head_liveness.cpp). A piece of the head, on its actor: no locks.

#include "head/head_snapshot.hpp"

#include <chrono>
#include <functional>
#include <optional>

namespace celer {

class head_liveness {
public:
  using clock = std::function<std::chrono::steady_clock::time_point()>;
  using time_point = std::chrono::steady_clock::time_point;

  /// `node_timeout`: zero never declares anyone dead (embedded mode, where nothing ticks).
  /// `now`: steady_clock's when empty; tests pass a fake.
  head_liveness(std::chrono::milliseconds node_timeout, clock now);

  /// The clock the head and its managers read.
  [[nodiscard]] const clock& now() const noexcept { return now_; }
  [[nodiscard]] std::chrono::milliseconds node_timeout() const noexcept { return node_timeout_; }
  /// Whether the silent are declared dead at all.
  [[nodiscard]] bool declares_dead() const noexcept { return node_timeout_.count() > 0; }
  /// The head is ticked every `period`; without it, a late tick is not noticed.
  void expect_ticks_every(std::chrono::milliseconds period) noexcept { tick_period_ = period; }

  /// What a tick finds: the time, and how long the head was away since the last tick (zero
  /// unless the tick came later than two periods: then the head's process or machine
  /// stalled, heartbeats may have waited unread behind it, and the stall is logged).
  struct tick_time {
    time_point now;
    std::chrono::steady_clock::duration away{};
  };
  tick_time tick();

  /// The time each heartbeat took to handle (published for /metrics).
  [[nodiscard]] handling_histogram& heartbeat_times() noexcept { return heartbeat_times_; }
  [[nodiscard]] const handling_histogram& heartbeat_times() const noexcept { return heartbeat_times_; }

private:
  std::chrono::milliseconds node_timeout_;
  clock now_;
  /// expect_ticks_every's period (zero: none) and when the last tick came.
  std::chrono::milliseconds tick_period_{0};
  std::optional<time_point> last_tick_;
  handling_histogram heartbeat_times_;
};

} // namespace celer
