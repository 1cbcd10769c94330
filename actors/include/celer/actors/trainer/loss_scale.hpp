#pragma once
/// Dynamic loss scaling, as PyTorch's GradScaler does it: half-precision gradients underflow
/// to zero when the loss is small, so the loss is multiplied by a large scale before the
/// backward pass and the gradients divided by it after. A scale that is too large makes some
/// gradient overflow to inf (or nan): that step is skipped (no optimiser step) and the scale
/// halves. After `growth_interval` clean steps in a row the scale doubles again, so it stays
/// near the largest that does not overflow.
///
///   namespace tr = celer::trainer;
///   auto scaler = tr::loss_scaler::make();           // 65536, x2 every 2000 clean steps, /2 on overflow
///   if (!scaler) { ...report the error... }
///   // each step:
///   //   backward of (loss x scaler->scale()), the gradients gathered into `grads`
///   bool finite = scaler->unscale(grads);           // grads /= scale; false if any is inf/nan
///   //   data parallel: combine `finite` over the workers (a nan survives a sum, so checking
///   //   the averaged gradient with all_finite does it), so that every worker decides alike
///   if (scaler->update(finite)) optimizer.step();    // false: skip this step
///
/// With bfloat16 (8 exponent bits, float32's range) scaling is rarely needed, but the
/// overflow guard still keeps a nan from reaching the weights. Pure arithmetic over float
/// spans: no LibTorch, no runtime calls; one owner per object.

#include <celer/error.hpp>

#include <cstdint>
#include <span>

namespace celer::trainer {

/// Whether every value is finite (no inf, no nan).
[[nodiscard]] bool all_finite(std::span<const float> v) noexcept;

struct loss_scale_options {
  /// The first scale (PyTorch's default, 2^16).
  double initial = 65536.0;
  /// The scale is multiplied by this after growth_interval clean steps in a row (> 1)...
  double growth_factor = 2.0;
  /// ...and by this on a step that overflowed (in (0, 1)).
  double backoff_factor = 0.5;
  std::int64_t growth_interval = 2000;
  /// Never below this (> 0): a model whose gradients overflow at any scale keeps skipping
  /// steps at this scale rather than reaching 0.
  double min_scale = 1.0 / 16777216.0;  // 2^-24
  /// Never above this (the largest power of two below float32's largest value).
  double max_scale = 1.7014118346046923e38;  // 2^127
};

/// What a checkpoint keeps to resume scaling where it was.
struct loss_scale_state {
  double scale = 65536.0;
  /// Clean steps in a row since the last growth or overflow.
  std::int64_t clean_steps = 0;
  /// Steps skipped for overflow, and scale growths, since the start.
  std::int64_t overflows = 0;
  std::int64_t growths = 0;
};

class loss_scaler {
public:
  /// invalid_argument naming the option unless 0 < min_scale <= initial <= max_scale,
  /// growth_factor > 1, 0 < backoff_factor < 1 and growth_interval >= 1.
  [[nodiscard]] static expected<loss_scaler> make(loss_scale_options opts = {});

  /// The scale to multiply this step's loss by.
  [[nodiscard]] double scale() const noexcept { return state_.scale; }
  /// Divides every gradient by scale() in place; whether every result is finite.
  bool unscale(std::span<float> grads) const noexcept;
  /// Ends a step: `finite` false (some gradient overflowed) backs the scale off and returns
  /// false (skip the optimiser step); true counts a clean step, grows the scale after
  /// growth_interval of them, and returns true.
  bool update(bool finite) noexcept;

  [[nodiscard]] const loss_scale_state& state() const noexcept { return state_; }
  [[nodiscard]] const loss_scale_options& options() const noexcept { return opts_; }
  /// Resumes from a saved state; invalid_argument when its scale is not within
  /// [min_scale, max_scale] or a count is negative (and nothing changes).
  [[nodiscard]] expected<void> restore(const loss_scale_state& s);

private:
  explicit loss_scaler(loss_scale_options opts) : opts_(opts) { state_.scale = opts.initial; }
  loss_scale_options opts_;
  loss_scale_state state_;
};

} // namespace celer::trainer
