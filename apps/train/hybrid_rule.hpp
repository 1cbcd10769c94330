#pragma once
// mode: hybrid's rule for switching from synchronous to asynchronous training
// (apps/train/README.md, "Modes"): after hybrid_sync_steps, or once the training loss
// plateaus, whichever comes first. Pure: the driver asks after each call.
//
//   if (auto why = hybrid_switch_reason(cfg, step, losses)) ...  // "hybrid_sync_steps 40"
#include "config.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace celer::train_app {

/// Why to switch now, or nothing: `step` steps taken, `losses` each synchronous step's
/// mean training loss so far (the plateau rule compares the mean of the last
/// hybrid_plateau_window of them with the window before).
[[nodiscard]] std::optional<std::string> hybrid_switch_reason(const train_config& cfg, std::int64_t step,
                                                              const std::vector<double>& losses);

/// The rule in words: "for 50 steps", "until the loss plateaus (window 20, tolerance
/// 0.020)", or both joined by "or".
[[nodiscard]] std::string hybrid_rule(const train_config& cfg);

} // namespace celer::train_app
