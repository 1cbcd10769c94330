// celer::preprocess's consistent hashing (how many keys move when nodes come and go) and
// category-balanced shards (how far shards are from holding each category in proportion).
// The measured figures are printed with WARN, so a run shows them; they are also in
// actors/preprocess/README.md.
#include <celer/actors/preprocess/sharding.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace celer::preprocess;

namespace {

std::vector<std::string> item_keys(std::size_t n) {
  std::vector<std::string> keys;
  keys.reserve(n);
  for (std::size_t i = 0; i < n; ++i) keys.push_back("item/" + std::to_string(i) + ".jpg");
  return keys;
}

hash_ring ring_of(std::size_t nodes, ring_options options = {}) {
  hash_ring ring(options);
  for (std::size_t i = 0; i < nodes; ++i) REQUIRE(ring.add("node-" + std::to_string(i)));
  return ring;
}

/// A uniform double in [0, 1) from the engine's bits (not std::uniform_real_distribution,
/// whose algorithm differs between standard libraries).
double uniform(std::mt19937_64& gen) { return static_cast<double>(gen() >> 11) * 0x1.0p-53; }

/// `n` items whose categories (0..categories-1) follow Zipf's law with exponent `s`, and
/// whose sizes follow a Pareto law (minimum 200, shape 1.5: a few very long documents).
std::vector<shard_item> zipf_items(std::size_t n, int categories, double s, std::uint64_t seed) {
  std::vector<double> cdf;
  double sum = 0;
  for (int k = 1; k <= categories; ++k) cdf.push_back(sum += 1.0 / std::pow(k, s));
  for (auto& c : cdf) c /= sum;
  std::mt19937_64 gen(seed);
  std::vector<shard_item> items(n);
  for (std::size_t i = 0; i < n; ++i) {
    items[i].key = "doc/" + std::to_string(i);
    const auto at = std::lower_bound(cdf.begin(), cdf.end(), uniform(gen)) - cdf.begin();
    items[i].category = static_cast<std::int32_t>(std::min<std::ptrdiff_t>(at, categories - 1));
    items[i].size = static_cast<std::uint64_t>(200.0 / std::pow(1.0 - uniform(gen), 1.0 / 1.5));
  }
  return items;
}

/// The items of each category in each shard.
std::map<std::int32_t, std::vector<std::size_t>> category_counts(
  const std::vector<shard_item>& items, const std::vector<std::uint32_t>& shard_of,
  std::uint32_t shards) {
  std::map<std::int32_t, std::vector<std::size_t>> counts;
  for (std::size_t i = 0; i < items.size(); ++i) {
    auto& row = counts[items[i].category];
    row.resize(shards, 0);
    ++row[shard_of[i]];
  }
  return counts;
}

} // namespace

TEST_CASE("stable_hash64 is XXH64, the same on every machine", "[preprocess]") {
  // Values from libxxhash 0.8.1's XXH64 (the 72-byte text takes the 32-byte stripe path).
  CHECK(stable_hash64("") == 0xEF46DB3751D8E999ull);
  CHECK(stable_hash64("a") == 0xD24EC4F1A98C6E5Bull);
  CHECK(stable_hash64("abc") == 0x44BC2CF5AD770999ull);
  CHECK(stable_hash64("123456789") == 0x8CB841DB40E6AE83ull);
  const std::string fox =
    "The quick brown fox jumps over the lazy dog, and then over the lazy cat.";
  REQUIRE(fox.size() == 72);
  CHECK(stable_hash64(fox) == 0x84C9F5EA562A55EBull);
  CHECK(stable_hash64(fox, 42) == 0x51EE655B04C33631ull);
  CHECK(stable_hash64("node-a#0") == 0xD90CF72DEC758D28ull);
}

