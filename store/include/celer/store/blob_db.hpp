#pragma once
// A node-local database of blobs by key, for bulk bytes that must outlive the process that
// writes them: the checkpoint writers' fast tier (actors/checkpoint). Bulk writes go through
// `stage`, which skips the write-ahead log, and one `flush` makes every staged blob durable
// (written once, to RocksDB's blob files, and synced), so a checkpoint costs one flush, not
// a sync per chunk, and its bytes are not written twice (log, then table). Small records
// that must be durable at once go through `apply(..., /*sync=*/true)`.
// Values of 4 KiB and more live in blob files, so compactions move keys, not bytes; the
// space of erased blobs comes back as compactions run, not at once.
//
//   auto db = store::open_blob_db(dir);                              // expected<unique_ptr>
//   (void)(*db)->stage({{"chunk", key, bytes}});                     // in memory
//   (void)(*db)->flush();                                            // on disk, synced
//   (void)(*db)->apply({{"manifest", id, text}}, /*sync=*/true);    // durable now
//   auto v = (*db)->get("chunk", key);                               // expected<optional<string>>
//
// Threads: one writer at a time; reads may run beside it. A read-only handle
// (blob_db_options::read_only) takes no lock, so it opens while another handle (of this
// process or another) writes; it sees what was flushed or logged when it opened.

#include <celer/error.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace celer::store {

/// One change: a blob put under (space, key), or with `erase`, removed. `value` is read
/// during `apply` only; it need not outlive the call.
struct blob_write {
  std::string space;
  std::string key;
  std::string_view value;
  bool erase = false;
};

struct blob_db_options {
  /// Open without the lock and refuse writes (failed_precondition).
  bool read_only = false;
  /// Check RocksDB's own checksum of each value read. A caller that checks what it reads
  /// anyway (the checkpoint tiers hash every chunk) turns it off: it is most of the cost
  /// of reading a large value from the page cache.
  bool verify_reads = true;
};

class blob_db {
public:
  virtual ~blob_db() = default;
  /// Applies `writes` atomically (all or none), through the write-ahead log. With `sync`,
  /// they and every earlier logged batch are on disk when it returns; without, a crash of
  /// the machine (not of the process) may lose them. A full disk is resource_exhausted
  /// with the directory; another storage failure unavailable.
  [[nodiscard]] virtual expected<void> apply(const std::vector<blob_write>& writes,
                                             bool sync) = 0;
  /// Applies `writes` atomically without the write-ahead log: readers of this handle see
  /// them at once, but they reach the disk only with the next `flush` (a crash of the
  /// process before it loses them). Errors as `apply`.
  [[nodiscard]] virtual expected<void> stage(const std::vector<blob_write>& writes) = 0;
  /// Writes everything staged (and logged) into the database's files and syncs them.
  [[nodiscard]] virtual expected<void> flush() = 0;
  /// The blob under (space, key); nullopt when there is none; data_loss when it cannot
  /// be read.
  [[nodiscard]] virtual expected<std::optional<std::string>> get(std::string_view space,
                                                                 std::string_view key) const = 0;
  /// Calls `row` with each blob of `space`, in key order. data_loss when the database
  /// cannot be read.
  [[nodiscard]] virtual expected<void> scan(
    std::string_view space,
    const std::function<void(std::string_view key, std::string_view value)>& row) const = 0;
  /// The directory it lives in (for messages).
  [[nodiscard]] virtual const std::string& dir() const noexcept = 0;
};

/// Opens (creating, unless read-only) the blob database in directory `dir`. unavailable
/// (with RocksDB's reason) when it cannot: another handle holds it for writing, or the disk
/// refuses; not_found for a read-only open of a directory that holds no database.
[[nodiscard]] expected<std::unique_ptr<blob_db>> open_blob_db(const std::string& dir,
                                                              const blob_db_options& options = {});

} // namespace celer::store
