#pragma once
/// The gradient noise scale and the adaptive batch size it drives (McCandlish et al. 2018,
/// "An Empirical Model of Large-Batch Training", appendix A). The simple noise scale
/// B_simple = tr(Σ) / |G|² (Σ the per-example gradient covariance, G the true gradient)
/// is about the batch size past which a larger batch stops buying faster progress per
/// step. It grows as training goes on, so a run can start small and grow its batch.
///
///   namespace tr = celer::trainer;
///   auto noise = tr::noise_scale_estimator::make();            // decay 0.95
///   auto policy = tr::batch_size_policy::make({.start = 64, .max = 1024, .multiple_of = 4});
///   if (!noise || !policy) { ...report the error... }
///   // each step of synchronous data parallel training with 4 workers of batch b:
///   //   worker w: its local gradient's squared norm (before the allreduce)
///   //   everyone: the averaged gradient's squared norm (after it)
///   const tr::worker_gradient workers[] = {{b, n0}, {b, n1}, {b, n2}, {b, n3}};
///   if (auto est = noise->observe_workers(workers, averaged_norm_sq); !est) { ... }
///   auto next = policy->propose(step, *noise);
///   if (next.changed) std::cout << next.reason << "\n";     // "B_simple 812 > 256: grow to 512"
///   // ...use next.batch from the next step on (scale the learning rate to match)
///
/// The estimates need gradients at two batch sizes from the same step: data parallel
/// training has them for free (each worker's gradient, and their average); a single
/// worker can use a micro-batch and the accumulated gradient. Pure arithmetic: no runtime
/// calls, no threads; each object belongs to one owner.

#include <celer/error.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace celer::trainer {

/// The sum of the squares of `v`, accumulated in double (a gradient's squared L2 norm).
[[nodiscard]] double squared_norm(std::span<const float> v) noexcept;

/// One step's unbiased estimates, before averaging. Either may be negative on a noisy
/// step; only their averages mean something.
struct noise_scale_sample {
  /// Of |G|²: (B_big |G_big|² − B_small |G_small|²) / (B_big − B_small).
  double gradient_sq = 0;
  /// Of tr(Σ): (|G_small|² − |G_big|²) / (1/B_small − 1/B_big).
  double trace_sigma = 0;
};

/// The two unbiased estimates from the squared norms of gradients averaged over batches
/// of `small_batch` and `big_batch` examples at the same weights (E|G_B|² = |G|² + tr(Σ)/B).
/// invalid_argument unless 1 <= small_batch < big_batch and both norms are finite and
/// not negative.
[[nodiscard]] expected<noise_scale_sample> estimate_noise(std::int64_t small_batch,
                                                          double small_norm_sq,
                                                          std::int64_t big_batch,
                                                          double big_norm_sq);

/// One worker's share of a step: its batch and its local gradient's squared norm.
struct worker_gradient {
  std::int64_t batch = 0;
  double norm_sq = 0;
};

struct noise_scale_options {
  /// The moving averages' weight on the past, in [0, 1): each step counts 1 − decay, so
  /// about 1 / (1 − decay) recent steps (20 at 0.95) make the estimate. Larger is
  /// steadier but slower to follow a noise scale that grows as training goes on.
  double decay = 0.95;
};

/// Averages the estimates over steps and gives B_simple. As the paper advises, |G|² and
/// tr(Σ) are averaged separately (exponential moving averages, bias-corrected as Adam's
/// moments are) and B_simple is the ratio of the averages: the average of per-step ratios
/// would be dominated by steps whose |G|² estimate is near zero.
class noise_scale_estimator {
public:
  /// invalid_argument unless 0 <= decay < 1.
  [[nodiscard]] static expected<noise_scale_estimator> make(noise_scale_options opts = {});

  /// Adds one step's estimate_noise(...); the same errors, and then nothing is added.
  [[nodiscard]] expected<noise_scale_sample> observe(std::int64_t small_batch, double small_norm_sq,
                                                     std::int64_t big_batch, double big_norm_sq);
  /// Adds one step of data parallel training: each worker's batch and local squared norm,
  /// and the squared norm of the combined gradient, which must be the example-weighted
  /// mean of the workers' (sum of batch_w g_w / sum of batch_w; the plain mean when the
  /// batches are equal), a batch of all their examples. Each worker's gradient against
  /// the combined one gives an unbiased estimate; the step adds their mean.
  /// invalid_argument for fewer than 2 workers, a batch below 1 or a bad norm.
  [[nodiscard]] expected<noise_scale_sample> observe_workers(std::span<const worker_gradient> workers,
                                                             double combined_norm_sq);

