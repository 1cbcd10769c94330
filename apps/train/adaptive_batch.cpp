// batch_size_policy: noise_scale (adaptive_batch.hpp).
#include "adaptive_batch.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace celer::train_app {

adaptive_batch adaptive_batch::make(const worker_spec& spec) {
  const std::int64_t start = spec.config.batch_size * spec.config.accumulate_steps * spec.world;
  const std::int64_t max = std::max(start, spec.config.max_batch_size / start * start);
  auto noise = trainer::noise_scale_estimator::make();
  // Each growth doubles the number of micro-batches a step, so every batch is a multiple
  // of the start and each worker's share stays whole micro-batches.
  auto policy = trainer::batch_size_policy::make({.start = start, .max = max, .growth = 2.0, .multiple_of = start,
                                                  .min_observations = std::min<std::int64_t>(20, spec.config.batch_size_cooldown),
                                                  .cooldown_steps = spec.config.batch_size_cooldown});
  if (!noise) throw std::runtime_error("the noise scale estimator: " + noise.error().message());
  if (!policy) throw std::runtime_error("batch_size_policy noise_scale: " + policy.error().message());
  if (spec.config.batch_size_lr_scaling != "none" && spec.config.batch_size_lr_scaling != "sqrt" && spec.config.batch_size_lr_scaling != "linear")
    throw std::runtime_error("unknown batch_size_lr_scaling '" + spec.config.batch_size_lr_scaling + "': none, sqrt or linear");
  return adaptive_batch(std::move(*noise), std::move(*policy), start, spec.world, spec.config.batch_size_lr_scaling);
}

double adaptive_batch::lr(double base, std::int64_t multiplier) const noexcept {
  const auto m = static_cast<double>(multiplier);
  if (lr_scaling_ == "linear") return base * m;
  if (lr_scaling_ == "sqrt") return base * std::sqrt(m);
  return base;
}

std::int64_t adaptive_batch::observe(std::int64_t step, std::int64_t per_worker, double mean_local_norm_sq,
                                     double averaged_norm_sq) {
  // With equal batches the estimate is linear in the small batch's squared norm, so the
  // estimate from the workers' mean is the mean of each worker's estimate (observe_workers).
  if (auto s = noise_.observe(per_worker, mean_local_norm_sq, per_worker * world_, averaged_norm_sq); !s)
    throw std::runtime_error("the noise scale at step " + std::to_string(step) + ": " + s.error().message());
  (void)policy_.propose(step, noise_);
  return multiplier();
}

} // namespace celer::train_app
