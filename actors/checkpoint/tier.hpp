#pragma once
// The two places a checkpoint is kept, behind one interface: the fast tier, a RocksDB on the
// node (through <celer/store/blob_db.hpp>), and the archive, a directory of files. Both
// name chunks by their content hash and manifests by their id; actors/README.md ("On disk")
// gives the layouts.
//
// A writer's handle (read_only = false) holds the tier's lock (RocksDB's LOCK, or flock on
// the archive's LOCK file) and keeps an index of the chunks in memory; one thread uses it
// (the writer actor's). A read-only handle takes no lock and may read beside a writer.
#include <celer/error.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace celer::checkpoint::detail {

struct chunk_write {
  std::string key;
  std::string_view bytes;
};

class tier {
public:
  virtual ~tier() = default;
  /// "fast" or "archive".
  [[nodiscard]] virtual std::string_view kind() const noexcept = 0;
  [[nodiscard]] virtual const std::string& dir() const noexcept = 0;

  // Writers' handles only.
  /// Whether the tier holds chunk `key`.
  [[nodiscard]] virtual bool has_chunk(const std::string& key) const = 0;
  /// Stores the chunks (each under its key; not durable yet); returns the bytes written.
  [[nodiscard]] virtual expected<std::uint64_t> put_chunks(const std::vector<chunk_write>& chunks) = 0;
  /// Stores a manifest; it and every chunk stored before it are durable when this returns.
  [[nodiscard]] virtual expected<void> put_manifest(std::uint64_t id, const std::string& text) = 0;
  /// Removes the manifests, then the chunks.
  [[nodiscard]] virtual expected<void> remove(const std::vector<std::uint64_t>& manifests,
                                              const std::vector<std::string>& chunks) = 0;
  /// Every chunk the tier holds.
  [[nodiscard]] virtual std::vector<std::string> chunk_keys() const = 0;

  // Any handle.
  /// The chunk's bytes; nullopt when the tier has none; data_loss when it cannot be read.
  [[nodiscard]] virtual expected<std::optional<std::string>> get_chunk(const std::string& key) const = 0;
  /// The ids of the manifests the tier holds, ascending.
  [[nodiscard]] virtual expected<std::vector<std::uint64_t>> manifest_ids() const = 0;
  [[nodiscard]] virtual expected<std::optional<std::string>> get_manifest(std::uint64_t id) const = 0;
};

/// Opens a tier (creating its directory for a writer). A read-only open of a tier that does
/// not exist is not_found. A writer's open fails unavailable when another writer holds the
/// tier, permission_denied or resource_exhausted as the disk says, naming the path.
[[nodiscard]] expected<std::unique_ptr<tier>> open_fast_tier(const std::string& dir, bool read_only);
[[nodiscard]] expected<std::unique_ptr<tier>> open_archive_tier(const std::string& dir,
                                                                bool read_only);

} // namespace celer::checkpoint::detail
