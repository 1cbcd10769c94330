#pragma once
// batch_size_policy noise_scale as celer-train's driver sees it (the workers grow the batch:
// adaptive_batch.hpp): each synchronous step's global batch, noise scale and lr into its
// metrics, a console line when the batch has grown (at the same step on every worker: the
// figures the workers grow by are allreduced), and the last batch and noise scale in
// summary.json. Under any other policy it adds nothing. Internal to apps/train; no LibTorch.
//
//   batch_growth batch(cfg);
//   batch.note(total, figures, out);   // each synchronous step
//   batch.summarise(summary);
#include "config.hpp"
#include "step_totals.hpp"

#include <celer/actors/trainer/metrics_log.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <ostream>
#include <vector>

namespace celer::train_app {

class batch_growth {
public:
  /// `cfg` outlives this.
  explicit batch_growth(const train_config& cfg) : cfg_(cfg) {}

  /// Step `t`'s batch_size, noise_scale (once there is one) and lr into `figures`, and a
  /// line on `out` when its batch is not the last step's.
  void note(const step_total& t, std::vector<trainer::scalar>& figures, std::ostream& out);
  /// summary.json's final_batch_size and final_noise_scale (null before the first estimate).
  void summarise(nlohmann::ordered_json& summary) const;

private:
  [[nodiscard]] bool on() const { return cfg_.batch_size_policy == "noise_scale"; }

  const train_config& cfg_;
  /// The last step's global batch (0: no step yet) and noise scale (-1: none yet).
  std::int64_t last_batch_ = 0;
  double last_noise_scale_ = -1;
};

} // namespace celer::train_app
