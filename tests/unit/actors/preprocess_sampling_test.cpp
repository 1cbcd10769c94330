// celer::preprocess's sampling plans: class counts after oversampling, undersampling and a
// stratified sample, their determinism and dependence on the seed, the copies' keys, and the
// fractions refused.
#include <celer/actors/preprocess/sampling.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

using namespace celer::preprocess;

namespace {

/// 1,000 of class 0, 300 of class 5, 40 of class -1 and 7 of class 2, interleaved.
std::vector<std::int32_t> skewed_labels() {
  std::vector<std::int32_t> labels;
  for (int i = 0; i < 1000; ++i) {
    labels.push_back(0);
    if (i % 10 < 3) labels.push_back(5);
    if (i % 25 == 0) labels.push_back(-1);
    if (i % 143 == 0) labels.push_back(2);
  }
  return labels;
}

std::map<std::int32_t, std::size_t> class_counts(const std::vector<std::int32_t>& labels,
                                                 const std::vector<std::uint32_t>& plan) {
  std::map<std::int32_t, std::size_t> counts;
  for (auto i : plan) ++counts[labels[i]];
  return counts;
}

std::map<std::uint32_t, std::size_t> uses(const std::vector<std::uint32_t>& plan) {
  std::map<std::uint32_t, std::size_t> out;
  for (auto i : plan) ++out[i];
  return out;
}

} // namespace

TEST_CASE("oversampling brings every class up to the largest, each item used evenly", "[preprocess]") {
  const auto labels = skewed_labels();
  auto plan = rebalance(labels, {.mode = rebalance_mode::oversample, .seed = 1});
  REQUIRE(plan);
  const auto counts = class_counts(labels, *plan);
  REQUIRE(counts.size() == 4);
  for (auto& [label, n] : counts) CHECK(n == 1000);
  CHECK(std::is_sorted(plan->begin(), plan->end()));

  // Every original is there, and within a class the uses differ by one at most.
  const auto used = uses(*plan);
  CHECK(used.size() == labels.size());
  std::map<std::int32_t, std::pair<std::size_t, std::size_t>> spread;  // min, max uses
  for (auto& [index, n] : used) {
    auto& [lo, hi] = spread.try_emplace(labels[index], n, n).first->second;
    lo = std::min(lo, n);
    hi = std::max(hi, n);
  }
  CHECK(spread[0] == std::pair<std::size_t, std::size_t>{1, 1});
  CHECK(spread[5] == std::pair<std::size_t, std::size_t>{3, 4});    // 1000 / 300
  CHECK(spread[-1] == std::pair<std::size_t, std::size_t>{25, 25});  // 1000 / 40
  CHECK(spread[2] == std::pair<std::size_t, std::size_t>{142, 143}); // 1000 / 7
}

TEST_CASE("undersampling brings every class down to the smallest, without repeats", "[preprocess]") {
  const auto labels = skewed_labels();
  auto plan = rebalance(labels, {.mode = rebalance_mode::undersample, .seed = 1});
  REQUIRE(plan);
  for (auto& [label, n] : class_counts(labels, *plan)) CHECK(n == 7);
  CHECK(plan->size() == 28);
  CHECK(std::is_sorted(plan->begin(), plan->end()));
  CHECK(std::adjacent_find(plan->begin(), plan->end()) == plan->end());
}

TEST_CASE("plans are the same for the same seed and differ for another", "[preprocess]") {
  const auto labels = skewed_labels();
  for (auto mode : {rebalance_mode::oversample, rebalance_mode::undersample}) {
    auto a = rebalance(labels, {.mode = mode, .seed = 1});
    auto b = rebalance(labels, {.mode = mode, .seed = 1});
    auto c = rebalance(labels, {.mode = mode, .seed = 2});
    REQUIRE(a);
    REQUIRE(b);
    REQUIRE(c);
    CHECK(*a == *b);
    CHECK(*a != *c);
  }
  auto s1 = stratified_sample(labels, 0.2, 1), s2 = stratified_sample(labels, 0.2, 1);
  auto s3 = stratified_sample(labels, 0.2, 2);
  REQUIRE(s1);
  REQUIRE(s3);
  CHECK(*s1 == *s2);
  CHECK(*s1 != *s3);
}