  /// Steps observed.
  [[nodiscard]] std::int64_t observations() const noexcept { return observations_; }
  /// The averaged estimates (0 before the first observation).
  [[nodiscard]] double gradient_sq() const noexcept;
  [[nodiscard]] double trace_sigma() const noexcept;
  /// tr(Σ) / |G|² of the averages; nothing before the first observation or while the
  /// averaged |G|² is not above 0 (the noise swamps the signal: no estimate yet).
  [[nodiscard]] std::optional<double> b_simple() const noexcept;
  /// Forgets every observation.
  void reset() noexcept;

private:
  explicit noise_scale_estimator(noise_scale_options opts) : opts_(opts) {}
  void add(const noise_scale_sample& s) noexcept;
  noise_scale_options opts_;
  std::int64_t observations_ = 0;
  double gradient_sq_ = 0;  // the raw (biased towards 0) moving averages
  double trace_sigma_ = 0;
  double decay_power_ = 1;  // decay^observations, for the bias correction
};

struct batch_size_options {
  /// The first batch size, and the smallest ever proposed (the global batch: all workers').
  std::int64_t start = 0;
  /// The largest (what device memory allows, times the workers). At least start.
  std::int64_t max = 0;
  /// Each growth multiplies the batch by this (> 1), then rounds up to multiple_of.
  double growth = 2.0;
  /// Every batch proposed is a multiple of this (the number of workers, so that each gets
  /// the same share). start and max must be multiples of it.
  std::int64_t multiple_of = 1;
  /// Observations the estimator must have before the first growth: its first estimates
  /// rest on a few noisy steps.
  std::int64_t min_observations = 20;
  /// Steps between two growths, so that one noisy stretch cannot double the batch twice
  /// in a row.
  std::int64_t cooldown_steps = 100;
};

/// What batch_size_policy::propose decided.
struct batch_decision {
  std::int64_t batch = 0;
  bool changed = false;
  /// Why, for the log: "B_simple 812.4 > batch 256: grow to 512", "at the maximum 1024".
  std::string reason;
};

/// Proposes the next batch size from the noise scale: grows by `growth` when B_simple
/// exceeds the current batch, at most to `max`, at most once per `cooldown_steps`, and
/// never shrinks (the noise scale grows as the loss falls; a batch that shrank and grew
/// back would churn the learning-rate schedule and the data loaders for noise).
/// The caller scales the learning rate with the batch (linearly, or by AdaScale).
class batch_size_policy {
public:
  /// invalid_argument for start < 1, max < start, growth <= 1, multiple_of < 1, start or
  /// max not a multiple of multiple_of, or a negative min_observations or cooldown.
  [[nodiscard]] static expected<batch_size_policy> make(batch_size_options opts);

  /// The decision at `step` (increasing) given `noise`; a growth takes effect at once
  /// (current() is the new batch).
  [[nodiscard]] batch_decision propose(std::int64_t step, const noise_scale_estimator& noise);
  /// The same from a bare B_simple (nothing: no estimate, no change), for callers that
  /// estimate it otherwise; no min_observations check.
  [[nodiscard]] batch_decision propose(std::int64_t step, std::optional<double> b_simple);

  [[nodiscard]] std::int64_t current() const noexcept { return current_; }
  /// The step of the last growth (nothing before the first).
  [[nodiscard]] std::optional<std::int64_t> last_change() const noexcept { return last_change_; }
  /// Resumes at `batch`, last grown at `last_change` (both saved from an earlier run).
  /// invalid_argument when batch is outside [start, max] or not a multiple of multiple_of.
  [[nodiscard]] expected<void> restore(std::int64_t batch, std::optional<std::int64_t> last_change);
  [[nodiscard]] const batch_size_options& options() const noexcept { return opts_; }

private:
  explicit batch_size_policy(batch_size_options opts) : opts_(opts), current_(opts.start) {}
  batch_size_options opts_;
  std::int64_t current_;
  std::optional<std::int64_t> last_change_;
};

} // namespace celer::trainer
