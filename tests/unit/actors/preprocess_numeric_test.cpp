// celer::preprocess's two-pass normalisation: statistics merged from blocks equal one pass
// over everything, known means and deviations, the normalizer's modes and its edge cases
// (constant features, missing values, width mismatches), and the msgpack round trips that
// carry statistics and normalizers between processes.
#include <celer/actors/preprocess/item.hpp>
#include <celer/actors/preprocess/numeric.hpp>

#include "prng.hpp"  // actors/preprocess: reproducible test data

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

using namespace celer::preprocess;

namespace {

item with_values(std::string key, std::vector<float> values) {
  item it;
  it.key = std::move(key);
  it.values = std::move(values);
  return it;
}

/// `n` items of 3 features on very different scales: around 1e6, around 0 and small.
std::vector<item> noisy_items(std::size_t n, std::uint64_t seed) {
  detail::xoshiro256ss rng(seed);
  std::vector<item> out;
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back(with_values("row-" + std::to_string(i),
                              {static_cast<float>(1e6 + 1000 * rng.normal()),
                               static_cast<float>(rng.normal()),
                               static_cast<float>(0.001 * rng.uniform())}));
  }
  return out;
}

bool close(double a, double b, double relative) {
  return std::abs(a - b) <= relative * std::max(std::abs(a), std::abs(b));
}

template <class T>
T round_trip(const T& value) {
  msgpack::sbuffer buffer;
  msgpack::pack(buffer, value);
  auto handle = msgpack::unpack(buffer.data(), buffer.size());
  return handle.get().as<T>();
}

} // namespace

TEST_CASE("feature statistics know the mean and deviation of known values", "[preprocess]") {
  feature_stats stats;
  for (float x : {2.f, 4.f, 4.f, 4.f, 5.f, 5.f, 7.f, 9.f}) REQUIRE(stats.add(with_values("k", {x, -x})));
  REQUIRE(stats.width() == 2);
  CHECK(stats.items == 8);
  CHECK(stats.count[0] == 8);
  CHECK(stats.mean[0] == Approx(5.0));
  CHECK(stats.variance(0) == Approx(4.0));  // population variance
  CHECK(stats.stddev(0) == Approx(2.0));
  CHECK(stats.min[0] == 2.0);
  CHECK(stats.max[0] == 9.0);
  CHECK(stats.mean[1] == Approx(-5.0));
  CHECK(stats.stddev(1) == Approx(2.0));
  CHECK(stats.min[1] == -9.0);
  CHECK(stats.max[1] == -2.0);
}

TEST_CASE("statistics merged from blocks equal one pass over all the items", "[preprocess]") {
  const auto items = noisy_items(10'000, 11);
  feature_stats whole;
  for (const auto& it : items) REQUIRE(whole.add(it));

  // Uneven blocks (1, 7, 100, 2,000 items, ...), merged in two different orders.
  std::vector<feature_stats> blocks;
  std::size_t at = 0;
  for (std::size_t size : {1, 7, 100, 2000, 3, 4000, 889, 3000}) {
    feature_stats block;
    for (std::size_t i = 0; i < size; ++i) REQUIRE(block.add(items[at++]));
    blocks.push_back(block);
  }
  REQUIRE(at == items.size());
  feature_stats forward, backward;
  for (const auto& b : blocks) REQUIRE(forward.merge(b));
  for (auto b = blocks.rbegin(); b != blocks.rend(); ++b) REQUIRE(backward.merge(*b));
  REQUIRE(forward.merge(feature_stats{}));  // an empty block changes nothing

  for (const auto* merged : {&forward, &backward}) {
    CHECK(merged->items == whole.items);
    for (std::size_t j = 0; j < 3; ++j) {
      CHECK(merged->count[j] == whole.count[j]);
      CHECK(close(merged->mean[j], whole.mean[j], 1e-9));
      CHECK(close(merged->m2[j], whole.m2[j], 1e-9));
      CHECK(merged->min[j] == whole.min[j]);
      CHECK(merged->max[j] == whole.max[j]);
    }
  }
  CHECK(whole.stddev(0) == Approx(1000).epsilon(0.03));
  CHECK(whole.stddev(1) == Approx(1).epsilon(0.03));
}

TEST_CASE("an item of another width is refused, naming its key", "[preprocess]") {
  feature_stats stats;
  REQUIRE(stats.add(with_values("a", {1, 2, 3})));
  auto bad = stats.add(with_values("img/bad.png", {1, 2}));
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code() == celer::error_code::invalid_argument);
  CHECK_THAT(bad.error().message(), Catch::Contains("img/bad.png") && Catch::Contains("2 values"));
  CHECK(stats.items == 1);  // unchanged

  feature_stats other;
  REQUIRE(other.add(with_values("b", {1, 2})));
  auto merged = stats.merge(other);
  REQUIRE_FALSE(merged);
  CHECK(merged.error().code() == celer::error_code::invalid_argument);

  auto norm = normalizer::fit(stats, normalize_mode::zscore);
  REQUIRE(norm);
  item short_item = with_values("row-9", {1});
  auto applied = norm->apply(short_item);
  REQUIRE_FALSE(applied);
  CHECK_THAT(applied.error().message(), Catch::Contains("row-9"));
  CHECK(short_item.values == std::vector<float>{1});
}

