#pragma once
// A node-local database of blobs by key, for bulk bytes that must outlive the process that
// writes them: the checkpoint writers' fast tier (actors/checkpoint). Unlike table_db, a
// write need not reach the disk before it returns: `apply(writes, /*sync=*/false)` stages a
// batch, and the next `apply(..., /*sync=*/true)` makes it and every batch before it durable
// with one sync (RocksDB's write-ahead log is one sequential file, so syncing it covers
// everything logged before). A checkpoint thus costs one sync, not one per chunk.
// Values of 4 KiB and more live in RocksDB's blob files, so compactions move keys, not bytes;
// the space of erased blobs comes back as compactions run, not at once.
//
//   auto db = store::open_blob_db(dir);                              // expected<unique_ptr>
//   (void)(*db)->apply({{"chunk", key, bytes}}, /*sync=*/false);    // staged
//   (void)(*db)->apply({{"manifest", id, text}}, /*sync=*/true);    // both durable now
//   auto v = (*db)->get("chunk", key);                               // expected<optional<string>>
//
// Threads: one writer at a time; reads may run beside it. A read-only handle
// (blob_db_options::read_only) takes no lock, so it opens while another handle (of this
// process or another) writes; it sees what was logged when it opened.

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
};

class blob_db {
public:
  virtual ~blob_db() = default;
  /// Applies `writes` atomically (all or none). With `sync`, they and every earlier batch
  /// are on disk when it returns; without, a crash of the machine (not of the process) may
  /// lose them. A full disk is resource_exhausted with the directory; another storage
  /// failure unavailable.
  [[nodiscard]] virtual expected<void> apply(const std::vector<blob_write>& writes,
                                             bool sync) = 0;
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
