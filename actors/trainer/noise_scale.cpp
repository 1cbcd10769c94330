// The gradient noise scale and the batch-size policy it drives (noise_scale.hpp).
#include <celer/actors/trainer/noise_scale.hpp>

#include <cmath>
#include <cstdio>

namespace celer::trainer {
namespace {

error invalid(std::string message) { return error(error_code::invalid_argument, std::move(message)); }

expected<void> check_norm(double norm_sq, const char* what) {
  if (!std::isfinite(norm_sq) || norm_sq < 0) {
    return invalid(std::string(what) + " is " + std::to_string(norm_sq) +
                   ", not a finite squared norm >= 0");
  }
  return {};
}

/// "812.4": enough digits for a log line.
std::string short_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

} // namespace

double squared_norm(std::span<const float> v) noexcept {
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * static_cast<double>(x);
  return s;
}

expected<noise_scale_sample> estimate_noise(std::int64_t small_batch, double small_norm_sq,
                                            std::int64_t big_batch, double big_norm_sq) {
  if (small_batch < 1 || big_batch <= small_batch) {
    return invalid("estimate_noise: needs 1 <= small batch < big batch, given " +
                   std::to_string(small_batch) + " and " + std::to_string(big_batch));
  }
  if (auto ok = check_norm(small_norm_sq, "the small batch's squared norm"); !ok) return ok.error();
  if (auto ok = check_norm(big_norm_sq, "the big batch's squared norm"); !ok) return ok.error();
  const auto b_small = static_cast<double>(small_batch);
  const auto b_big = static_cast<double>(big_batch);
  return noise_scale_sample{
    .gradient_sq = (b_big * big_norm_sq - b_small * small_norm_sq) / (b_big - b_small),
    .trace_sigma = (small_norm_sq - big_norm_sq) / (1.0 / b_small - 1.0 / b_big),
  };
}

expected<noise_scale_estimator> noise_scale_estimator::make(noise_scale_options opts) {
  if (!(opts.decay >= 0.0 && opts.decay < 1.0)) {
    return invalid("noise_scale_estimator: decay must be in [0, 1), given " + std::to_string(opts.decay));
  }
  return noise_scale_estimator(opts);
}

void noise_scale_estimator::add(const noise_scale_sample& s) noexcept {
  gradient_sq_ = opts_.decay * gradient_sq_ + (1.0 - opts_.decay) * s.gradient_sq;
  trace_sigma_ = opts_.decay * trace_sigma_ + (1.0 - opts_.decay) * s.trace_sigma;
  decay_power_ *= opts_.decay;
  ++observations_;
}

expected<noise_scale_sample> noise_scale_estimator::observe(std::int64_t small_batch, double small_norm_sq,
                                                            std::int64_t big_batch, double big_norm_sq) {
  auto s = estimate_noise(small_batch, small_norm_sq, big_batch, big_norm_sq);
  if (s) add(*s);
  return s;
}

expected<noise_scale_sample> noise_scale_estimator::observe_workers(
  std::span<const worker_gradient> workers, double combined_norm_sq) {
  if (workers.size() < 2) {
    return invalid("observe_workers: needs at least 2 workers, given " + std::to_string(workers.size()) +
                   "; one worker can compare a micro-batch with the accumulated batch (observe)");
  }
  std::int64_t total = 0;
  for (const auto& w : workers) {
    if (w.batch < 1) return invalid("observe_workers: a worker's batch is " + std::to_string(w.batch));
    total += w.batch;
  }
  noise_scale_sample mean;
  for (const auto& w : workers) {
    auto s = estimate_noise(w.batch, w.norm_sq, total, combined_norm_sq);
    if (!s) return s.error();
    mean.gradient_sq += s->gradient_sq / static_cast<double>(workers.size());
    mean.trace_sigma += s->trace_sigma / static_cast<double>(workers.size());
  }
  add(mean);
  return mean;
}

double noise_scale_estimator::gradient_sq() const noexcept {
  return observations_ == 0 ? 0.0 : gradient_sq_ / (1.0 - decay_power_);
}

double noise_scale_estimator::trace_sigma() const noexcept {
  return observations_ == 0 ? 0.0 : trace_sigma_ / (1.0 - decay_power_);
}

std::optional<double> noise_scale_estimator::b_simple() const noexcept {
  // The bias corrections are the same factor: they cancel in the ratio.
  if (observations_ == 0 || !(gradient_sq_ > 0)) return std::nullopt;
  return trace_sigma_ / gradient_sq_;
}

void noise_scale_estimator::reset() noexcept {
  observations_ = 0;
  gradient_sq_ = trace_sigma_ = 0;
  decay_power_ = 1;
}

// ---- the policy ----

expected<batch_size_policy> batch_size_policy::make(batch_size_options opts) {
  const std::string where = "batch_size_policy: ";
  if (opts.start < 1) return invalid(where + "start must be at least 1, given " + std::to_string(opts.start));
  if (opts.max < opts.start) {
    return invalid(where + "max " + std::to_string(opts.max) + " is below start " + std::to_string(opts.start));
  }
  if (!(opts.growth > 1.0) || !std::isfinite(opts.growth)) {
    return invalid(where + "growth must be a finite factor above 1, given " + std::to_string(opts.growth));
  }
  if (opts.multiple_of < 1) {
    return invalid(where + "multiple_of must be at least 1, given " + std::to_string(opts.multiple_of));
  }
  if (opts.start % opts.multiple_of != 0 || opts.max % opts.multiple_of != 0) {
    return invalid(where + "start " + std::to_string(opts.start) + " and max " + std::to_string(opts.max) +
                   " must be multiples of " + std::to_string(opts.multiple_of));
  }
  if (opts.min_observations < 0 || opts.cooldown_steps < 0) {
    return invalid(where + "min_observations and cooldown_steps cannot be negative");
  }
  return batch_size_policy(opts);
}

batch_decision batch_size_policy::propose(std::int64_t step, const noise_scale_estimator& noise) {
  if (noise.observations() < opts_.min_observations) {
    return {.batch = current_,
            .reason = "waiting for the noise scale (" + std::to_string(noise.observations()) + " of " +
                      std::to_string(opts_.min_observations) + " steps observed)"};
  }
  return propose(step, noise.b_simple());
}

batch_decision batch_size_policy::propose(std::int64_t step, std::optional<double> b_simple) {
  batch_decision d{.batch = current_};
  if (!b_simple) {
    d.reason = "no noise scale estimate yet";
  } else if (current_ >= opts_.max) {
    d.reason = "at the maximum " + std::to_string(opts_.max);
  } else if (!(*b_simple > static_cast<double>(current_))) {
    d.reason = "B_simple " + short_number(*b_simple) + " <= batch " + std::to_string(current_);
  } else if (last_change_ && step - *last_change_ < opts_.cooldown_steps) {
    d.reason = "B_simple " + short_number(*b_simple) + " > batch " + std::to_string(current_) +
               ", cooling down until step " + std::to_string(*last_change_ + opts_.cooldown_steps);
  } else {
    const double grown = std::ceil(static_cast<double>(current_) * opts_.growth);
    const double m = static_cast<double>(opts_.multiple_of);
    const double rounded = std::ceil(grown / m) * m;
    const std::int64_t next = rounded >= static_cast<double>(opts_.max)
                                ? opts_.max
                                : static_cast<std::int64_t>(rounded);
    d.reason = "B_simple " + short_number(*b_simple) + " > batch " + std::to_string(current_) +
               ": grow to " + std::to_string(next);
    d.batch = current_ = next;
    d.changed = true;
    last_change_ = step;
  }
  return d;
}

expected<void> batch_size_policy::restore(std::int64_t batch, std::optional<std::int64_t> last_change) {
  if (batch < opts_.start || batch > opts_.max || batch % opts_.multiple_of != 0) {
    return invalid("batch_size_policy: cannot resume at batch " + std::to_string(batch) + ": it must be in [" +
                   std::to_string(opts_.start) + ", " + std::to_string(opts_.max) + "] and a multiple of " +
                   std::to_string(opts_.multiple_of));
  }
  current_ = batch;
  last_change_ = last_change;
  return {};
}

} // namespace celer::trainer
