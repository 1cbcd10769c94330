#include "spill_db.hpp"

#include "names.hpp"
#include "rocksdb_env.hpp"
#include "rocksdb_keys.hpp"
#include "spill_file.hpp"

#include <celer/store/checksum.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <vector>

namespace celer::store {

namespace {

// Keys: 'r' + id (16 bytes) for the record; in the earlier layout, 'c' + id + chunk index
// (4 bytes, big-endian) for the bytes, so that an object's chunks sorted together.
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

// A record: id, size, checksum, lead, durable, owner, job, then where the bytes are. The
// earlier layout's records end before that last byte (their bytes are chunks in RocksDB).
constexpr std::size_t legacy_record_bytes = 16 + 8 + 8 + 4 + 1 + 16 + 16;
constexpr std::size_t record_bytes = legacy_record_bytes + 1;
constexpr char in_file = 1;

std::string encode(const disk_record& r) {
  std::string v;
  v.reserve(record_bytes);
  put_id(v, r.id);
  put_u64(v, r.size);
  put_u64(v, r.checksum);
  for (int i = 3; i >= 0; --i) v.push_back(static_cast<char>(r.lead >> (8 * i)));
  v.push_back(r.durable ? 1 : 0);
  put_id(v, r.owner);
  put_id(v, r.job);
  v.push_back(in_file);
  return v;
}

struct decoded {
  disk_record rec;
  bool legacy = false;  // bytes in RocksDB chunks, not in a file
};

std::optional<decoded> decode(const rocksdb::Slice& v) {
  const bool legacy = v.size() == legacy_record_bytes;
  if (!legacy && (v.size() != record_bytes || v[legacy_record_bytes] != in_file)) {
    return std::nullopt;
  }
  const char* p = v.data();
  decoded d;
  d.legacy = legacy;
  d.rec.id = get_id(p);
  d.rec.size = get_u64(p + 16);
  d.rec.checksum = get_u64(p + 24);
  d.rec.lead = static_cast<std::uint32_t>(get_u64(p + 32) >> 32);
  d.rec.durable = p[36] != 0;
  d.rec.owner = get_id(p + 37);
  d.rec.job = get_id(p + 53);
  return d;
}

} // namespace

spill_db::spill_db(std::string dir, rocksdb::DB* db, int files_fd)
  : dir_(std::move(dir)), db_(db), files_fd_(files_fd) {
  rocksdb_opened();
}

spill_db::~spill_db() {
  (void)::close(files_fd_);
  db_.reset();
  rocksdb_closed();
}

std::string spill_db::file_path(const std::string& dir, const unique_id& id) {
  return (std::filesystem::path(dir) / "files" / hex(id)).string();
}

expected<std::unique_ptr<spill_db>> spill_db::open(
  const std::string& dir, const std::function<void(const disk_record&)>& found) {
  rocksdb::Options options;
  options.create_if_missing = true;
  // The index holds small records; the blob-file settings are for the earlier layout's
  // chunks, still read from directories it wrote.
  options.enable_blob_files = true;
  options.min_blob_size = 4096;
  options.enable_blob_garbage_collection = true;
  options.max_background_jobs = 4;
  rocksdb::DB* raw = nullptr;
  auto s = rocksdb::DB::Open(options, dir, &raw);
  if (!s.ok()) return from(s, "opening the object store's disk tier at " + dir);
  std::unique_ptr<rocksdb::DB> db(raw);
  const auto files = std::filesystem::path(dir) / "files";
  std::error_code ec;
  std::filesystem::create_directories(files, ec);
  const int files_fd = ec ? -1 : ::open(files.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (files_fd < 0) {
    return error(error_code::unavailable, "opening the object store's disk tier at " + dir +
                                            ": cannot open " + files.string() + " (" +
                                            (ec ? ec.message() : std::strerror(errno)) + ")");
  }
  std::unique_ptr<spill_db> out(new spill_db(dir, db.release(), files_fd));
  // Spilled copies of the last run are scratch: their owners are gone with that run.
  std::vector<unique_id> stale;
  std::unordered_set<std::string> kept;  // names of the durable objects' files
  std::unique_ptr<rocksdb::Iterator> it(out->db_->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek("r"); it->Valid() && it->key().starts_with("r"); it->Next()) {
    auto d = decode(it->value());
    if (!d) continue;
    if (d->legacy) out->legacy_.insert(d->rec.id);
    const auto name = hex(d->rec.id);
    struct stat st {};
    if (d->rec.durable &&
        (d->legacy || ::fstatat(files_fd, name.c_str(), &st, 0) == 0 || errno != ENOENT)) {
      // A file that is there but damaged is found, and reported when read.
      kept.insert(name);
      found(d->rec);
    } else {
      stale.push_back(d->rec.id);
    }
  }
  it.reset();
  for (const auto& id : stale) out->erase(id);
  // Files no durable record names: spilled copies (their records were never logged), and
  // objects whose writer stopped before their record was written.
  for (std::filesystem::directory_iterator f(files, ec), end; !ec && f != end; f.increment(ec)) {
    const auto name = f->path().filename().string();
    if (!kept.contains(name)) (void)::unlinkat(files_fd, name.c_str(), 0);
  }
  return out;
}

expected<void> spill_db::write(disk_record& rec, const std::byte* data) {
  const auto name = hex(rec.id);
  auto failed = [&](const error& e) -> error {
    return error(e.code(), "writing object " + name + " (" + std::to_string(rec.size) +
                             " bytes) to " + dir_ + ": " + e.message());
  };
  auto sum = write_object_file(files_fd_, name, data, rec.size, /*sync=*/rec.durable);
  if (!sum) return failed(sum.error());
  // A durable file's name must be on disk before a record that names it.
  if (rec.durable && ::fsync(files_fd_) != 0) {
    const int err = errno;
    (void)::unlinkat(files_fd_, name.c_str(), 0);
    const bool full = err == ENOSPC || err == EDQUOT;
    return failed(error(full ? error_code::resource_exhausted : error_code::unavailable,
                        "syncing the files directory: " +
                          (full ? "the disk is full (" + std::string(std::strerror(err)) + ")"
                                : std::string(std::strerror(err)))));
  }
  rec.checksum = *sum;
  rocksdb::WriteOptions wo;
  // A spilled copy's record need not survive a crash (nor its owner); a durable one's is
  // logged and synced.
  wo.disableWAL = !rec.durable;
  wo.sync = rec.durable;
  if (auto s = db_->Put(wo, record_key(rec.id), encode(rec)); !s.ok()) {
    (void)::unlinkat(files_fd_, name.c_str(), 0);
    return from(s, "writing the record of object " + name + " to " + dir_);
  }
  legacy_.erase(rec.id);
  return {};
}

expected<void> spill_db::read(const disk_record& rec, std::byte* out) {
  if (legacy_.contains(rec.id)) return read_legacy(rec, out);
  return read_object_file(files_fd_, hex(rec.id), out, rec.size, rec.checksum,
                          "object " + hex(rec.id));
}

expected<void> spill_db::read_legacy(const disk_record& rec, std::byte* out) {
  running_checksum sum;
  const auto chunks =
    static_cast<std::uint32_t>((rec.size + legacy_chunk_bytes - 1) / legacy_chunk_bytes);
  rocksdb::PinnableSlice value;
  for (std::uint32_t i = 0; i < chunks; ++i) {
    const std::size_t off = std::size_t{i} * legacy_chunk_bytes;
    const std::size_t n = std::min<std::size_t>(legacy_chunk_bytes, rec.size - off);
    value.Reset();
    auto s = db_->Get(rocksdb::ReadOptions(), db_->DefaultColumnFamily(), chunk_key(rec.id, i),
                      &value);
    if (!s.ok() || value.size() != n) {
      return error(error_code::data_loss,
                   "object " + hex(rec.id) + ": chunk " + std::to_string(i) +
                     " of its copy on disk is " +
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
  // The record first: a crash between the two leaves a file no record names, which the
  // next open deletes.
  rocksdb::WriteOptions wo;
  (void)db_->Delete(wo, record_key(id));
  if (legacy_.erase(id) > 0) {
    (void)db_->DeleteRange(wo, db_->DefaultColumnFamily(), chunk_key(id, 0),
                           chunk_key(id, 0xffffffffu));
  }
  (void)::unlinkat(files_fd_, hex(id).c_str(), 0);
}

} // namespace celer::store
