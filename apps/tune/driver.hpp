#pragma once
// The experiment loop: keeps up to max_concurrent trial actors training, one epoch call
// outstanding each; hands each result to the scheduler (go on, stop, or PBT's exploit) and
// each finished trial to the searcher; saves checkpoints; survives trial failures; writes
// the experiment directory; draws the progress table. Runs on the caller's thread, after
// celer::init.
//
//   celer::init(...);
//   int code = celer::tune_app::run_experiment(cfg, {.resume = false, .tty = true}, std::cout);
#include "config.hpp"

#include <atomic>
#include <cstdint>
#include <iosfwd>

namespace celer::tune_app {

struct driver_options {
  /// Continue the experiment in the output directory (its experiment.json is the config).
  bool resume = false;
  /// Redraw a live table (a terminal) rather than print a line per event.
  bool tty = false;
  /// Set (by a signal handler) to stop: running trials are left to a later --resume.
  const std::atomic<bool>* stop_requested = nullptr;
  /// For tests (CELER_TUNE_INJECT_FAILURE=TRIAL:EPOCH[:TIMES]): that trial throws at that
  /// epoch, that many times (default 1).
  std::int64_t fail_trial = -1;
  std::int64_t fail_epoch = 0;
  int fail_times = 1;
  /// ...TRIAL:EPOCH:exit: its worker process exits instead (once; on a cluster only).
  bool fail_by_exit = false;
  /// How the runtime runs, for the report ("embedded", or the cluster's address).
  std::string where = "embedded";
};

/// Exit codes: 0 when the experiment ran to its end with at least one trial that did not
/// fail; 1 when every trial failed (or the directory could not be written); 130 when
/// stopped by stop_requested.
[[nodiscard]] int run_experiment(const experiment_config& cfg, const driver_options& options, std::ostream& out);

} // namespace celer::tune_app
