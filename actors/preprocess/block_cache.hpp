#pragma once
// The stage cache of celer-preprocess's workers (executor.hpp): a block's items as they leave
// a pass, or its output records, in a file named by a content hash of the split's bytes, the
// stages that made it and the fitted states they used. Internal to actors/preprocess.
//
// An entry is one file, `<dir>/<16 hex digits>.<kind>`: "CELERBC1", a little-endian u64
// size, a u32 CRC-32 of the payload, 4 reserved bytes, then the payload: a little-endian u64
// count of the items read from the input to make it, then msgpack of the items (kind
// "items") or a record file's bytes (kind "rec"). Written to a unique `.part` name, fsynced and renamed,
// so readers see whole entries or none; an entry whose size or CRC does not match is a
// miss (and is removed), never data.
#include <celer/actors/preprocess/item.hpp>
#include <celer/error.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace celer::preprocess::detail {

class block_cache {
public:
  /// An empty dir: every lookup misses and stores do nothing.
  explicit block_cache(std::string dir) : dir_(std::move(dir)) {}
  [[nodiscard]] bool enabled() const noexcept { return !dir_.empty(); }

  /// An entry: how many items were read from the input to make it, and the items (or the
  /// record file's bytes).
  template <class T>
  struct entry {
    std::uint64_t items_read = 0;
    T value;
  };
  [[nodiscard]] std::optional<entry<std::vector<item>>> load_items(std::uint64_t key) const;
  [[nodiscard]] std::optional<entry<std::string>> load_records(std::uint64_t key) const;
  /// Failures to store (a full disk) are reported but lose nothing: the entry is not made.
  [[nodiscard]] expected<void> store_items(std::uint64_t key, std::uint64_t items_read,
                                           const std::vector<item>& items) const;
  [[nodiscard]] expected<void> store_records(std::uint64_t key, std::uint64_t items_read,
                                             std::string_view bytes) const;

private:
  [[nodiscard]] std::string path(std::uint64_t key, const char* kind) const;
  [[nodiscard]] std::optional<std::string> load(const std::string& path) const;
  [[nodiscard]] expected<void> store(const std::string& path, std::string_view payload) const;
  std::string dir_;
};

} // namespace celer::preprocess::detail