TEST_CASE("a z-score normalizer gives mean 0 and deviation 1, min-max gives 0 to 1", "[preprocess]") {
  auto items = noisy_items(2'000, 5);
  feature_stats stats;
  for (const auto& it : items) REQUIRE(stats.add(it));
  auto z = normalizer::fit(stats, normalize_mode::zscore);
  auto mm = normalizer::fit(stats, normalize_mode::minmax);
  REQUIRE(z);
  REQUIRE(mm);

  auto zed = items, ranged = items;
  feature_stats after_z, after_mm;
  for (std::size_t i = 0; i < items.size(); ++i) {
    REQUIRE(z->apply(zed[i]));
    REQUIRE(mm->apply(ranged[i]));
    REQUIRE(after_z.add(zed[i]));
    REQUIRE(after_mm.add(ranged[i]));
  }
  for (std::size_t j = 0; j < 3; ++j) {
    CHECK(std::abs(after_z.mean[j]) < 1e-3);
    CHECK(after_z.stddev(j) == Approx(1.0).epsilon(1e-3));
    CHECK(after_mm.min[j] == Approx(0.0).margin(1e-6));
    CHECK(after_mm.max[j] == Approx(1.0).epsilon(1e-6));
  }
  // By hand: (x − mean) / stddev for one value.
  CHECK(zed[7].values[1] ==
        Approx((items[7].values[1] - stats.mean[1]) / stats.stddev(1)).epsilon(1e-6));
}

TEST_CASE("a constant feature maps to 0 in both modes", "[preprocess]") {
  feature_stats stats;
  for (float x : {1.f, 2.f, 3.f}) REQUIRE(stats.add(with_values("k", {0.1f, x})));
  CHECK(stats.m2[0] == 0.0);  // Welford keeps it exact
  for (auto mode : {normalize_mode::zscore, normalize_mode::minmax}) {
    auto norm = normalizer::fit(stats, mode);
    REQUIRE(norm);
    CHECK(norm->scale[0] == 0.0);
    item it = with_values("k", {-7.f, 2.f});
    REQUIRE(norm->apply(it));
    CHECK(it.values[0] == 0.0f);
    CHECK_FALSE(std::signbit(it.values[0]));  // +0, not −0
    CHECK(std::isfinite(it.values[1]));
  }
}

TEST_CASE("missing values are skipped by the statistics and left as they are", "[preprocess]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  feature_stats stats;
  REQUIRE(stats.add(with_values("a", {1.f, nan})));
  REQUIRE(stats.add(with_values("b", {3.f, nan})));
  REQUIRE(stats.add(with_values("c", {inf, nan})));
  CHECK(stats.items == 3);
  CHECK(stats.count[0] == 2);
  CHECK(stats.mean[0] == 2.0);
  CHECK(stats.count[1] == 0);  // a feature with no finite value ...
  auto norm = normalizer::fit(stats, normalize_mode::zscore);
  REQUIRE(norm);
  item it = with_values("d", {-inf, 5.f});
  item gap = with_values("e", {nan, nan});
  REQUIRE(norm->apply(it));
  REQUIRE(norm->apply(gap));
  CHECK(it.values[0] == -inf);
  CHECK(it.values[1] == 0.0f);  // ... is constant: finite values map to 0
  CHECK(std::isnan(gap.values[0]));
  CHECK(std::isnan(gap.values[1]));
}

TEST_CASE("a normalizer cannot be fitted to statistics of no item", "[preprocess]") {
  auto norm = normalizer::fit(feature_stats{}, normalize_mode::minmax);
  REQUIRE_FALSE(norm);
  CHECK(norm.error().code() == celer::error_code::invalid_argument);
}

TEST_CASE("statistics and normalizers travel as msgpack unchanged", "[preprocess]") {
  feature_stats stats;
  for (const auto& it : noisy_items(100, 3)) REQUIRE(stats.add(it));
  REQUIRE(stats.add(with_values("missing", {1.f, std::numeric_limits<float>::quiet_NaN(), 0.f})));
  const auto back = round_trip(stats);
  CHECK(back.items == stats.items);
  CHECK(back.count == stats.count);
  CHECK(back.mean == stats.mean);
  CHECK(back.m2 == stats.m2);
  CHECK(back.min == stats.min);
  CHECK(back.max == stats.max);

  feature_stats empty_back = round_trip(feature_stats{});
  CHECK(empty_back.items == 0);
  CHECK(empty_back.width() == 0);

  auto norm = normalizer::fit(stats, normalize_mode::minmax);
  REQUIRE(norm);
  const auto norm_back = round_trip(*norm);
  CHECK(norm_back.mode == normalize_mode::minmax);
  CHECK(norm_back.offset == norm->offset);
  CHECK(norm_back.scale == norm->scale);
}

TEST_CASE("to_float turns an image's bytes into values and drops the bytes", "[preprocess]") {
  item img;
  img.key = "img/1.png";
  img.pixels = {0, 51, 255, 102};
  img.height = 2;
  img.width = 2;
  img.channels = 1;
  to_float(img);
  constexpr float step = 1.0f / 255.0f;
  CHECK(img.values == std::vector<float>{0.f, 51 * step, 255 * step, 102 * step});
  CHECK(img.values[2] == Approx(1.0f));
  CHECK(img.pixels.empty());
  CHECK(img.height == 2);
  item raw;
  raw.pixels = {1, 2};
  to_float(raw, /*scale=*/1.0f);
  CHECK(raw.values == std::vector<float>{1.f, 2.f});
}
