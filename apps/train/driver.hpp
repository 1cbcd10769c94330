#pragma once
// The training loop: creates the trainer-worker actors, has them join their group, drives
// them `steps_per_call` steps at a time (every worker the same call), evaluates on the
// validation split (rank 0), checkpoints, prints a progress line and writes the metrics
// (metrics.jsonl, TensorBoard event files) into the output directory. Runs on the caller's
// thread, after celer::init.
//
//   celer::init(...);
//   int code = celer::train_app::run_training(cfg, {.resume = false}, std::cout);
#include "config.hpp"

#include <atomic>
#include <iosfwd>
#include <string>

namespace celer::train_app {

struct driver_options {
  /// Continue from the newest checkpoint in <output>/checkpoints.
  bool resume = false;
  /// Set (by a signal handler) to stop after the current call.
  const std::atomic<bool>* stop_requested = nullptr;
  /// For tests (CELER_TRAIN_INJECT_FAILURE=RANK:STEP): that worker throws at that step, in
  /// the first set of workers only (the replacements do not).
  int fail_rank = -1;
  std::int64_t fail_step = 0;
  /// ...RANK:STEP:exit: its worker process exits instead (on a cluster).
  bool fail_by_exit = false;
  /// For tests (CELER_TRAIN_SLOW_WORKER=RANK:MS): that worker's loader takes MS per batch.
  int slow_rank = -1;
  double slow_ms = 0;
  /// For tests (CELER_TRAIN_INJECT_OVERFLOW=RANK:STEP): that worker's gradient holds an inf
  /// at that step, as an fp16 gradient that overflowed would (loss_scale dynamic skips it).
  int overflow_rank = -1;
  std::int64_t overflow_step = 0;
  /// For tests and benchmarks (CELER_TRAIN_WORKER_SPEED=RANK:FRACTION): that worker computes
  /// at FRACTION of its speed, as a slower device would (worker_spec::speed_fraction).
  int speed_rank = -1;
  double speed_fraction = 1;
  /// ...:STEP: from that step on (0: from the start, the speed probe included).
  std::int64_t speed_from_step = 0;
  /// How the runtime runs, for the first line ("embedded celer", or the cluster's address).
  std::string where = "embedded celer";
};

/// Exit codes: 0 when the run reached its last step and the replicas ended equal; 1 when a
/// worker failed (more than max_failures times), the output could not be written, or the
/// replicas differ; 2 when the runtime has too few CPUs for the workers; 130 when stopped
/// by stop_requested.
[[nodiscard]] int run_training(const train_config& cfg, const driver_options& options, std::ostream& out);

} // namespace celer::train_app
