// Rebalancing and stratified sampling plans (sampling.hpp).
#include <celer/actors/preprocess/sampling.hpp>
#include <celer/actors/preprocess/sharding.hpp>

#include "prng.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <unordered_map>

namespace celer::preprocess {
namespace {

/// Each class's input indices, ascending, by label ascending.
using classes = std::map<std::int32_t, std::vector<std::uint32_t>>;

expected<classes> group(std::span<const std::int32_t> labels) {
  if (labels.size() > std::numeric_limits<std::uint32_t>::max()) {
    return error(error_code::invalid_argument,
                 "a plan indexes items with 32 bits; " + std::to_string(labels.size()) +
                   " labels are too many");
  }
  classes out;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    out[labels[i]].push_back(static_cast<std::uint32_t>(i));
  }
  return out;
}

/// The class's own generator: its label's little-endian bytes hashed with the seed.
detail::xoshiro256ss class_rng(std::int32_t label, std::uint64_t seed) {
  const auto u = static_cast<std::uint32_t>(label);
  const char bytes[4] = {static_cast<char>(u & 0xff), static_cast<char>((u >> 8) & 0xff),
                         static_cast<char>((u >> 16) & 0xff), static_cast<char>(u >> 24)};
  return detail::xoshiro256ss(stable_hash64(std::string_view(bytes, 4), seed));
}

/// `members`' first `k` after a partial shuffle: k of them without replacement.
void keep_drawn(std::vector<std::uint32_t>& members, std::size_t k, detail::xoshiro256ss& rng,
                std::vector<std::uint32_t>& out) {
  rng.shuffle(members.begin(), members.end(), k);
  out.insert(out.end(), members.begin(), members.begin() + static_cast<std::ptrdiff_t>(k));
}

} // namespace

expected<std::vector<std::uint32_t>> rebalance(std::span<const std::int32_t> labels,
                                               const rebalance_options& options) {
  auto by_class = group(labels);
  if (!by_class) return by_class.error();
  std::vector<std::uint32_t> plan;
  if (by_class->empty()) return plan;
  std::size_t largest = 0, smallest = std::numeric_limits<std::size_t>::max();
  for (const auto& [label, members] : *by_class) {
    largest = std::max(largest, members.size());
    smallest = std::min(smallest, members.size());
  }
  if (options.mode == rebalance_mode::oversample) {
    plan.reserve(largest * by_class->size());
    for (auto& [label, members] : *by_class) {
      plan.insert(plan.end(), members.begin(), members.end());
      if (members.size() == largest) continue;
      auto rng = class_rng(label, options.seed);
      rng.shuffle(members.begin(), members.end(), members.size());
      for (std::size_t j = 0; j < largest - members.size(); ++j) {
        plan.push_back(members[j % members.size()]);
      }
    }
  } else {
    plan.reserve(smallest * by_class->size());
    for (auto& [label, members] : *by_class) {
      auto rng = class_rng(label, options.seed);
      keep_drawn(members, smallest, rng, plan);
    }
  }
  std::sort(plan.begin(), plan.end());
  return plan;
}

expected<std::vector<std::uint32_t>> stratified_sample(std::span<const std::int32_t> labels,
                                                       double fraction, std::uint64_t seed) {
  if (!(fraction > 0 && fraction <= 1)) {
    return error(error_code::invalid_argument,
                 "a stratified sample's fraction must be in (0, 1], got " + std::to_string(fraction));
  }
  auto by_class = group(labels);
  if (!by_class) return by_class.error();
  std::vector<std::uint32_t> plan;
  for (auto& [label, members] : *by_class) {
    const double want = std::round(fraction * static_cast<double>(members.size()));
    const auto k = std::clamp<std::size_t>(static_cast<std::size_t>(want), 1, members.size());
    auto rng = class_rng(label, seed);
    keep_drawn(members, k, rng, plan);
  }
  std::sort(plan.begin(), plan.end());
  return plan;
}

std::vector<std::uint32_t> copy_numbers(std::span<const std::uint32_t> plan) {
  std::vector<std::uint32_t> out(plan.size());
  std::unordered_map<std::uint32_t, std::uint32_t> seen;
  for (std::size_t i = 0; i < plan.size(); ++i) out[i] = seen[plan[i]]++;
  return out;
}

std::string copy_key(std::string_view key, std::uint32_t copy) {
  std::string out(key);
  if (copy != 0) {
    out += '#';
    out += std::to_string(copy);
  }
  return out;
}

} // namespace celer::preprocess
