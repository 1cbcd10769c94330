#pragma once
/// Class rebalancing and stratified sampling as plans: lists of input positions computed from
/// the labels alone, so no item is copied to decide, and the plan can travel to the workers
/// that hold the items.
///
///   namespace pp = celer::preprocess;
///   std::vector<std::int32_t> labels = ...;             // one per item, in input order
///   auto plan = pp::rebalance(labels, {.mode = pp::rebalance_mode::oversample, .seed = 7});
///   auto copies = pp::copy_numbers(*plan);              // 0 for the first use of an index
///   for (std::size_t i = 0; i < plan->size(); ++i) {
///     pp::item it = items[(*plan)[i]];
///     it.key = pp::copy_key(it.key, copies[i]);        // "img/7.png", "img/7.png#1", ...
///     out.push_back(std::move(it));
///   }
///   auto val = pp::stratified_sample(labels, /*fraction=*/0.1, /*seed=*/7);
///
/// Every distinct label value is a class, −1 ("no label") included: filter unlabelled items
/// out first if they should not count. Each class draws from its own xoshiro256** seeded
/// with stable_hash64 of the label's four little-endian bytes and the seed, so a class's
/// choice does not depend on which other classes exist. Plans are sorted by input index,
/// ascending; an index used twice or more appears that many times, next to itself. The same
/// labels and seed give the same plan on every machine.
#include <celer/error.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace celer::preprocess {

enum class rebalance_mode : std::uint8_t {
  /// Every class up to the largest class's count: all items once, plus copies.
  oversample,
  /// Every class down to the smallest class's count, drawn without replacement.
  undersample,
};

struct rebalance_options {
  rebalance_mode mode = rebalance_mode::oversample;
  std::uint64_t seed = 0;
};

/// A plan that gives every class the same count.
///
/// Oversample: a class of n_c items below the largest count N keeps each item once and adds
/// N − n_c copies, taken round-robin over a seeded shuffle of the class (the shuffle's first
/// item, its second, ..., starting again after the last). Every item of the class is thus
/// used ⌊N/n_c⌋ or ⌈N/n_c⌉ times, the fewest repeats any plan can have (copies drawn with
/// replacement would use some items many times and others never).
///
/// Undersample: every class keeps a uniform draw without replacement of M of its items, M
/// the smallest class's count.
///
/// Returns input indices, ascending. invalid_argument for 2^32 labels or more (indices are
/// 32-bit). No labels: an empty plan.
[[nodiscard]] expected<std::vector<std::uint32_t>> rebalance(std::span<const std::int32_t> labels,
                                                             const rebalance_options& options);

/// A sample that keeps every class in proportion: each class of n_c items keeps
/// round(fraction × n_c) (halves away from zero), and at least one, drawn without
/// replacement. Returns input indices, ascending. invalid_argument when fraction is not in
/// (0, 1] (NaN included) or for 2^32 labels or more.
[[nodiscard]] expected<std::vector<std::uint32_t>> stratified_sample(
  std::span<const std::int32_t> labels, double fraction, std::uint64_t seed);

/// For each position of `plan`, how many times its index appeared before it: 0 for the first
/// use, 1 for the second, ... Pair with copy_key to name the copies.
[[nodiscard]] std::vector<std::uint32_t> copy_numbers(std::span<const std::uint32_t> plan);

/// The key of copy `copy` of an item: copy 0 is the key itself, copy k > 0 is key + "#" + k
/// ("img/7.png#2"), so the copies of an oversample have distinct keys (and a key_digest
/// tells them apart). Distinct only while no original key already ends in "#<number>".
[[nodiscard]] std::string copy_key(std::string_view key, std::uint32_t copy);

} // namespace celer::preprocess
