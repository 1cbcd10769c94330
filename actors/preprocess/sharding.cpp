// Consistent hashing and category-balanced shards (sharding.hpp).
#include <celer/actors/preprocess/sharding.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>

namespace celer::preprocess {
namespace {

// ---- XXH64 (xxHash specification 0.1.1, section "XXH64 algorithm description") ----
constexpr std::uint64_t prime1 = 0x9E3779B185EBCA87ull;
constexpr std::uint64_t prime2 = 0xC2B2AE3D27D4EB4Full;
constexpr std::uint64_t prime3 = 0x165667B19E3779F9ull;
constexpr std::uint64_t prime4 = 0x85EBCA77C2B2AE63ull;
constexpr std::uint64_t prime5 = 0x27D4EB2F165667C5ull;

constexpr std::uint64_t rotl(std::uint64_t x, int r) noexcept { return (x << r) | (x >> (64 - r)); }

/// Little-endian reads, whatever the machine's byte order.
std::uint64_t read_le(const char* p, int bytes) noexcept {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) {
    v |= static_cast<std::uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  }
  return v;
}

constexpr std::uint64_t xxh_round(std::uint64_t acc, std::uint64_t input) noexcept {
  acc += input * prime2;
  acc = rotl(acc, 31);
  return acc * prime1;
}

constexpr std::uint64_t merge_round(std::uint64_t acc, std::uint64_t v) noexcept {
  acc ^= xxh_round(0, v);
  return acc * prime1 + prime4;
}

} // namespace

std::uint64_t stable_hash64(std::string_view data, std::uint64_t seed) noexcept {
  const char* p = data.data();
  const char* const end = p + data.size();
  std::uint64_t h = 0;
  if (data.size() >= 32) {
    std::uint64_t v1 = seed + prime1 + prime2, v2 = seed + prime2, v3 = seed, v4 = seed - prime1;
    for (; end - p >= 32; p += 32) {
      v1 = xxh_round(v1, read_le(p, 8));
      v2 = xxh_round(v2, read_le(p + 8, 8));
      v3 = xxh_round(v3, read_le(p + 16, 8));
      v4 = xxh_round(v4, read_le(p + 24, 8));
    }
    h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
    h = merge_round(h, v1);
    h = merge_round(h, v2);
    h = merge_round(h, v3);
    h = merge_round(h, v4);
  } else {
    h = seed + prime5;
  }
  h += static_cast<std::uint64_t>(data.size());
  for (; end - p >= 8; p += 8) {
    h ^= xxh_round(0, read_le(p, 8));
    h = rotl(h, 27) * prime1 + prime4;
  }
  if (end - p >= 4) {
    h ^= read_le(p, 4) * prime1;
    h = rotl(h, 23) * prime2 + prime3;
    p += 4;
  }
  for (; p < end; ++p) {
    h ^= static_cast<std::uint64_t>(static_cast<unsigned char>(*p)) * prime5;
    h = rotl(h, 11) * prime1;
  }
  h ^= h >> 33;
  h *= prime2;
  h ^= h >> 29;
  h *= prime3;
  h ^= h >> 32;
  return h;
}

// ---------------------------------------------------------------------------------------
// hash_ring

expected<void> hash_ring::add(std::string node) {
  if (node.empty()) return error(error_code::invalid_argument, "hash_ring: a node's name is empty");
  if (options_.virtual_nodes == 0) {
    return error(error_code::invalid_argument,
                 "hash_ring: virtual_nodes is 0; a node needs points");
  }
  const auto at = std::lower_bound(nodes_.begin(), nodes_.end(), node);
  if (at != nodes_.end() && *at == node) {
    return error(error_code::already_exists, "hash_ring: node " + node + " is already on the ring");
  }
  nodes_.insert(at, std::move(node));
  rebuild();
  return {};
}

expected<void> hash_ring::remove(std::string_view node) {
  const auto at = std::lower_bound(nodes_.begin(), nodes_.end(), node);
  if (at == nodes_.end() || *at != node) {
    return error(error_code::not_found,
                 "hash_ring: node " + std::string(node) + " is not on the ring");
  }
  nodes_.erase(at);
  rebuild();
  return {};
}

