// Speed-proportional splitting of work across devices.

#include <celer/gpu.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace celer::gpu {

std::vector<std::size_t> shares(const std::vector<device>& devices, std::size_t total) {
  const auto n = devices.size();
  std::vector<std::size_t> out(n, 0);
  if (n == 0) return out;

  // Weights: positive finite speeds; a zero, negative or NaN speed weighs nothing. If nothing
  // weighs anything, every device weighs the same.
  std::vector<long double> weight(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double s = devices[i].speed;
    weight[i] = std::isfinite(s) && s > 0 ? s : 0.0L;
  }
  long double sum = std::accumulate(weight.begin(), weight.end(), 0.0L);
  if (!(sum > 0)) {
    std::ranges::fill(weight, 1.0L);
    sum = static_cast<long double>(n);
  }

  // Largest remainder: everyone gets the floor of their exact quota, then the items left go
  // one each to the largest fractional parts (ties to the earlier device).
  std::vector<long double> fraction(n);
  std::size_t given = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const long double quota = static_cast<long double>(total) * weight[i] / sum;
    const long double whole = std::floor(quota);
    out[i] = std::min(static_cast<std::size_t>(whole), total - given);
    fraction[i] = quota - whole;
    given += out[i];
  }
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::ranges::stable_sort(order, [&](auto a, auto b) { return fraction[a] > fraction[b]; });
  // Only weighted devices take the rest (the fractions of the others are 0); the loop wraps in
  // case rounding left more items than devices with a fraction.
  for (std::size_t k = 0; given < total; k = (k + 1) % n) {
    const auto i = order[k];
    if (weight[i] > 0) {
      ++out[i];
      ++given;
    }
  }
  return out;
}

} // namespace celer::gpu
