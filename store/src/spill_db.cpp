#include "spill_db.hpp"

#include "names.hpp"
#include "rocksdb_env.hpp"

#include <celer/store/checksum.hpp>

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

namespace celer::store {

namespace {

// Keys: 'r' + id (16 bytes) for the record, 'c' + id + chunk index (4 bytes, big-endian)
// for the bytes, so that an object's chunks sort together after its record.
void put_u64(std::string& s, std::uint64_t v) {
  for (int i = 7; i >= 0; --i) s.push_back(static_cast<char>(v >> (8 * i)));
}
std::uint64_t get_u64(const char* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}
void put_id(std::string& s, const unique_id& id) {
  put_u64(s, id.hi);
  put_u64(s, id.lo);
}
unique_id get_id(const char* p) { return unique_id{get_u64(p), get_u64(p + 8)}; }

std::string record_key(const unique_id& id) {
  std::string k(1, 'r');
  put_id(k, id);
  return k;
}
std::string chunk_key(const unique_id& id, std::uint32_t index) {
  std::string k(1, 'c');
  put_id(k, id);
  for (int i = 3; i >= 0; --i) k.push_back(static_cast<char>(index >> (8 * i)));
  return k;
}

constexpr std::size_t record_bytes = 16 + 8 + 8 + 4 + 1 + 16 + 16;

std::string encode(const disk_record& r) {
  std::string v;
  put_id(v, r.id);
  put_u64(v, r.size);
  put_u64(v, r.checksum);
  for (int i = 3; i >= 0; --i) v.push_back(static_cast<char>(r.lead >> (8 * i)));
  v.push_back(r.durable ? 1 : 0);
  put_id(v, r.owner);
  put_id(v, r.job);
  return v;
}

std::optional<disk_record> decode(const rocksdb::Slice& v) {
  if (v.size() != record_bytes) return std::nullopt;
  const char* p = v.data();
  disk_record r;
  r.id = get_id(p);
  r.size = get_u64(p + 16);
  r.checksum = get_u64(p + 24);
  r.lead = static_cast<std::uint32_t>(get_u64(p + 32) >> 32);
  r.durable = p[36] != 0;
  r.owner = get_id(p + 37);
  r.job = get_id(p + 53);
  return r;
}

error from(const rocksdb::Status& s, const std::string& what) {
  const bool full = s.IsNoSpace() ||
                    s.subcode() == rocksdb::Status::SubCode::kNoSpace;
  return error(full ? error_code::resource_exhausted : error_code::unavailable,
               what + ": " + (full ? "the disk is full (" + s.ToString() + ")" : s.ToString()));
}

} // namespace

spill_db::spill_db(std::string dir, rocksdb::DB* db) : dir_(std::move(dir)), db_(db) {
  rocksdb_opened();
}

spill_db::~spill_db() {
  db_.reset();
  rocksdb_closed();
}

expected<std::unique_ptr<spill_db>> spill_db::open(
  const std::string& dir, const std::function<void(const disk_record&)>& found) {
  rocksdb::Options options;
  options.create_if_missing = true;
  // Object bytes go to blob files, so compaction moves only the small keys, not gigabytes.
  options.enable_blob_files = true;
  options.min_blob_size = 4096;
  options.enable_blob_garbage_collection = true;
  options.max_background_jobs = 4;
  rocksdb::DB* raw = nullptr;
  auto s = rocksdb::DB::Open(options, dir, &raw);
  if (!s.ok()) return from(s, "opening the object store's disk tier at " + dir);
  std::unique_ptr<spill_db> out(new spill_db(dir, raw));
  // Spilled copies of the last run are scratch: their owners are gone with that run.
  std::vector<unique_id> stale;
  std::unique_ptr<rocksdb::Iterator> it(raw->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek("r"); it->Valid() && it->key().starts_with("r"); it->Next()) {
    auto rec = decode(it->value());
    if (!rec) continue;
    if (rec->durable) {
      found(*rec);
    } else {
      stale.push_back(rec->id);
    }
  }
  it.reset();
  for (const auto& id : stale) out->erase(id);
  return out;
}

expected<void> spill_db::write(disk_record& rec, const std::byte* data) {
  running_checksum sum;
  rocksdb::WriteOptions wo;
  // Spilled copies need not survive a crash (their owners do not): no log. Durable ones
  // are logged and the log synced with the last chunk.
  wo.disableWAL = !rec.durable;
  const auto chunks = static_cast<std::uint32_t>((rec.size + chunk_bytes - 1) / chunk_bytes);
  for (std::uint32_t i = 0; i < chunks; ++i) {
    const std::size_t off = std::size_t{i} * chunk_bytes;
    const std::size_t n = std::min<std::size_t>(chunk_bytes, rec.size - off);
    sum.update(data + off, n);
    auto s = db_->Put(wo, chunk_key(rec.id, i),
                      rocksdb::Slice(reinterpret_cast<const char*>(data + off), n));
    if (!s.ok()) {
      erase(rec.id);
      return from(s, "writing object " + hex(rec.id) + " (" + std::to_string(rec.size) +
                       " bytes) to " + dir_);
    }
  }
  rec.checksum = sum.digest();
  wo.sync = rec.durable;
  auto s = db_->Put(wo, record_key(rec.id), encode(rec));
  if (s.ok() && !rec.durable) {
    // A spill is written out now, not held in RocksDB's memory until a later flush: the
    // point is to free memory, and a full disk must show here, while the object is still
    // in memory to keep.
    rocksdb::FlushOptions fo;
    fo.wait = true;
    s = db_->Flush(fo);
  }
  if (!s.ok()) {
    erase(rec.id);
    return from(s, "writing object " + hex(rec.id) + " to " + dir_);
  }
  return {};
}

expected<void> spill_db::read(const disk_record& rec, std::byte* out) {
  running_checksum sum;
  const auto chunks = static_cast<std::uint32_t>((rec.size + chunk_bytes - 1) / chunk_bytes);
  rocksdb::PinnableSlice value;
  for (std::uint32_t i = 0; i < chunks; ++i) {
    const std::size_t off = std::size_t{i} * chunk_bytes;
    const std::size_t n = std::min<std::size_t>(chunk_bytes, rec.size - off);
    value.Reset();
    auto s = db_->Get(rocksdb::ReadOptions(), db_->DefaultColumnFamily(), chunk_key(rec.id, i),
                      &value);
    if (!s.ok() || value.size() != n) {
      return error(error_code::data_loss,
                   "object " + hex(rec.id) + ": chunk " + std::to_string(i) + " of its copy on disk is " +
                     (s.ok() ? "the wrong size" : "missing (" + s.ToString() + ")"));
    }
    std::memcpy(out + off, value.data(), n);
    sum.update(out + off, n);
  }
  if (sum.digest() != rec.checksum) {
    return error(error_code::data_loss,
                 "object " + hex(rec.id) + ": its copy on disk is corrupt (checksum mismatch)");
  }
  return {};
}

void spill_db::erase(const unique_id& id) {
  rocksdb::WriteOptions wo;
  std::string from_key = chunk_key(id, 0);
  std::string to_key = chunk_key(id, 0xffffffffu);
  (void)db_->DeleteRange(wo, db_->DefaultColumnFamily(), from_key, to_key);
  (void)db_->Delete(wo, record_key(id));
}

} // namespace celer::store
