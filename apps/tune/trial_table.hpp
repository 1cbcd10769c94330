#pragma once
// celer-tune's trials as the driver keeps them: every trial of the experiment, in the order
// started (or read back by --resume), found by id, and the id the next new trial takes. What
// the progress table, results.csv and the report are drawn from. No runtime calls, no
// LibTorch.
//
//   trial_table trials;
//   trial_summary t;
//   t.id = trials.next_id();
//   trials.add(std::move(t));
//   trials.at(id).state = trial_state::running;
#include "experiment.hpp"

#include <cstddef>
#include <map>
#include <vector>

namespace celer::tune_app {

class trial_table {
public:
  /// The id for a new trial: one past every id added so far (0 first).
  [[nodiscard]] tune::trial_id next_id() const noexcept { return next_id_; }
  /// Adds `t`, whose id is not in the table yet; the trial as kept.
  trial_summary& add(trial_summary t);
  /// The trial with id `id`, which is in the table (std::out_of_range otherwise).
  [[nodiscard]] trial_summary& at(tune::trial_id id) { return trials_[index_.at(id)]; }
  /// Every trial, in the order added.
  [[nodiscard]] const std::vector<trial_summary>& all() const noexcept { return trials_; }
  [[nodiscard]] std::size_t size() const noexcept { return trials_.size(); }
  [[nodiscard]] bool empty() const noexcept { return trials_.empty(); }

private:
  std::vector<trial_summary> trials_;
  /// Where each trial is in trials_, by id.
  std::map<tune::trial_id, std::size_t> index_;
  tune::trial_id next_id_ = 0;
};

} // namespace celer::tune_app
