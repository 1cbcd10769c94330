#pragma once
// The node's disk tier: a RocksDB database holding spilled objects (scratch, dropped when the
// node starts again) and durable objects (written with a synced write-ahead log, found again
// after a restart). An object is stored as fixed-size chunks plus a record of its size and
// checksum, written last: a record present means the chunks are complete. Reads check the
// checksum, so a damaged copy is reported, never returned.

#include <celer/error.hpp>
#include <celer/ids.hpp>
#include <celer/store/disk_record.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace rocksdb {
class DB;
}

namespace celer::store {

class spill_db {
public:
  /// Bytes per chunk: large enough that per-key overhead vanishes, small enough that a
  /// chunk in flight costs little memory.
  static constexpr std::size_t chunk_bytes = std::size_t{8} << 20;

  /// Opens (creating) the database in `dir`. Spilled leftovers of an earlier run are
  /// deleted; durable objects are kept and passed to `found`.
  [[nodiscard]] static expected<std::unique_ptr<spill_db>> open(
    const std::string& dir, const std::function<void(const disk_record&)>& found);
  ~spill_db();
  spill_db(const spill_db&) = delete;
  spill_db& operator=(const spill_db&) = delete;

  /// Writes `size` bytes at `data` under `rec.id` and fills in `rec.checksum`. Durable
  /// records are synced to disk before it returns. A full disk is resource_exhausted.
  [[nodiscard]] expected<void> write(disk_record& rec, const std::byte* data);
  /// Reads the object into `out` (rec.size bytes); data_loss when a chunk is missing or the
  /// checksum does not match.
  [[nodiscard]] expected<void> read(const disk_record& rec, std::byte* out);
  /// Deletes the object's record and chunks (absent ones are no error).
  void erase(const unique_id& id);
  [[nodiscard]] const std::string& dir() const noexcept { return dir_; }

private:
  spill_db(std::string dir, rocksdb::DB* db);
  std::string dir_;
  std::unique_ptr<rocksdb::DB> db_;
};

} // namespace celer::store
