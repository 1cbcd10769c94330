#pragma once
// celer-train's record of worker failures (the driver's): how many the run has survived, when
// the call that failed began and when its failure was seen, and how each failure was
// recovered from, summary.json's `recoveries`: a worker replaced from its peers' state
// ("peers"), every worker from the newest checkpoint ("checkpoint"), or a worker from the
// parameter servers ("servers"). Internal to apps/train; no LibTorch.
//
//   recovery_log log;
//   log.call_began();                       // each synchronous call
//   log.failure_seen();                     // its first failed worker
//   const int failure = log.count_failure();
//   auto took = log.by_peers(failure, {1}, step);   // once the run goes on
//   log.summarise(summary);
//
// The times default to now; tests pass their own.
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <vector>

namespace celer::train_app {

class recovery_log {
public:
  using clock = std::chrono::steady_clock;

  /// How long a recovery from the peers took: from the failure seen to the run going on, and
  /// how far into its call the failure was seen (a bound on the time from a death to the
  /// driver knowing: the death came during that call).
  struct peer_recovery {
    double seconds = 0;
    double seen_after_call_began = 0;
  };

  explicit recovery_log(clock::time_point now = clock::now()) : call_began_(now), failure_seen_(now) {}

  /// Failures survived so far, synchronous and asynchronous steps together.
  [[nodiscard]] int failures() const noexcept { return failures_; }
  /// One more failure: how many there have been now.
  int count_failure() noexcept { return ++failures_; }
  /// A synchronous call of every worker began.
  void call_began(clock::time_point at = clock::now()) noexcept { call_began_ = at; }
  /// A worker's call was seen to fail.
  void failure_seen(clock::time_point at = clock::now()) noexcept { failure_seen_ = at; }

  /// Failure `failure` was recovered from by replacing the workers `replaced` from their
  /// peers' state; the run goes on at `step`, `now`.
  peer_recovery by_peers(int failure, const std::vector<int>& replaced, std::int64_t step,
                         clock::time_point now = clock::now());
  /// Failure `failure` was recovered from by replacing every worker from the newest
  /// checkpoint, at `step` (0: none yet, the initial weights), `now`.
  void by_checkpoint(int failure, std::int64_t step, clock::time_point now = clock::now());
  /// Failure `failure` was recovered from by replacing worker `rank` from the parameter
  /// servers, at `step`, in `seconds`.
  void by_servers(int failure, int rank, std::int64_t step, double seconds);

  /// summary.json's `recoveries`, when there was any.
  void summarise(nlohmann::ordered_json& summary) const;

private:
  [[nodiscard]] double since_failure_seen(clock::time_point now) const {
    return std::chrono::duration<double>(now - failure_seen_).count();
  }

  int failures_ = 0;
  clock::time_point call_began_;
  clock::time_point failure_seen_;
  /// One object per recovery, in order.
  nlohmann::json entries_ = nlohmann::json::array();
};

} // namespace celer::train_app
