// The head's failure detection: nodes' and drivers' heartbeats, the tick that declares the
// silent ones dead (class head, head.hpp), and its timing (head_liveness.hpp).
#include "head/head_liveness.hpp"

#include "head/head.hpp"

#include "log.hpp"

#include <algorithm>
#include <string>
#include <utility>

namespace celer {

void head::on(protocol::heartbeat& m) {
  const auto began = std::chrono::steady_clock::now();
  struct timed {
    handling_histogram& into;
    std::chrono::steady_clock::time_point began;
    ~timed() { into.add(std::chrono::steady_clock::now() - began); }
  } timing{liveness_.heartbeat_times(), began};
  if (!nodes_.heard(m)) return;  // unknown, or dead (and told so)
  view_.refresh(m.node, m.available, m.gpu_free, m.queued, m.queued_gpus);
}

void head::on(protocol::tick&) {
  // What subscriptions wrote past the last tick's budget, in one batch (head_guard.hpp).
  guard_.new_tick();
  if (tables_) {
    tables_->begin_batch();
    subscriptions_.save_unsaved();
    actors_.save_unsaved();
    tables_->commit_batch();
  }
  if (board_) publish_snapshot();
  if (!recovered_.empty()) {
    CELER_LOG(warn, "head", recovered_);
    recovered_.clear();
  }
  groups_.tick();
  if (!liveness_.declares_dead()) return;
  const auto [now, away] = liveness_.tick();
  if (away.count() > 0) {
    nodes_.credit(away, now);
    jobs_.credit(away, now);
  }
  for (const auto& job : jobs_.silence_quiet(now, liveness_.node_timeout())) {
    protocol::job_finished done{job};
    on(done);
  }
  for (const auto& [id, why] : nodes_.silent(now, liveness_.node_timeout())) declare_dead(id, why);
}

head_liveness::head_liveness(std::chrono::milliseconds node_timeout, clock now)
  : node_timeout_(node_timeout),
    now_(now ? std::move(now) : clock([] { return std::chrono::steady_clock::now(); })) {}

head_liveness::tick_time head_liveness::tick() {
  const auto now = now_();
  if (tick_period_.count() <= 0) return {now};
  const auto previous = std::exchange(last_tick_, now);
  if (!previous) return {now};
  // A tick later than two periods means this head did not run meanwhile (its machine or
  // process stalled): heartbeats may wait unread behind it. Nobody is blamed for that time.
  const auto gap = now - *previous;
  if (gap <= 2 * tick_period_) return {now};
  const auto away = gap - tick_period_;
  CELER_LOG(warn, "head", "this head's tick came " + millis(gap) + " after the last (every " +
                            millis(tick_period_) + "): it was stalled for " + millis(away) +
                            ", which counts against no node's or driver's heartbeats");
  return {now, away};
}

} // namespace celer
