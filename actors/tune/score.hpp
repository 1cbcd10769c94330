#pragma once
// A result as the schedulers rank it: higher is better whatever the direction, and NaN (a
// diverged or failed step) the worst of all.
#include <celer/actors/tune/search.hpp>

#include <cmath>
#include <limits>

namespace celer::tune::detail {

inline double score(direction mode, double value) {
  if (std::isnan(value)) return -std::numeric_limits<double>::infinity();
  return mode == direction::maximize ? value : -value;
}

} // namespace celer::tune::detail
