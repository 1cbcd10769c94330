#pragma once
// The node's disk tier: spilled objects (scratch, dropped when the node starts again) and
// durable objects (found again after a restart). Each object's bytes are one plain file,
// `files/<id in hex>` under the tier's directory, written sequentially and read back
// straight into shared memory (spill_file); a RocksDB database in the directory is the
// index: a record per object (size, checksum, owner, job, durable), written after its file,
// so a record present means the file is complete. Reads check the checksum, so a damaged
// copy is reported, never returned.
//
// What is synced: a durable object's file (fdatasync), then the directory that names it,
// then its record (through RocksDB's synced write-ahead log): one sync of each per object.
// A spilled copy is not synced at all: it is scratch that no restart keeps, its space is
// reserved before it is written (so a full disk fails the spill while the object is still
// in memory), and the kernel writes it back like any file. A crash between a file and its
// record leaves a file no record names; opening the tier deletes it.
//
// Directories written by earlier versions kept each object's bytes in RocksDB itself, in
// 8 MiB chunks after the record; their durable objects are still read (and freed) that way.

#include <celer/error.hpp>
#include <celer/ids.hpp>
#include <celer/store/disk_record.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_set>

namespace rocksdb {
class DB;
}

namespace celer::store {

class spill_db {
public:
  /// Bytes per chunk of the earlier layout (objects kept inside RocksDB).
  static constexpr std::size_t legacy_chunk_bytes = std::size_t{8} << 20;

  /// Opens (creating) the tier in `dir`. Spilled leftovers of an earlier run are deleted,
  /// and so are files no durable record names (a crash before their record was written);
  /// durable objects are kept and passed to `found`, except those whose file is gone (a
  /// free whose record deletion had not reached the disk), whose records are deleted.
  [[nodiscard]] static expected<std::unique_ptr<spill_db>> open(
    const std::string& dir, const std::function<void(const disk_record&)>& found);
  ~spill_db();
  spill_db(const spill_db&) = delete;
  spill_db& operator=(const spill_db&) = delete;

  /// Writes `rec.size` bytes at `data` under `rec.id` and fills in `rec.checksum`. Durable
  /// objects are synced to disk before it returns. A full disk is resource_exhausted, and
  /// leaves nothing of the object on disk.
  [[nodiscard]] expected<void> write(disk_record& rec, const std::byte* data);
  /// Reads the object into `out` (rec.size bytes); data_loss when its file is missing,
  /// short or unreadable, or the checksum does not match.
  [[nodiscard]] expected<void> read(const disk_record& rec, std::byte* out);
  /// Deletes the object's record, then its file (absent ones are no error).
  void erase(const unique_id& id);
  [[nodiscard]] const std::string& dir() const noexcept { return dir_; }
  /// Where the object's file is (or would be) in the tier at `dir`.
  [[nodiscard]] static std::string file_path(const std::string& dir, const unique_id& id);

private:
  spill_db(std::string dir, rocksdb::DB* db, int files_fd);
  [[nodiscard]] expected<void> read_legacy(const disk_record& rec, std::byte* out);

  std::string dir_;
  std::unique_ptr<rocksdb::DB> db_;
  /// The open `files/` directory: files are made, read and removed relative to it.
  int files_fd_ = -1;
  /// Durable objects of the earlier layout (bytes in RocksDB chunks).
  std::unordered_set<unique_id> legacy_;
};

} // namespace celer::store
