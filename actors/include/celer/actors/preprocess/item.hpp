#pragma once
/// The unit celer-preprocess works on: one item (a row of a CSV file, a JSON line, a line of
/// text, an image), and the order-independent digest of a set of item keys that proves a run
/// lost and duplicated nothing.
///
///   namespace pp = celer::preprocess;
///   pp::item it{.key = "catalog-03:000117", .label = 4, .category = "shoes",
///               .text = "Red Running Shoe", .values = {59.5f}};
///   pp::key_digest seen;
///   seen.add(it.key);                 // for every item written
///   std::cout << seen.hex();          // the same for the same key set, in any order
///
/// An item carries every field a pipeline stage may read or write; a stage that has nothing
/// to do with a field leaves it alone. Items travel between processes as msgpack (celer's
/// value encoding): the numeric vectors as their raw bytes.
#include <celer/codec.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace celer::preprocess {

struct item {
  /// Unique within a run: a file's name and row, or the input's own id column.
  std::string key;
  /// A class id in [0, classes), or -1 for none.
  std::int32_t label = -1;
  /// What shards are balanced by (a product category, a language); may be empty.
  std::string category;
  /// The item's text, for the text stages.
  std::string text;
  /// Numeric features (a CSV's number columns, or an image as floats after `to_float`).
  std::vector<float> values;
  /// Token ids, written by `vocabulary` or `bpe`.
  std::vector<std::uint32_t> tokens;
  /// An image's bytes, row-major height × width × channels (IDX images have 1 channel).
  std::vector<std::uint8_t> pixels;
  std::uint32_t height = 0, width = 0, channels = 0;

  MSGPACK_DEFINE(key, label, category, text, values, tokens, pixels, height, width, channels)
};

/// The digest of a multiset of keys: the count, and the sum modulo 2^64 of each key's
/// XXH64 (seed 0x6b6579). Adding the same keys in any order, split over any number of
/// digests merged afterwards, gives the same value; a key lost or added twice changes it.
struct key_digest {
  std::uint64_t count = 0;
  std::uint64_t sum = 0;

  void add(std::string_view key) noexcept;
  void merge(const key_digest& other) noexcept {
    count += other.count;
    sum += other.sum;
  }
  /// 16 lower-case hex digits of `sum`.
  [[nodiscard]] std::string hex() const;
  friend bool operator==(const key_digest&, const key_digest&) = default;

  MSGPACK_DEFINE(count, sum)
};

} // namespace celer::preprocess
