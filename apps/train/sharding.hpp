#pragma once
// celer-train's speed-weighted shards (sharding: speed; apps/train/README.md, "Workers of
// different speeds"): the step's batch split over the workers in proportion to their speeds
// (celer::gpu::shares), and the rule that re-splits it during the run from the workers' own
// compute times. Pure: no runtime calls, no LibTorch; the driver owns one rebalancer.
//
//   auto split = split_by_speed({3, 1}, 64);                    // {48, 16}
//   rebalancer watch(2, /*interval=*/50);
//   // after each call of k steps, every worker's figures of each step:
//   //   watch.observe(rank, f.samples, f.compute_seconds);
//   if (auto r = watch.after_steps(k, split)) split = r->split;  // and give it to the workers

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace celer::train_app {

/// `total` samples split in proportion to `speeds` by celer::gpu::shares (largest
/// remainder: the parts sum to total), every worker at least 1 (the largest parts give
/// up what the smallest lack). Needs total >= speeds.size().
[[nodiscard]] std::vector<std::int64_t> split_by_speed(const std::vector<double>& speeds, std::int64_t total);

/// A step's compute time under `split` when worker r computes `rates[r]` samples/s: the
/// slowest worker's, which the others wait for in the allreduce.
[[nodiscard]] double step_compute(const std::vector<std::int64_t>& split, const std::vector<double>& rates);

/// "48, 16".
[[nodiscard]] std::string split_text(const std::vector<std::int64_t>& split);

/// A proposed split, the rates it came from (samples/s of compute), and the fraction of a
/// step's compute it saves against the current split at those rates.
struct reshard {
  std::vector<std::int64_t> split;
  std::vector<double> rates;
  double gain = 0;
};

/// Sums each worker's samples and compute seconds over windows of `interval` steps. At a
/// window's end it proposes the split of the measured rates when that would cut the
/// step's compute by at least `min_gain` (a fraction) and the window before said so too
/// (moving the same way): a single window's gain is often what timings wander by on a
/// shared machine, and moving shards for it costs more than it saves.
class rebalancer {
public:
  rebalancer(int workers, std::int64_t interval, double min_gain = 0.10);

  /// One step of worker `rank`: samples drawn and seconds computing them.
  void observe(int rank, std::int64_t samples, double compute_seconds);
  /// After `steps` more steps under `current`: a proposal when a window ended and it gains
  /// enough (the window then starts again either way), else nothing.
  [[nodiscard]] std::optional<reshard> after_steps(std::int64_t steps, const std::vector<std::int64_t>& current);

private:
  std::int64_t interval_;
  double min_gain_;
  std::int64_t steps_ = 0;
  std::vector<std::int64_t> samples_;
  std::vector<double> seconds_;
  /// The last window's proposal, not yet confirmed (empty: none).
  std::vector<std::int64_t> pending_;
};

} // namespace celer::train_app