TEST_CASE("adding a fifth node to four moves about a fifth of the keys, all to it",
          "[preprocess]") {
  const auto keys = item_keys(100'000);
  const hash_ring four = ring_of(4);
  hash_ring five = four;
  REQUIRE(five.add("node-4"));
  const movement m = measure_movement(four, five, keys);
  WARN("4 -> 5 nodes (160 virtual each): " << m.moved << " of " << m.keys
                                           << " keys moved, fraction " << m.fraction
                                           << " (ideal 0.2)");
  CHECK(m.keys == 100'000);
  CHECK(m.fraction >= 0.15);
  CHECK(m.fraction <= 0.25);
  // Only the new node gains; the moved keys are exactly what it now owns.
  REQUIRE(m.to.size() == 1);
  CHECK(m.to.begin()->first == "node-4");
  CHECK(five.load(keys).at("node-4") == m.moved);
  for (const auto& [from, n] : m.from) CHECK(four.contains(from));
  // Spot-check key by key: a key either stays or goes to node-4.
  for (std::size_t i = 0; i < keys.size(); i += 97) {
    const auto a = four.owner(keys[i]), b = five.owner(keys[i]);
    REQUIRE((a && b));
    CHECK((*a == *b || *b == "node-4"));
  }
}

TEST_CASE("removing one of five nodes moves about a fifth of the keys, only its own",
          "[preprocess]") {
  const auto keys = item_keys(100'000);
  const hash_ring five = ring_of(5);
  hash_ring four = five;
  REQUIRE(four.remove("node-2"));
  CHECK_FALSE(four.contains("node-2"));
  const movement m = measure_movement(five, four, keys);
  WARN("5 -> 4 nodes (node-2 removed): " << m.moved << " of " << m.keys
                                         << " keys moved, fraction " << m.fraction
                                         << " (ideal 0.2)");
  CHECK(m.fraction >= 0.15);
  CHECK(m.fraction <= 0.25);
  REQUIRE(m.from.size() == 1);
  CHECK(m.from.begin()->first == "node-2");
  CHECK(five.load(keys).at("node-2") == m.moved);
  CHECK(m.to.count("node-2") == 0);
  // Its keys spread over the others rather than all landing on one neighbour.
  CHECK(m.to.size() == 4);
}

TEST_CASE("a ring places keys by its set of nodes, whatever the order they came in",
          "[preprocess]") {
  const auto keys = item_keys(5'000);
  hash_ring a, b;
  for (auto n : {"east", "west", "north", "south"}) REQUIRE(a.add(n));
  for (auto n : {"south", "north", "gone", "west", "east"}) REQUIRE(b.add(n));
  REQUIRE(b.remove("gone"));
  CHECK(measure_movement(a, b, keys).moved == 0);
  CHECK(a.nodes() == std::vector<std::string>{"east", "north", "south", "west"});

  // Another seed places them independently (about 3/4 of the keys differ among 4 nodes).
  hash_ring c({.seed = 7});
  for (const auto& n : a.nodes()) REQUIRE(c.add(n));
  const auto other = measure_movement(a, c, keys);
  CHECK(other.fraction > 0.6);
}

TEST_CASE("virtual nodes even out the nodes' shares of the keys", "[preprocess]") {
  const auto keys = item_keys(100'000);
  auto spread = [&](std::uint32_t virtual_nodes) {
    const auto load = ring_of(8, {.virtual_nodes = virtual_nodes}).load(keys);
    std::size_t hi = 0, lo = keys.size();
    for (const auto& [node, n] : load) {
      hi = std::max(hi, n);
      lo = std::min(lo, n);
    }
    return static_cast<double>(hi) / static_cast<double>(lo);
  };
  const double one = spread(1), many = spread(160);
  WARN("8 nodes, 100,000 keys: busiest / idlest node " << one << " with 1 virtual node, "
                                                       << many << " with 160");
  // A node's share varies by about 1/sqrt(160) = 8%, so among 8 nodes the extremes differ
  // by some 30%; one point per node leaves them several times apart.
  CHECK(many < 1.5);
  CHECK(one > many);
}

TEST_CASE("a ring refuses empty names, repeats, unknown nodes and zero points",
          "[preprocess]") {
  hash_ring ring;
  CHECK_FALSE(ring.owner("k").has_value());  // an empty ring owns nothing
  CHECK(ring.add("").error().code() == celer::error_code::invalid_argument);
  REQUIRE(ring.add("a"));
  CHECK(ring.add("a").error().code() == celer::error_code::already_exists);
  CHECK(ring.remove("b").error().code() == celer::error_code::not_found);
  CHECK(ring.owner("k") == std::optional<std::string_view>("a"));
  REQUIRE(ring.remove("a"));
  CHECK(ring.size() == 0);
  hash_ring none({.virtual_nodes = 0});
  CHECK(none.add("a").error().code() == celer::error_code::invalid_argument);
}

TEST_CASE("balanced shards hold each of 55 Zipf-skewed categories in proportion",
          "[preprocess]") {
  constexpr std::uint32_t shards = 16;
  const auto items = zipf_items(100'000, 55, 1.1, 1);
  auto shard_of = balanced_assign(items, {.shards = shards});
  REQUIRE(shard_of);
  auto skew = worst_skew(items, *shard_of, shards);
  REQUIRE(skew);

  // The baseline a plain hash partition gives: key hash modulo the shard count.
  std::vector<std::uint32_t> hashed(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    hashed[i] = static_cast<std::uint32_t>(stable_hash64(items[i].key) % shards);
  }
  auto base = worst_skew(items, hashed, shards);
  REQUIRE(base);

  const auto counts = category_counts(items, *shard_of, shards);
  std::size_t rarest = items.size();
  for (const auto& [c, row] : counts) {
    std::size_t n_c = 0;
    for (auto n : row) n_c += n;
    rarest = std::min(rarest, n_c);
    // Every shard gets floor(n_c / S) or ceil(n_c / S) of every category.
    const auto [lo, hi] = std::minmax_element(row.begin(), row.end());
    CHECK(*hi - *lo <= 1);
  }
  WARN("16 shards, 100,000 items, 55 Zipf(1.1) categories (rarest " << rarest << " items):\n"
       << "  balanced: worst relative skew " << skew->worst_relative << " (category "
       << skew->category << ", shard " << skew->shard << "), absolute " << skew->worst_absolute
       << ", worst items off " << skew->worst_items << ", shard counts " << skew->min_count
       << ".." << skew->max_count << "\n"
       << "  hash mod 16: worst relative skew " << base->worst_relative << ", absolute "
       << base->worst_absolute << ", worst items off " << base->worst_items << ", shard counts "
       << base->min_count << ".." << base->max_count);
  CHECK(counts.size() == 55);
  CHECK(skew->max_count - skew->min_count <= 1);
  // Rounding to whole items is all that is left: under one item from exact proportion,
  // which for the rarest category is about S / n_c relative.
  CHECK(skew->worst_items <= 1.01);
  CHECK(skew->worst_relative <= 1.5 * shards / static_cast<double>(rarest));
  CHECK(base->worst_relative > 4 * skew->worst_relative);
  CHECK(base->worst_items > 4 * skew->worst_items);
}

TEST_CASE("balanced shards do not depend on the order the items come in", "[preprocess]") {
  auto items = zipf_items(5'000, 55, 1.1, 2);
  for (bool by_size : {false, true}) {
    auto first = balanced_assign(items, {.shards = 7, .by_size = by_size, .seed = 3});
    REQUIRE(first);
    std::map<std::string, std::uint32_t> by_key;
    for (std::size_t i = 0; i < items.size(); ++i) by_key[items[i].key] = (*first)[i];
    auto shuffled = items;
    std::mt19937_64 gen(9);
    std::shuffle(shuffled.begin(), shuffled.end(), gen);
    auto second = balanced_assign(shuffled, {.shards = 7, .by_size = by_size, .seed = 3});
    REQUIRE(second);
    for (std::size_t i = 0; i < shuffled.size(); ++i) {
      REQUIRE(by_key.at(shuffled[i].key) == (*second)[i]);
    }
  }
}

TEST_CASE("two-level balance evens out shard sizes and keeps categories in proportion",
          "[preprocess]") {
  constexpr std::uint32_t shards = 16;
  const auto items = zipf_items(100'000, 55, 1.1, 4);
  auto by_count = balanced_assign(items, {.shards = shards});
  auto by_size = balanced_assign(items, {.shards = shards, .by_size = true});
  REQUIRE(by_count);
  REQUIRE(by_size);
  auto count_skew = worst_skew(items, *by_count, shards);
  auto size_skew = worst_skew(items, *by_size, shards);
  REQUIRE(count_skew);
  REQUIRE(size_skew);
  std::uint64_t largest = 0;
  for (const auto& it : items) largest = std::max(largest, it.size);
  WARN("16 shards, 100,000 documents (Pareto sizes, largest " << largest << "):\n"
       << "  by count: total size max/min " << count_skew->size_ratio() << ", worst relative skew "
       << count_skew->worst_relative << ", counts " << count_skew->min_count << ".."
       << count_skew->max_count << "\n"
       << "  by size:  total size max/min " << size_skew->size_ratio() << " ("
       << size_skew->min_size << ".." << size_skew->max_size << "), worst relative skew "
       << size_skew->worst_relative << ", worst items off " << size_skew->worst_items
       << ", counts " << size_skew->min_count << ".." << size_skew->max_count);
  CHECK(size_skew->size_ratio() < 1.01);
  CHECK(size_skew->size_ratio() < count_skew->size_ratio());
  // Categories still within one item per shard. Shards' counts now differ (equal sizes need
  // that), so the exact proportion moves with them: worst_items is no longer under 1, but the
  // relative skew stays at what rounding gives the rarest category.
  std::size_t rarest = items.size();
  for (const auto& [c, row] : category_counts(items, *by_size, shards)) {
    const auto [lo, hi] = std::minmax_element(row.begin(), row.end());
    CHECK(*hi - *lo <= 1);
    std::size_t n_c = 0;
    for (auto n : row) n_c += n;
    rarest = std::min(rarest, n_c);
  }
  CHECK(size_skew->worst_relative <= 1.5 * shards / static_cast<double>(rarest));
}

TEST_CASE("worst_skew measures a known assignment and refuses a wrong one", "[preprocess]") {
  // Category 0: four items; category 1: two. Shard 0 holds both of category 1 and one of 0.
  const std::vector<shard_item> items = {{"a", 0, 10}, {"b", 0, 10}, {"c", 0, 10},
                                         {"d", 0, 10}, {"e", 1, 5},  {"f", 1, 5}};
  const std::vector<std::uint32_t> shard_of = {0, 1, 1, 1, 0, 0};
  auto r = worst_skew(items, shard_of, 2);
  REQUIRE(r);
  // Shard 0: 1/3 of category 0 (overall 2/3), 2/3 of category 1 (overall 1/3): category 1 is
  // 100% above its share; shard 1 holds none of it (100% below).
  CHECK(r->worst_relative == Approx(1.0));
  CHECK(r->category == 1);
  CHECK(r->shard == 0);  // the first of the two places where it is 1
  CHECK(r->worst_absolute == Approx(1.0 / 3.0));
  CHECK(r->worst_items == Approx(1.0));  // shard 1: 3 items, none of category 1, expected 1
  CHECK(r->max_count == 3);
  CHECK(r->min_count == 3);
  CHECK(r->max_size == 30);
  CHECK(r->min_size == 20);
  CHECK(r->size_ratio() == Approx(1.5));

  auto balanced = balanced_assign(items, {.shards = 2});
  REQUIRE(balanced);
  auto good = worst_skew(items, *balanced, 2);
  REQUIRE(good);
  CHECK(good->worst_relative == Approx(0.0));

  CHECK(worst_skew(items, shard_of, 0).error().code() == celer::error_code::invalid_argument);
  CHECK(worst_skew(items, std::vector<std::uint32_t>{0, 1}, 2).error().code() ==
        celer::error_code::invalid_argument);
  CHECK(worst_skew(items, std::vector<std::uint32_t>{0, 1, 1, 1, 0, 2}, 2).error().code() ==
        celer::error_code::invalid_argument);
  CHECK(balanced_assign(items, {.shards = 0}).error().code() ==
        celer::error_code::invalid_argument);
  auto empty = balanced_assign({}, {.shards = 3});
  REQUIRE(empty);
  CHECK(empty->empty());
}
