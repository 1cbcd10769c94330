#pragma once
// loss_scale dynamic as celer-train's driver sees it (the workers scale: trainer/loss_scale.hpp):
// each synchronous step's scale and whether it overflowed (and was skipped on every replica)
// into its metrics, the steps skipped for overflow counted, and the count and the last scale
// in summary.json. With loss_scale none it adds nothing. Internal to apps/train; no LibTorch.
//
//   loss_scale_record scale(cfg);
//   scale.note(total, figures);   // each synchronous step
//   scale.summarise(summary);
#include "config.hpp"
#include "step_totals.hpp"

#include <celer/actors/trainer/metrics_log.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <vector>

namespace celer::train_app {

class loss_scale_record {
public:
  /// `cfg` outlives this.
  explicit loss_scale_record(const train_config& cfg) : cfg_(cfg) {}

  /// Step `t`'s loss_scale and overflow (1 or 0) into `figures`.
  void note(const step_total& t, std::vector<trainer::scalar>& figures);
  /// summary.json's loss_scale_overflows and final_loss_scale.
  void summarise(nlohmann::ordered_json& summary) const;
  /// Steps skipped for overflow so far (this call of the program).
  [[nodiscard]] std::int64_t overflows() const noexcept { return overflows_; }

private:
  [[nodiscard]] bool on() const { return cfg_.loss_scale == "dynamic"; }

  const train_config& cfg_;
  std::int64_t overflows_ = 0;
  /// The last step's scale.
  double last_scale_ = 0;
};

} // namespace celer::train_app
