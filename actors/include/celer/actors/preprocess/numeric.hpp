#pragma once
/// Numeric features in two passes: per-feature statistics gathered block by block and merged
/// (the first pass, spread over workers), then a normalizer fitted to them and applied to
/// every item (the second pass). Also `to_float`, an image's bytes as features.
///
///   namespace pp = celer::preprocess;
///   pp::feature_stats block;                       // on each worker, over its items
///   for (auto& it : items) if (auto ok = block.add(it); !ok) return fail(ok.error());
///   // ... the blocks travel as msgpack (MSGPACK_DEFINE) to one place and merge:
///   pp::feature_stats all;
///   for (auto& b : blocks) if (auto ok = all.merge(b); !ok) return fail(ok.error());
///   auto norm = pp::normalizer::fit(all, pp::normalize_mode::zscore);
///   for (auto& it : items) (void)norm->apply(it);  // check each: a width mismatch fails
///
/// Statistics are doubles, gathered with Welford's update and merged with Chan, Golub and
/// LeVeque's formula, so any split of the items into blocks, merged in any order, gives the
/// same mean and variance to within rounding (about 1e-15 relative, not bit for bit).
///
/// Non-finite values (NaN, ±infinity) are missing values: `add` skips them (a feature's
/// `count` is its finite values) and `apply` leaves them as they are, so a missing cell stays
/// missing for a later stage to fill or drop. A feature that is constant, or has no finite
/// value, maps every finite value to 0.
#include <celer/codec.hpp>
#include <celer/error.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace celer::preprocess {

struct item;

/// Per-feature count, mean, M2 (the sum of squared deviations from the mean), min and max of
/// items' `values`, mergeable. The first item added (or the first non-empty merge) fixes
/// the width; an item or block of another width is invalid_argument.
struct feature_stats {
  /// Items added (missing values included): what fixes and checks the width.
  std::uint64_t items = 0;
  /// Per feature: its finite values seen, their mean, M2, min and max (+inf and −inf
  /// while count is 0).
  std::vector<std::uint64_t> count;
  std::vector<double> mean, m2, min, max;

  /// Adds `it.values` (Welford's update, in double). invalid_argument naming the item's key
  /// if it has another width than the items before; the stats are then unchanged.
  [[nodiscard]] expected<void> add(const item& it);
  /// Adds `other`'s items as if they had been added here (Chan et al.'s pairwise formula).
  /// invalid_argument if both hold items and their widths differ.
  [[nodiscard]] expected<void> merge(const feature_stats& other);

  /// Features per item (0 before the first item).
  [[nodiscard]] std::size_t width() const noexcept { return count.size(); }
  /// Population variance M2 / count (as scikit-learn's StandardScaler); 0 when count is 0.
  [[nodiscard]] double variance(std::size_t feature) const noexcept;
  /// √variance.
  [[nodiscard]] double stddev(std::size_t feature) const noexcept;

  MSGPACK_DEFINE(items, count, mean, m2, min, max)
};

/// What a normalizer makes of each feature.
enum class normalize_mode : std::uint8_t {
  /// (x − mean) / stddev: mean 0, variance 1 over the fitted items.
  zscore,
  /// (x − min) / (max − min): the fitted items in [0, 1].
  minmax,
};

/// y = (x − offset) × scale per feature, fitted to feature_stats. A constant feature
/// (stddev 0 for zscore, max == min for minmax) or one with no finite value has scale 0 and
/// offset 0: every finite value becomes 0 (not NaN, not infinity). Copyable; msgpack-able, so
/// a fitted normalizer travels to the workers of the second pass.
struct normalizer {
  normalize_mode mode = normalize_mode::zscore;
  std::vector<double> offset, scale;

  /// Fits `stats`. invalid_argument if no item was added to them.
  [[nodiscard]] static expected<normalizer> fit(const feature_stats& stats, normalize_mode mode);

  /// Normalises `it.values` in place (in double, stored as float); NaN and ±infinity are left
  /// as they are. invalid_argument naming the item's key if its width differs from the
  /// fitted one; the item is then unchanged.
  [[nodiscard]] expected<void> apply(item& it) const;

  [[nodiscard]] std::size_t width() const noexcept { return offset.size(); }

  MSGPACK_DEFINE(mode, offset, scale)
};

/// An image's bytes as features: `values` becomes pixels[i] × scale (HWC order, so 0–255
/// becomes 0–1 by default) and `pixels` is emptied; height, width and channels stay, and
/// now describe `values`. An item without pixels gets empty values.
void to_float(item& it, float scale = 1.0f / 255.0f);

} // namespace celer::preprocess

MSGPACK_ADD_ENUM(celer::preprocess::normalize_mode);
