// Dynamic loss scaling (loss_scale.hpp).
#include <celer/actors/trainer/loss_scale.hpp>

#include <algorithm>
#include <cmath>
#include <string>

namespace celer::trainer {
namespace {

error invalid(std::string message) { return error(error_code::invalid_argument, "loss_scaler: " + std::move(message)); }

} // namespace

bool all_finite(std::span<const float> v) noexcept {
  // x - x is 0 for a finite x and nan for inf or nan: one comparison per value, which
  // vectorises, instead of a classification call.
  float acc = 0.0f;
  for (float x : v) acc += x - x;
  return acc == 0.0f;
}

expected<loss_scaler> loss_scaler::make(loss_scale_options opts) {
  if (!(opts.min_scale > 0) || !std::isfinite(opts.max_scale) || !(opts.min_scale <= opts.max_scale))
    return invalid("needs 0 < min_scale <= max_scale (finite), given " + std::to_string(opts.min_scale) + " and " +
                   std::to_string(opts.max_scale));
  if (!(opts.initial >= opts.min_scale && opts.initial <= opts.max_scale))
    return invalid("the initial scale " + std::to_string(opts.initial) + " is outside [" + std::to_string(opts.min_scale) +
                   ", " + std::to_string(opts.max_scale) + "]");
  if (!(opts.growth_factor > 1) || !std::isfinite(opts.growth_factor))
    return invalid("growth_factor must be > 1, given " + std::to_string(opts.growth_factor));
  if (!(opts.backoff_factor > 0 && opts.backoff_factor < 1))
    return invalid("backoff_factor must be in (0, 1), given " + std::to_string(opts.backoff_factor));
  if (opts.growth_interval < 1)
    return invalid("growth_interval must be >= 1, given " + std::to_string(opts.growth_interval));
  return loss_scaler(opts);
}

bool loss_scaler::unscale(std::span<float> grads) const noexcept {
  const auto inv = static_cast<float>(1.0 / state_.scale);
  float acc = 0.0f;
  for (float& g : grads) {
    g *= inv;
    acc += g - g;
  }
  return acc == 0.0f;
}

bool loss_scaler::update(bool finite) noexcept {
  if (!finite) {
    state_.scale = std::max(opts_.min_scale, state_.scale * opts_.backoff_factor);
    state_.clean_steps = 0;
    ++state_.overflows;
    return false;
  }
  if (++state_.clean_steps >= opts_.growth_interval) {
    state_.scale = std::min(opts_.max_scale, state_.scale * opts_.growth_factor);
    state_.clean_steps = 0;
    ++state_.growths;
  }
  return true;
}

expected<void> loss_scaler::restore(const loss_scale_state& s) {
  if (!(s.scale >= opts_.min_scale && s.scale <= opts_.max_scale))
    return invalid("a saved scale of " + std::to_string(s.scale) + " is outside [" + std::to_string(opts_.min_scale) + ", " +
                   std::to_string(opts_.max_scale) + "]");
  if (s.clean_steps < 0 || s.overflows < 0 || s.growths < 0) return invalid("a saved count is negative");
  state_ = s;
  return {};
}

} // namespace celer::trainer
