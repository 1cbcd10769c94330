#pragma once
// The driver's side of sharding: speed (apps/train/README.md, "Workers of different
// speeds"): it chooses the batch split (declared speeds, each worker's measured speed, or a
// resumed run's split), gives it to every worker, and during the run feeds the workers'
// compute times to the rebalancer (sharding.hpp) and gives them each new split. Internal
// to apps/train (driver.cpp); no LibTorch.
#include "config.hpp"
#include "sharding.hpp"
#include "worker.hpp"

#include <celer/error.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace celer::train_app {

class speed_shares {
public:
  using worker_list = std::vector<actor_handle<trainer_worker>>;

  /// Measured speeds closer than this (a fraction) give equal shares: measurements on a
  /// shared machine wander by several percent.
  static constexpr double equal_within = 0.10;

  explicit speed_shares(const train_config& cfg) : cfg_(cfg) {}

  /// Splits the step's batch over `workers` in proportion to their speeds (worker_speeds,
  /// or each worker's measured now, one at a time; `saved`, a resumed run's split, when not
  /// empty), gives every worker the split, and says so on `out`. invalid_argument when
  /// `saved` is not a split for these workers; a worker's failed call throws.
  expected<void> choose(worker_list& workers, const std::string& saved, std::ostream& out);
  /// After a call of `k` steps ending at `step`: its figures into the rebalancer (with
  /// measured speeds), and a new split, when it gains enough, to every worker.
  void after_call(worker_list& workers, const std::vector<std::vector<step_figures>>& by_worker, std::int64_t k,
                  std::int64_t step, std::ostream& out);

  /// The split now (empty before choose): what workers made later must take.
  [[nodiscard]] const std::vector<std::int64_t>& split() const noexcept { return split_; }
  /// summary.json's part: batch_split, and reshards with measured speeds.
  void summarise(nlohmann::ordered_json& summary) const;

private:
  /// Every worker takes split_, its loader at `step`.
  void give(worker_list& workers, std::int64_t step);

  const train_config& cfg_;
  std::vector<std::int64_t> split_;
  std::optional<rebalancer> rebalance_;
  nlohmann::json reshards_ = nlohmann::json::array();
};

} // namespace celer::train_app
