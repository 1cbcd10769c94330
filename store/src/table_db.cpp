#include <celer/store/table_db.hpp>

#include "rocksdb_env.hpp"
#include "rocksdb_keys.hpp"

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

namespace celer::store {
namespace {

class rocksdb_table_db final : public table_db {
public:
  rocksdb_table_db(std::string dir, rocksdb::DB* db) : dir_(std::move(dir)), db_(db) {
    rocksdb_opened();
  }
  ~rocksdb_table_db() override {
    db_.reset();
    rocksdb_closed();
  }
  rocksdb_table_db(const rocksdb_table_db&) = delete;
  rocksdb_table_db& operator=(const rocksdb_table_db&) = delete;

  expected<void> apply(const std::vector<table_write>& writes) override {
    rocksdb::WriteBatch batch;
    for (const auto& w : writes) {
      const auto k = disk_key(w.table, w.key);
      auto s = w.erase ? batch.Delete(k) : batch.Put(k, w.value);
      if (!s.ok()) return from(s, "preparing a write to " + dir_);
    }
    rocksdb::WriteOptions wo;
    wo.sync = true;  // on disk before the change is acted on: a crash after it keeps it
    auto s = db_->Write(wo, &batch);
    if (!s.ok()) return from(s, "writing " + std::to_string(writes.size()) + " row(s) to " + dir_);
    return {};
  }

  expected<void> scan(std::string_view table,
                      const std::function<void(std::string_view, std::string_view)>& row)
    const override {
    const std::string prefix = disk_key(table, {});
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      const auto k = it->key();
      const auto v = it->value();
      row(std::string_view(k.data() + prefix.size(), k.size() - prefix.size()),
          std::string_view(v.data(), v.size()));
    }
    if (!it->status().ok()) {
      return error(error_code::data_loss,
                   "reading table " + std::string(table) + " of " + dir_ + ": " +
                     it->status().ToString());
    }
    return {};
  }

private:
  std::string dir_;
  std::unique_ptr<rocksdb::DB> db_;
};

} // namespace

expected<std::unique_ptr<table_db>> open_table_db(const std::string& dir) {
  rocksdb::Options options;
  options.create_if_missing = true;
  // Small rows, rarely written: one background job is plenty.
  options.max_background_jobs = 1;
  options.keep_log_file_num = 4;
  rocksdb::DB* raw = nullptr;
  auto s = rocksdb::DB::Open(options, dir, &raw);
  if (!s.ok()) return from(s, "opening the table database at " + dir);
  return std::unique_ptr<table_db>(new rocksdb_table_db(dir, raw));
}

} // namespace celer::store
