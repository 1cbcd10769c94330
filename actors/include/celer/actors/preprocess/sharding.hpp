#pragma once
/// Which node processes an item, and which shard it lands in: consistent hashing of item
/// keys onto nodes (a ring with virtual nodes), and category-balanced shard assignment.
///
///   namespace pp = celer::preprocess;
///   pp::hash_ring ring({.virtual_nodes = 160});
///   for (auto& n : {"node-a", "node-b", "node-c", "node-d"}) (void)ring.add(n);
///   auto owner = ring.owner("img/000123.png");        // std::optional<std::string_view>
///
///   pp::hash_ring grown = ring;
///   (void)grown.add("node-e");
///   auto moved = pp::measure_movement(ring, grown, keys);   // moved.fraction: about 1/5
///
///   std::vector<pp::shard_item> items = ...;             // key, category, size
///   auto shard_of = pp::balanced_assign(items, {.shards = 16, .by_size = true});
///   auto skew = pp::worst_skew(items, *shard_of, 16);   // skew->worst_relative, size_ratio()
///
/// Every hash here is `stable_hash64` (XXH64), computed by this code from the bytes, so a
/// key lands on the same node and in the same shard on every machine, compiler and build
/// (std::hash promises none of that). Pure logic: no runtime calls, no clock, no threads.

#include <celer/error.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace celer::preprocess {

/// XXH64 of `data` with `seed` (xxHash's 64-bit hash, specification 0.1.1): the same value
/// for the same bytes everywhere. stable_hash64("") is 0xEF46DB3751D8E999.
[[nodiscard]] std::uint64_t stable_hash64(std::string_view data, std::uint64_t seed = 0) noexcept;

struct ring_options {
  /// Points each node places on the ring. More points spread keys more evenly (the spread of
  /// a node's share shrinks as 1/sqrt(points)) at the cost of memory and lookup time.
  std::uint32_t virtual_nodes = 160;
  /// Seeds every hash: rings with different seeds place keys independently.
  std::uint64_t seed = 0;
};

/// A consistent-hash ring: each node owns the keys whose hash falls between its points and
/// the points before them. Adding a node to N takes about 1/(N+1) of the keys, all for the
/// new node; removing one moves only its own keys. Where a key lands depends only on the set
/// of nodes and the options, not on the order of add and remove calls. Copyable; one thread
/// (or readers only).
class hash_ring {
public:
  explicit hash_ring(ring_options options = {}) : options_(options) {}

  /// Adds `node`. invalid_argument for an empty name or virtual_nodes == 0; already_exists
  /// for a node already on the ring. Rebuilds the points: O(nodes × virtual_nodes).
  [[nodiscard]] expected<void> add(std::string node);
  /// Removes `node`; not_found if it is not on the ring.
  [[nodiscard]] expected<void> remove(std::string_view node);
  [[nodiscard]] bool contains(std::string_view node) const noexcept;

  /// The node that owns `key`: the first point at or after the key's hash, going round.
  /// std::nullopt on an empty ring. The view is into the ring, valid until it changes.
  [[nodiscard]] std::optional<std::string_view> owner(std::string_view key) const;

  /// The nodes, by name.
  [[nodiscard]] const std::vector<std::string>& nodes() const noexcept { return nodes_; }
  [[nodiscard]] std::size_t size() const noexcept { return nodes_.size(); }
  [[nodiscard]] const ring_options& options() const noexcept { return options_; }

  /// How many of `keys` each node owns (every node listed, zero included).
  [[nodiscard]] std::map<std::string, std::size_t> load(std::span<const std::string> keys) const;

private:
  void rebuild();

  ring_options options_;
  std::vector<std::string> nodes_;  // sorted
  /// (hash, node index) sorted: hash ties go to the node whose name sorts first.
  std::vector<std::pair<std::uint64_t, std::uint32_t>> points_;
};

