#include <celer/store/blob_db.hpp>

#include "rocksdb_env.hpp"
#include "rocksdb_keys.hpp"

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include <filesystem>

namespace celer::store {
namespace {

class rocksdb_blob_db final : public blob_db {
public:
  rocksdb_blob_db(std::string dir, rocksdb::DB* db, const blob_db_options& options)
    : dir_(std::move(dir)), db_(db), read_only_(options.read_only) {
    reads_.verify_checksums = options.verify_reads;
    rocksdb_opened();
  }
  ~rocksdb_blob_db() override {
    db_.reset();
    rocksdb_closed();
  }
  rocksdb_blob_db(const rocksdb_blob_db&) = delete;
  rocksdb_blob_db& operator=(const rocksdb_blob_db&) = delete;

  expected<void> apply(const std::vector<blob_write>& writes, bool sync) override {
    rocksdb::WriteOptions wo;
    wo.sync = sync;
    return write(writes, wo);
  }

  expected<void> stage(const std::vector<blob_write>& writes) override {
    rocksdb::WriteOptions wo;
    wo.disableWAL = true;
    return write(writes, wo);
  }

  expected<void> flush() override {
    if (auto ok = writable(); !ok) return ok;
    rocksdb::FlushOptions fo;
    fo.wait = true;
    auto s = db_->Flush(fo);
    if (!s.ok()) return from(s, "flushing " + dir_);
    return {};
  }

  expected<std::optional<std::string>> get(std::string_view space,
                                           std::string_view key) const override {
    std::string value;
    const auto k = disk_key(space, key);
    rocksdb::Status s;
    if (read_only_) {
      // RocksDB 7.8's read-only Get answers NotFound for a value kept in a blob file once
      // its table has been compacted; an iterator resolves it (store's blob_db_test pins
      // this down).
      std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(reads_));
      it->Seek(k);
      if (it->Valid() && it->key() == k) {
        value.assign(it->value().data(), it->value().size());
      } else if (it->status().ok()) {
        return std::optional<std::string>();
      }
      s = it->status();
    } else {
      s = db_->Get(reads_, k, &value);
    }
    if (s.IsNotFound()) return std::optional<std::string>();
    if (!s.ok()) {
      return error(error_code::data_loss, "reading " + std::string(space) + "/" +
                                            std::string(key) + " from " + dir_ + ": " +
                                            s.ToString());
    }
    return std::optional<std::string>(std::move(value));
  }

  expected<void> scan(std::string_view space,
                      const std::function<void(std::string_view, std::string_view)>& row)
    const override {
    const std::string prefix = disk_key(space, {});
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(reads_));
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      const auto k = it->key();
      const auto v = it->value();
      row(std::string_view(k.data() + prefix.size(), k.size() - prefix.size()),
          std::string_view(v.data(), v.size()));
    }
    if (!it->status().ok()) {
      return error(error_code::data_loss, "reading space " + std::string(space) + " of " +
                                            dir_ + ": " + it->status().ToString());
    }
    return {};
  }

  const std::string& dir() const noexcept override { return dir_; }

private:
  expected<void> writable() const {
    if (!read_only_) return {};
    return error(error_code::failed_precondition,
                 "the blob database at " + dir_ + " was opened read-only");
  }

  expected<void> write(const std::vector<blob_write>& writes, const rocksdb::WriteOptions& wo) {
    if (auto ok = writable(); !ok) return ok;
    rocksdb::WriteBatch batch;
    for (const auto& w : writes) {
      const auto k = disk_key(w.space, w.key);
      auto s = w.erase ? batch.Delete(k)
                       : batch.Put(k, rocksdb::Slice(w.value.data(), w.value.size()));
      if (!s.ok()) return from(s, "preparing a write to " + dir_);
    }
    auto s = db_->Write(wo, &batch);
    if (!s.ok()) {
      return from(s, "writing " + std::to_string(writes.size()) + " blob(s) to " + dir_);
    }
    return {};
  }

  std::string dir_;
  std::unique_ptr<rocksdb::DB> db_;
  bool read_only_;
  rocksdb::ReadOptions reads_;
};

} // namespace

expected<std::unique_ptr<blob_db>> open_blob_db(const std::string& dir,
                                                const blob_db_options& options) {
  rocksdb::Options o;
  o.create_if_missing = !options.read_only;
  // Blobs go to blob files, so compaction moves only the small keys (as the spill tier).
  o.enable_blob_files = true;
  o.min_blob_size = 4096;
  o.enable_blob_garbage_collection = true;
  // A writer persists in the background beside training: two jobs keep flushes and
  // compactions going without taking the machine.
  o.max_background_jobs = 2;
  o.keep_log_file_num = 4;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s;
  if (options.read_only) {
    std::error_code ec;
    if (!std::filesystem::exists(std::filesystem::path(dir) / "CURRENT", ec)) {
      return error(error_code::not_found, "no blob database at " + dir);
    }
    s = rocksdb::DB::OpenForReadOnly(o, dir, &raw, /*error_if_wal_file_exists=*/false);
  } else {
    // RocksDB makes the last folder only; a writer's whole path is made here.
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      const bool full = ec == std::errc::no_space_on_device;
      const bool denied = ec == std::errc::permission_denied ||
                          ec == std::errc::operation_not_permitted ||
                          ec == std::errc::read_only_file_system;
      return error(full     ? error_code::resource_exhausted
                   : denied ? error_code::permission_denied
                            : error_code::unavailable,
                   "creating the blob database's folder " + dir + ": " + ec.message());
    }
    s = rocksdb::DB::Open(o, dir, &raw);
  }
  if (!s.ok()) return from(s, "opening the blob database at " + dir);
  return std::unique_ptr<blob_db>(new rocksdb_blob_db(dir, raw, options));
}

} // namespace celer::store