bool hash_ring::contains(std::string_view node) const noexcept {
  return std::binary_search(nodes_.begin(), nodes_.end(), node);
}

void hash_ring::rebuild() {
  // Point i of node "n" is the hash of "n#i": it depends on the node alone, so a node's
  // points stay put when others come and go, which is what limits movement to ~1/N.
  points_.clear();
  points_.reserve(nodes_.size() * options_.virtual_nodes);
  std::string name;
  for (std::uint32_t n = 0; n < nodes_.size(); ++n) {
    for (std::uint32_t i = 0; i < options_.virtual_nodes; ++i) {
      name = nodes_[n];
      name += '#';
      name += std::to_string(i);
      points_.emplace_back(stable_hash64(name, options_.seed), n);
    }
  }
  std::sort(points_.begin(), points_.end());  // nodes_ is sorted: ties go by name
}

std::optional<std::string_view> hash_ring::owner(std::string_view key) const {
  if (points_.empty()) return std::nullopt;
  const std::uint64_t h = stable_hash64(key, options_.seed);
  auto it = std::lower_bound(points_.begin(), points_.end(), h,
                             [](const auto& point, std::uint64_t v) { return point.first < v; });
  if (it == points_.end()) it = points_.begin();  // past the last point: round to the first
  return std::string_view(nodes_[it->second]);
}

std::map<std::string, std::size_t> hash_ring::load(std::span<const std::string> keys) const {
  std::vector<std::size_t> by_index(nodes_.size(), 0);
  for (const auto& k : keys) {
    if (auto o = owner(k)) {
      ++by_index[static_cast<std::size_t>(
        std::lower_bound(nodes_.begin(), nodes_.end(), *o) - nodes_.begin())];
    }
  }
  std::map<std::string, std::size_t> counts;
  for (std::size_t n = 0; n < nodes_.size(); ++n) counts.emplace(nodes_[n], by_index[n]);
  return counts;
}

movement measure_movement(const hash_ring& before, const hash_ring& after,
                          std::span<const std::string> keys) {
  movement m;
  m.keys = keys.size();
  for (const auto& k : keys) {
    const auto a = before.owner(k), b = after.owner(k);
    if (a == b) continue;
    ++m.moved;
    ++m.from[a ? std::string(*a) : std::string()];
    ++m.to[b ? std::string(*b) : std::string()];
  }
  m.fraction = m.keys == 0 ? 0.0 : static_cast<double>(m.moved) / static_cast<double>(m.keys);
  return m;
}

// ---------------------------------------------------------------------------------------
// balanced shards

namespace {

/// Item indices by category, categories ascending.
std::map<std::int32_t, std::vector<std::size_t>> by_category(std::span<const shard_item> items) {
  std::map<std::int32_t, std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < items.size(); ++i) groups[items[i].category].push_back(i);
  return groups;
}

} // namespace