/// How the owners of a key set differ between two rings.
struct movement {
  std::size_t keys = 0;
  /// Keys whose owner differs (a key with no owner on either ring counts as unowned there).
  std::size_t moved = 0;
  /// moved / keys (0 for no keys).
  double fraction = 0;
  /// Moved keys by the node that owned them before, and by the one that owns them after.
  std::map<std::string, std::size_t> from, to;
};

/// Compares the owner of every key in `before` and `after`.
[[nodiscard]] movement measure_movement(const hash_ring& before, const hash_ring& after,
                                        std::span<const std::string> keys);

/// One item to place in a shard.
struct shard_item {
  std::string key;
  /// The class, category or language the shards keep in proportion.
  std::int32_t category = 0;
  /// What the shards' totals should even out when `by_size` (bytes, tokens, characters).
  std::uint64_t size = 1;
};

struct balance_options {
  std::uint32_t shards = 1;
  /// Also even out the shards' total size, not only their counts.
  bool by_size = false;
  /// Seeds the key hash that orders items within a category.
  std::uint64_t seed = 0;
};

/// Assigns each item a shard so that every shard holds each category in proportion.
/// Deterministic: the same items (in any order) and options give each item the same shard.
///
/// Counts (`by_size = false`): within each category (in ascending order) items are sorted by
/// stable_hash64(key, seed), then dealt round-robin, the dealer going on from one category to
/// the next. Each shard gets ⌊n_c/S⌋ or ⌈n_c/S⌉ items of every category c, and shards' counts
/// differ by at most 1.
///
/// Sizes (`by_size = true`), two levels: each category, largest items first, is cut into
/// rounds of S items; the rounds of all categories go largest total first, and in each the
/// largest item goes to the shard with the smallest total so far, the next to the next
/// smallest, and so on. A shard takes at most one item of a round, so categories stay within
/// one item of proportion per shard; shard totals even out as far as that allows (0.25%
/// apart for 100,000 Pareto-sized documents over 16 shards, where the largest document is a
/// tenth of a shard), at the cost of shards' counts differing by up to one per category.
///
/// Returns the shard of each item, in the order of `items`. invalid_argument if shards == 0.
[[nodiscard]] expected<std::vector<std::uint32_t>> balanced_assign(
  std::span<const shard_item> items, const balance_options& options);

/// How far an assignment is from every shard holding each category in proportion.
/// With n items, n_c of category c, n_s in shard s and n_sc of c in s:
///   share(c) = n_c / n, share_s(c) = n_sc / n_s (0 when the shard is empty).
struct skew_report {
  /// max over s, c of |share_s(c) − share(c)| / share(c): 0.05 means some shard holds some
  /// category 5% above or below its overall share. Rare categories dominate it: rounding to
  /// whole items alone gives about 1 / (n_c / S).
  double worst_relative = 0;
  /// Where worst_relative is.
  std::uint32_t shard = 0;
  std::int32_t category = 0;
  /// max over s, c of |share_s(c) − share(c)| (a fraction of the shard, not relative).
  double worst_absolute = 0;
  /// max over s, c of |n_sc − n_s · n_c / n|: items away from exact proportion. Rounding
  /// alone makes this up to about 1; a random assignment makes it grow as sqrt(n_c / S).
  double worst_items = 0;
  /// The largest and smallest shard by item count and by total size.
  std::uint64_t max_count = 0, min_count = 0;
  std::uint64_t max_size = 0, min_size = 0;

  /// max_size / min_size (infinity when a shard is empty but another is not; 1 for none).
  [[nodiscard]] double size_ratio() const noexcept {
    if (max_size == 0) return 1.0;
    if (min_size == 0) return std::numeric_limits<double>::infinity();
    return static_cast<double>(max_size) / static_cast<double>(min_size);
  }
};

/// Measures `shard_of` (one shard per item, as balanced_assign returns) over `shards`
/// shards. invalid_argument if shards == 0, the sizes differ or a shard is out of range.
[[nodiscard]] expected<skew_report> worst_skew(std::span<const shard_item> items,
                                               std::span<const std::uint32_t> shard_of,
                                               std::uint32_t shards);

} // namespace celer::preprocess
