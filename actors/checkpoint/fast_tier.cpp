// The fast tier: a RocksDB on this node, through the store's blob_db. Spaces:
//   chunk/<key>     a chunk's bytes
//   index/<key>     its size in decimal (small, so the writer lists chunks without reading
//                   them: blob values would be read by a scan of "chunk")
//   manifest/<id>   a manifest's text (the id in 20 digits)
// Chunks are staged without RocksDB's log (written once, to its blob files, when flushed);
// a checkpoint's commit flushes them, then writes its manifest through the synced log.
#include "tier.hpp"

#include <celer/store/blob_db.hpp>

#include <charconv>
#include <unordered_set>

#include "manifest.hpp"

namespace celer::checkpoint::detail {
namespace {

class fast_tier final : public tier {
public:
  explicit fast_tier(std::unique_ptr<store::blob_db> db) : db_(std::move(db)) {}

  expected<void> load_index() {
    return db_->scan("index", [&](std::string_view key, std::string_view) {
      index_.emplace(key);
    });
  }

  std::string_view kind() const noexcept override { return "fast"; }
  const std::string& dir() const noexcept override { return db_->dir(); }

  bool has_chunk(const std::string& key) const override { return index_.contains(key); }

  expected<std::uint64_t> put_chunks(const std::vector<chunk_write>& chunks) override {
    if (chunks.empty()) return std::uint64_t{0};
    std::vector<std::string> sizes;
    sizes.reserve(chunks.size());
    std::vector<store::blob_write> writes;
    writes.reserve(2 * chunks.size());
    std::uint64_t bytes = 0;
    for (const auto& c : chunks) {
      sizes.push_back(std::to_string(c.bytes.size()));
      writes.push_back({"chunk", c.key, c.bytes});
      writes.push_back({"index", c.key, sizes.back()});
      bytes += c.bytes.size();
    }
    if (auto ok = db_->stage(writes); !ok) return ok.error();
    for (const auto& c : chunks) index_.insert(c.key);
    return bytes;
  }

  expected<void> put_manifest(std::uint64_t id, const std::string& text) override {
    // The chunks on disk first (one flush, synced), then the manifest that names them.
    if (auto ok = db_->flush(); !ok) return ok;
    return db_->apply({{"manifest", manifest_name(id), text}}, /*sync=*/true);
  }

  expected<void> remove(const std::vector<std::uint64_t>& manifests,
                        const std::vector<std::string>& chunks) override {
    std::vector<store::blob_write> writes;
    for (auto id : manifests) writes.push_back({"manifest", manifest_name(id), {}, true});
    for (const auto& k : chunks) {
      writes.push_back({"chunk", k, {}, true});
      writes.push_back({"index", k, {}, true});
    }
    if (writes.empty()) return {};
    // One atomic batch: no manifest is ever left without its chunks. Not synced: a lost
    // removal is redone by the next one.
    if (auto ok = db_->apply(writes, /*sync=*/false); !ok) return ok.error();
    for (const auto& k : chunks) index_.erase(k);
    return {};
  }

  std::vector<std::string> chunk_keys() const override {
    return std::vector<std::string>(index_.begin(), index_.end());
  }

  expected<std::optional<std::string>> get_chunk(const std::string& key) const override {
    return db_->get("chunk", key);
  }

  expected<std::vector<std::uint64_t>> manifest_ids() const override {
    std::vector<std::uint64_t> ids;
    auto ok = db_->scan("manifest", [&](std::string_view key, std::string_view) {
      std::uint64_t id = 0;
      auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
      if (ec == std::errc() && end == key.data() + key.size()) ids.push_back(id);
    });
    if (!ok) return ok.error();
    return ids;  // the keys sort as the ids (20 digits)
  }

  expected<std::optional<std::string>> get_manifest(std::uint64_t id) const override {
    return db_->get("manifest", manifest_name(id));
  }

private:
  std::unique_ptr<store::blob_db> db_;
  std::unordered_set<std::string> index_;
};

} // namespace

expected<std::unique_ptr<tier>> open_fast_tier(const std::string& dir, bool read_only) {
  // Every chunk read is checked against its XXH3-128 name, every manifest against its
  // checksum line: RocksDB's own check of each read would only repeat that, slowly.
  auto db = store::open_blob_db(dir, {.read_only = read_only, .verify_reads = false});
  if (!db) return db.error();
  auto t = std::make_unique<fast_tier>(std::move(*db));
  if (!read_only) {
    if (auto ok = t->load_index(); !ok) return ok.error();
  }
  return std::unique_ptr<tier>(std::move(t));
}

} // namespace celer::checkpoint::detail