expected<std::vector<std::uint32_t>> balanced_assign(std::span<const shard_item> items,
                                                     const balance_options& options) {
  const std::uint32_t shards = options.shards;
  if (shards == 0) return error(error_code::invalid_argument, "balanced_assign: shards is 0");
  std::vector<std::uint64_t> hash(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    hash[i] = stable_hash64(items[i].key, options.seed);
  }
  // The order within a category depends on the items alone, not on where they sit in
  // `items` (the key breaks hash ties; equal keys are interchangeable).
  const auto by_hash = [&](std::size_t a, std::size_t b) {
    return std::tie(hash[a], items[a].key) < std::tie(hash[b], items[b].key);
  };
  auto groups = by_category(items);
  std::vector<std::uint32_t> shard_of(items.size(), 0);

  if (!options.by_size) {
    std::uint32_t dealer = 0;
    for (auto& [category, members] : groups) {
      std::sort(members.begin(), members.end(), by_hash);
      for (auto i : members) {
        shard_of[i] = dealer;
        dealer = dealer + 1 == shards ? 0 : dealer + 1;
      }
    }
    return shard_of;
  }

  // Two levels. Each category, largest items first, is cut into rounds of S items; a shard
  // takes at most one item of a round, so categories keep their proportion. Rounds of every
  // category then go largest total first, and in each the largest item goes to the shard
  // with the smallest total so far (longest-processing-time first, a round at a time): the
  // small rounds come last and even out what the large ones left.
  struct round {
    std::uint64_t total;
    std::int32_t category;
    std::size_t first;  // into the category's sorted members
    const std::vector<std::size_t>* members;
  };
  std::vector<round> rounds;
  for (auto& [category, members] : groups) {
    std::sort(members.begin(), members.end(), [&](std::size_t a, std::size_t b) {
      if (items[a].size != items[b].size) return items[a].size > items[b].size;
      return by_hash(a, b);
    });
    for (std::size_t first = 0; first < members.size(); first += shards) {
      const std::size_t last = std::min<std::size_t>(members.size(), first + shards);
      std::uint64_t total = 0;
      for (std::size_t j = first; j < last; ++j) total += items[members[j]].size;
      rounds.push_back({total, category, first, &members});
    }
  }
  std::sort(rounds.begin(), rounds.end(), [](const round& a, const round& b) {
    return std::tie(b.total, a.category, a.first) < std::tie(a.total, b.category, b.first);
  });
  std::vector<std::uint64_t> total(shards, 0), count(shards, 0);
  std::vector<std::uint32_t> lightest(shards);
  for (const auto& r : rounds) {
    std::iota(lightest.begin(), lightest.end(), 0u);
    std::sort(lightest.begin(), lightest.end(), [&](std::uint32_t a, std::uint32_t b) {
      return std::tie(total[a], count[a], a) < std::tie(total[b], count[b], b);
    });
    const std::size_t last = std::min<std::size_t>(r.members->size(), r.first + shards);
    for (std::size_t j = r.first; j < last; ++j) {
      const auto i = (*r.members)[j];
      const auto s = lightest[j - r.first];
      shard_of[i] = s;
      total[s] += items[i].size;
      ++count[s];
    }
  }
  return shard_of;
}

expected<skew_report> worst_skew(std::span<const shard_item> items,
                                 std::span<const std::uint32_t> shard_of, std::uint32_t shards) {
  if (shards == 0) return error(error_code::invalid_argument, "worst_skew: shards is 0");
  if (items.size() != shard_of.size()) {
    return error(error_code::invalid_argument,
                 "worst_skew: " + std::to_string(items.size()) + " items but " +
                   std::to_string(shard_of.size()) + " shard numbers");
  }
  std::map<std::int32_t, std::vector<std::uint64_t>> per_category;  // n_sc by shard
  std::vector<std::uint64_t> n_s(shards, 0), size_s(shards, 0);
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto s = shard_of[i];
    if (s >= shards) {
      return error(error_code::invalid_argument,
                   "worst_skew: item " + std::to_string(i) + " is in shard " + std::to_string(s) +
                     " of " + std::to_string(shards));
    }
    auto& row = per_category[items[i].category];
    if (row.empty()) row.assign(shards, 0);
    ++row[s];
    ++n_s[s];
    size_s[s] += items[i].size;
  }
  skew_report r;
  r.max_count = *std::max_element(n_s.begin(), n_s.end());
  r.min_count = *std::min_element(n_s.begin(), n_s.end());
  r.max_size = *std::max_element(size_s.begin(), size_s.end());
  r.min_size = *std::min_element(size_s.begin(), size_s.end());
  const auto n = static_cast<double>(items.size());
  for (const auto& [category, row] : per_category) {
    const auto n_c = static_cast<double>(std::accumulate(row.begin(), row.end(), std::uint64_t{0}));
    const double share = n_c / n;
    for (std::uint32_t s = 0; s < shards; ++s) {
      const auto in_shard = static_cast<double>(n_s[s]);
      const double share_s = n_s[s] == 0 ? 0.0 : static_cast<double>(row[s]) / in_shard;
      const double absolute = std::abs(share_s - share);
      const double relative = absolute / share;
      if (relative > r.worst_relative) {
        r.worst_relative = relative;
        r.shard = s;
        r.category = category;
      }
      r.worst_absolute = std::max(r.worst_absolute, absolute);
      r.worst_items =
        std::max(r.worst_items, std::abs(static_cast<double>(row[s]) - in_shard * n_c / n));
    }
  }
  return r;
}

} // namespace celer::preprocess