TEST_CASE("a class's draw does not depend on the other classes", "[preprocess]") {
  // The same class-5 items, alone and among others: the same ones are kept.
  const auto labels = skewed_labels();
  std::vector<std::int32_t> fives;
  std::vector<std::uint32_t> where;
  for (std::uint32_t i = 0; i < labels.size(); ++i) {
    if (labels[i] == 5) {
      fives.push_back(5);
      where.push_back(i);
    }
  }
  auto all = stratified_sample(labels, 0.1, 4);
  auto alone = stratified_sample(fives, 0.1, 4);
  REQUIRE(all);
  REQUIRE(alone);
  std::vector<std::uint32_t> kept_in_all, kept_alone;
  for (auto i : *all) if (labels[i] == 5) kept_in_all.push_back(i);
  for (auto i : *alone) kept_alone.push_back(where[i]);
  CHECK(kept_in_all == kept_alone);
}

TEST_CASE("a stratified sample keeps each class in proportion, at least one", "[preprocess]") {
  const auto labels = skewed_labels();
  auto plan = stratified_sample(labels, 0.1, 3);
  REQUIRE(plan);
  auto counts = class_counts(labels, *plan);
  CHECK(counts[0] == 100);
  CHECK(counts[5] == 30);
  CHECK(counts[-1] == 4);
  CHECK(counts[2] == 1);  // round(0.7) = 1
  CHECK(std::is_sorted(plan->begin(), plan->end()));
  CHECK(std::adjacent_find(plan->begin(), plan->end()) == plan->end());

  auto tiny = stratified_sample(labels, 0.001, 3);
  REQUIRE(tiny);
  counts = class_counts(labels, *tiny);
  CHECK(counts[0] == 1);
  CHECK(counts[2] == 1);  // round(0.007) = 0, raised to 1

  auto half = stratified_sample(labels, 0.5, 3);  // halves round away from zero: 3.5 -> 4
  REQUIRE(half);
  CHECK(class_counts(labels, *half)[2] == 4);

  auto all = stratified_sample(labels, 1.0, 3);
  REQUIRE(all);
  CHECK(all->size() == labels.size());
}

TEST_CASE("a fraction outside (0, 1] is refused", "[preprocess]") {
  const auto labels = skewed_labels();
  for (double bad : {0.0, -0.5, 1.0000001, 2.0, std::numeric_limits<double>::quiet_NaN(),
                     std::numeric_limits<double>::infinity()}) {
    auto plan = stratified_sample(labels, bad, 1);
    REQUIRE_FALSE(plan);
    CHECK(plan.error().code() == celer::error_code::invalid_argument);
    CHECK_THAT(plan.error().message(), Catch::Contains("fraction"));
  }
}

TEST_CASE("no labels give empty plans", "[preprocess]") {
  auto over = rebalance({}, {});
  auto sample = stratified_sample({}, 0.5, 1);
  REQUIRE(over);
  REQUIRE(sample);
  CHECK(over->empty());
  CHECK(sample->empty());
}

TEST_CASE("copies of an oversample get distinct keys", "[preprocess]") {
  CHECK(copy_key("img/7.png", 0) == "img/7.png");
  CHECK(copy_key("img/7.png", 1) == "img/7.png#1");
  CHECK(copy_key("img/7.png", 12) == "img/7.png#12");
  CHECK(copy_numbers(std::vector<std::uint32_t>{3, 3, 5, 3, 7, 5}) ==
        std::vector<std::uint32_t>{0, 1, 0, 2, 0, 1});

  const auto labels = skewed_labels();
  auto plan = rebalance(labels, {.mode = rebalance_mode::oversample, .seed = 9});
  REQUIRE(plan);
  const auto copies = copy_numbers(*plan);
  std::set<std::string> keys;
  for (std::size_t i = 0; i < plan->size(); ++i) {
    keys.insert(copy_key("item/" + std::to_string((*plan)[i]), copies[i]));
  }
  CHECK(keys.size() == plan->size());
}
