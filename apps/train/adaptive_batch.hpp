#pragma once
// batch_size_policy: noise_scale for a trainer worker (worker.cpp): the gradient noise scale
// B_simple (<celer/actors/trainer/noise_scale.hpp>) estimated each step from the workers'
// mean local squared gradient norm (a batch of one worker's samples) and the averaged
// gradient's (a batch of all of them), and the batch doubled while B_simple exceeds it.
//
//   auto sched = adaptive_batch::make(spec);                  // throws on a bad spec
//   // each step, after the allreduce of the gradients and of the local norms:
//   auto d = sched.observe(step, mean_local_norm_sq, averaged_norm_sq);
//   ... the next step draws sched.multiplier() x accumulate_steps micro-batches ...
//
// Every worker feeds it the same allreduced figures (the ring gives every member the same
// bits), so every worker changes its batch at the same step without another message. No
// LibTorch, no runtime calls.
#include "worker.hpp"

#include <celer/actors/trainer/noise_scale.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace celer::train_app {

class adaptive_batch {
public:
  /// The starting global batch is batch_size x accumulate_steps x world; the batch grows by
  /// doubling, up to max_batch_size rounded down to a multiple of the start.
  static adaptive_batch make(const worker_spec& spec);

  /// Adds one step; the multiplier for the next step. `per_worker` is this step's samples
  /// on each worker.
  std::int64_t observe(std::int64_t step, std::int64_t per_worker, double mean_local_norm_sq,
                       double averaged_norm_sq);
  /// Micro-batch rounds a step draws: 1 at the start, then 2, 4, ...
  [[nodiscard]] std::int64_t multiplier() const noexcept { return policy_.current() / start_; }
  /// The learning rate for a step drawn at `multiplier` x the starting batch: `base`
  /// scaled by batch_size_lr_scaling (none, sqrt or linear in the multiplier).
  [[nodiscard]] double lr(double base, std::int64_t multiplier) const noexcept;
  /// B_simple so far (nothing before the first estimate).
  [[nodiscard]] std::optional<double> noise_scale() const noexcept { return noise_.b_simple(); }

private:
  adaptive_batch(trainer::noise_scale_estimator noise, trainer::batch_size_policy policy, std::int64_t start,
                 int world, std::string lr_scaling)
    : noise_(std::move(noise)), policy_(std::move(policy)), start_(start), world_(world),
      lr_scaling_(std::move(lr_scaling)) {}
  trainer::noise_scale_estimator noise_;
  trainer::batch_size_policy policy_;
  std::int64_t start_;
  int world_;
  std::string lr_scaling_;
};

} // namespace celer::train_app
