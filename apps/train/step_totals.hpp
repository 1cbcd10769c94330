#pragma once
// celer-train's driver, its figures: one step's totals over the workers (from each worker's
// step_figures), what the progress line averages, and where the run is. Internal to
// apps/train (driver.cpp); no LibTorch.
#include "config.hpp"
#include "text.hpp"
#include "worker.hpp"

#include <celer/actors/trainer/metrics_log.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace celer::train_app {

using clock_type = std::chrono::steady_clock;


/// One step's figures over all workers.
struct step_total {
  std::int64_t step = 0;
  double loss = 0;  // over all samples of the step
  double accuracy = 0;
  std::int64_t samples = 0;
  /// Per worker, averaged over the workers.
  double bytes_sent = 0;
  double data_wait = 0;
  double compute = 0;
  double allreduce = 0;
  double grad_norm = 0;
  /// batch_size_policy noise_scale: the step's global batch (full batches: samples is less
  /// at an epoch's short last batch) and B_simple after the step (-1: none yet).
  std::int64_t batch_size = 0;
  double noise_scale = -1;
  /// The learning rate of the step's optimiser step (the same on every worker).
  double lr = 0;
  /// async: time held at the staleness bound (per worker, averaged), the most steps any
  /// worker was ahead of the slowest, and samples/s (each worker's over its step time, summed).
  double bound_wait = 0;
  std::int64_t ahead = 0;
  double rate = 0;
  /// The straggler option: workers whose gradients the step went on without.
  std::int64_t skipped = 0;
  /// loss_scale dynamic: the step's scale, and whether it overflowed (and was skipped).
  double loss_scale = 0;
  bool overflow = false;
};

/// A synchronous step's line of metrics (metrics.jsonl and the event file): loss,
/// accuracy, samples/s over `step_seconds`, bytes sent, data-wait, compute, allreduce and
/// gradient norm; the options' own figures are added by the driver.
std::vector<trainer::scalar> sync_figures(const step_total& t, double step_seconds);
/// An asynchronous step's: the same, with push_pull_s, bound_wait_s and ahead.
std::vector<trainer::scalar> async_figures(const step_total& t);

/// One async step's figures over the workers that took it (all of them unless the run
/// stopped early or one failed).
step_total combine_async(const std::vector<step_figures>& figures);

/// Step `i` of every worker's figures (a synchronous step: every worker took it).
step_total combine(const std::vector<std::vector<step_figures>>& by_worker, std::size_t i);

/// What the progress line averages, since the last line.
struct window {
  std::int64_t steps = 0;
  std::int64_t samples = 0;
  double seconds = 0;
  double loss = 0;
  double bytes = 0;
  double data_wait = 0;
  double compute = 0;
  double allreduce = 0;
  double grad_norm = 0;
  double bound_wait = 0;
  std::int64_t ahead = 0;
  std::int64_t skipped = 0;
  /// loss_scale dynamic: steps skipped for overflow, and the last step's scale.
  std::int64_t overflows = 0;
  double loss_scale = 0;
  void add(const step_total& t, double step_seconds) {
    skipped += t.skipped;
    overflows += t.overflow ? 1 : 0;
    loss_scale = t.loss_scale;
    bound_wait += t.bound_wait;
    ahead = std::max(ahead, t.ahead);
    ++steps;
    samples += t.samples;
    seconds += step_seconds;
    loss += t.loss;
    bytes += t.bytes_sent;
    data_wait += t.data_wait;
    compute += t.compute;
    allreduce += t.allreduce;
    grad_norm += t.grad_norm;
  }
};

/// The console's progress line for the steps in `w` (at least one), ending at `step` of
/// `last`: loss, samples/s, bytes sent, the step's time split, gradient norm, and what the
/// run's options add (skipped workers, the loss scale; `val` after a validation).
std::string progress_line(const train_config& cfg, std::int64_t step, std::int64_t last, std::int64_t steps_per_epoch,
                          const window& w, const validation* val, bool async);

/// Where the run is: shared by the synchronous steps and the asynchronous ones.
struct progress {
  /// Steps taken: by every worker (sync), or the last step written (async).
  std::int64_t step = 0;
  std::int64_t last = 0;
  std::int64_t steps_per_epoch = 1;
  std::int64_t eval_every = 1;
  window since_line;
  clock_type::time_point last_line;
  clock_type::time_point train_began;
  std::int64_t trained_samples = 0;
  double trained_seconds = 0;
  validation val;
  bool evaluated = false;
  /// Training samples in every step reported so far, all workers (async: ahead of the
  /// lines written).
  std::int64_t seen_samples = 0;
  /// target_accuracy: when a validation first reached it (the step: rank 0's in async).
  bool reached = false;
  std::int64_t reached_step = 0;
  double reached_seconds = 0;
  std::int64_t reached_samples = 0;
  /// hybrid: the step of the switch (-1: none yet), and each synchronous step's loss (the
  /// plateau rule's).
  std::int64_t switched_at = -1;
  std::vector<double> losses;
};

} // namespace celer::train_app
