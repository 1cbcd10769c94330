#include "trial_table.hpp"

#include <algorithm>

namespace celer::tune_app {

trial_summary& trial_table::add(trial_summary t) {
  next_id_ = std::max(next_id_, t.id + 1);
  index_[t.id] = trials_.size();
  return trials_.emplace_back(std::move(t));
}

} // namespace celer::tune_app
