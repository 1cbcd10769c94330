// Two-pass normalisation (numeric.hpp): Welford's running statistics, Chan et al.'s merge,
// and the normalizer they fit.
#include <celer/actors/preprocess/item.hpp>
#include <celer/actors/preprocess/numeric.hpp>

#include <cmath>
#include <limits>
#include <string>

namespace celer::preprocess {
namespace {

constexpr double infinity = std::numeric_limits<double>::infinity();

error width_mismatch(const item& it, std::size_t expected_width, std::string_view against) {
  return error(error_code::invalid_argument,
               "item \"" + it.key + "\" has " + std::to_string(it.values.size()) +
                 " values; " + std::string(against) + " " + std::to_string(expected_width) +
                 " features");
}

} // namespace

expected<void> feature_stats::add(const item& it) {
  const std::size_t n = it.values.size();
  if (items == 0) {
    count.assign(n, 0);
    mean.assign(n, 0.0);
    m2.assign(n, 0.0);
    min.assign(n, infinity);
    max.assign(n, -infinity);
  } else if (n != width()) {
    return width_mismatch(it, width(), "the statistics so far have");
  }
  ++items;
  for (std::size_t j = 0; j < n; ++j) {
    const double x = it.values[j];
    if (!std::isfinite(x)) continue;  // a missing value
    const double k = static_cast<double>(++count[j]);
    const double delta = x - mean[j];
    mean[j] += delta / k;
    m2[j] += delta * (x - mean[j]);
    if (x < min[j]) min[j] = x;
    if (x > max[j]) max[j] = x;
  }
  return {};
}

expected<void> feature_stats::merge(const feature_stats& other) {
  if (other.items == 0) return {};
  if (items == 0) {
    *this = other;
    return {};
  }
  if (other.width() != width()) {
    return error(error_code::invalid_argument,
                 "feature_stats of " + std::to_string(other.width()) +
                   " features cannot merge into feature_stats of " + std::to_string(width()));
  }
  items += other.items;
  for (std::size_t j = 0; j < width(); ++j) {
    const std::uint64_t nb = other.count[j];
    if (nb == 0) continue;
    const std::uint64_t na = count[j];
    if (na == 0) {
      count[j] = nb;
      mean[j] = other.mean[j];
      m2[j] = other.m2[j];
      min[j] = other.min[j];
      max[j] = other.max[j];
      continue;
    }
    const double a = static_cast<double>(na), b = static_cast<double>(nb), n = a + b;
    const double delta = other.mean[j] - mean[j];
    mean[j] += delta * (b / n);
    m2[j] += other.m2[j] + delta * delta * (a * b / n);
    count[j] = na + nb;
    if (other.min[j] < min[j]) min[j] = other.min[j];
    if (other.max[j] > max[j]) max[j] = other.max[j];
  }
  return {};
}

double feature_stats::variance(std::size_t feature) const noexcept {
  if (feature >= width() || count[feature] == 0) return 0.0;
  return m2[feature] / static_cast<double>(count[feature]);
}

double feature_stats::stddev(std::size_t feature) const noexcept {
  return std::sqrt(variance(feature));
}

expected<normalizer> normalizer::fit(const feature_stats& stats, normalize_mode mode) {
  if (stats.items == 0) {
    return error(error_code::invalid_argument, "a normalizer needs statistics of one item at least");
  }
  normalizer out;
  out.mode = mode;
  out.offset.assign(stats.width(), 0.0);
  out.scale.assign(stats.width(), 0.0);
  for (std::size_t j = 0; j < stats.width(); ++j) {
    if (stats.count[j] == 0) continue;  // no finite value: every value maps to 0
    const double offset = mode == normalize_mode::zscore ? stats.mean[j] : stats.min[j];
    const double spread = mode == normalize_mode::zscore ? stats.stddev(j)
                                                         : stats.max[j] - stats.min[j];
    if (!(spread > 0) || !std::isfinite(spread)) continue;  // constant: every value maps to 0
    out.offset[j] = offset;
    out.scale[j] = 1.0 / spread;
  }
  return out;
}

expected<void> normalizer::apply(item& it) const {
  if (it.values.size() != width()) return width_mismatch(it, width(), "the normalizer was fitted to");
  for (std::size_t j = 0; j < width(); ++j) {
    float& v = it.values[j];
    if (!std::isfinite(v)) continue;  // a missing value stays missing
    // scale 0 (a constant feature) gives exactly +0, never −0 from a negative difference.
    v = scale[j] == 0.0 ? 0.0f
                        : static_cast<float>((static_cast<double>(v) - offset[j]) * scale[j]);
  }
  return {};
}

void to_float(item& it, float scale) {
  it.values.resize(it.pixels.size());
  for (std::size_t i = 0; i < it.pixels.size(); ++i) {
    it.values[i] = static_cast<float>(it.pixels[i]) * scale;
  }
  it.pixels.clear();
  it.pixels.shrink_to_fit();
}

} // namespace celer::preprocess
