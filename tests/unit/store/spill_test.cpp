// The object store's disk tier: objects spilled and durable ones, each in a file under
// files/ with its record in RocksDB; what survives a restart or a crash, and what a
// damaged, short or missing file, or a full disk, does.

#include "spill_db.hpp"
#include "store_test_support.hpp"

#include <celer/store/checksum.hpp>
#include <celer/store/object_store.hpp>

#include <catch2/catch.hpp>
#include <rocksdb/db.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

using namespace celer;
using namespace celer::store;
using namespace celer::store::testing;

namespace {

std::filesystem::path file_of(const temp_dir& dir, const unique_id& id) {
  return spill_db::file_path(dir.path.string(), id);
}

std::size_t files_in(const std::filesystem::path& tier) {
  std::size_t n = 0;
  for (const auto& f : std::filesystem::directory_iterator(tier / "files")) {
    (void)f;
    ++n;
  }
  return n;
}

/// Flips one byte of a file, as a failing disk would.
void flip_byte(const std::filesystem::path& file, std::size_t offset) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  REQUIRE(f);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  REQUIRE(f.get(c));
  f.seekp(static_cast<std::streamoff>(offset));
  f.put(static_cast<char>(c ^ 0x40));
  REQUIRE(f.flush());
}

/// A store of 4 MiB with three objects of 3 MiB put: id 1 (durable when asked), 2 and 3;
/// ids 1 and 2 left memory for disk.
std::vector<std::vector<std::byte>> fill_past_capacity(object_store& s, bool first_durable) {
  std::vector<std::vector<std::byte>> v{pattern(3 << 20, 7), pattern(3 << 20, 8),
                                        pattern(3 << 20, 9)};
  put(s, id_of(1), v[0], first_durable);
  put(s, id_of(2), v[1]);  // id 1 leaves memory (spilled, or already on disk)
  put(s, id_of(3), v[2]);  // id 2 spills
  return v;
}

} // namespace

TEST_CASE("durable objects are found again when the store reopens; spilled ones are not",
          "[store]") {
  temp_dir dir;
  std::vector<std::vector<std::byte>> v;
  {
    auto s = object_store::open({.capacity = 4 << 20, .dir = dir.path.string()});
    REQUIRE(s);
    v = fill_past_capacity(**s, /*first_durable=*/true);
    CHECK((*s)->stats().spilled_objects >= 1);
    CHECK(std::filesystem::exists(file_of(dir, id_of(1))));
    CHECK(std::filesystem::exists(file_of(dir, id_of(2))));
  }  // the node stops (or dies: durable writes were synced)
  auto s = object_store::open({.capacity = 4 << 20, .dir = dir.path.string()});
  REQUIRE(s);
  CHECK((*s)->contains(id_of(1)));
  CHECK_FALSE((*s)->contains(id_of(2)));
  CHECK_FALSE((*s)->contains(id_of(3)));
  CHECK(reads_back(**s, id_of(1), v[0]));
  CHECK((*s)->stats().durable_objects == 1);
  CHECK(files_in(dir.path) == 1);  // the spilled copy's file went with its record
}

TEST_CASE("a corrupted copy on disk is detected and never returned", "[store]") {
  temp_dir dir;
  {
    auto s = object_store::open({.capacity = 4 << 20, .dir = dir.path.string()});
    REQUIRE(s);
    put(**s, id_of(1), pattern(100000, 3), /*durable=*/true);
  }
  flip_byte(file_of(dir, id_of(1)), 50000);
  auto s = object_store::open({.capacity = 4 << 20, .dir = dir.path.string()});
  REQUIRE(s);
  auto at = (*s)->pin(id_of(1));
  REQUIRE_FALSE(at);
  CHECK(at.error().code() == error_code::data_loss);
  CHECK(at.error().message().find("checksum") != std::string::npos);
  CHECK((*s)->stats().bytes_in_memory == 0);
}

TEST_CASE("a damaged spilled copy is detected when it is restored", "[store]") {
  temp_dir dir;
  auto s = object_store::open({.capacity = 4 << 20, .dir = dir.path.string()});
  REQUIRE(s);
  const auto v = fill_past_capacity(**s, /*first_durable=*/false);
  REQUIRE((*s)->stats().objects_on_disk_only == 2);

  SECTION("a flipped byte fails the checksum") {
    flip_byte(file_of(dir, id_of(2)), (3 << 20) - 1);
    auto at = (*s)->pin(id_of(2));
    REQUIRE_FALSE(at);
    CHECK(at.error().code() == error_code::data_loss);
    CHECK(at.error().message().find("checksum mismatch") != std::string::npos);
  }
  SECTION("a file cut short (torn) is reported with its size") {
    std::filesystem::resize_file(file_of(dir, id_of(2)), 1 << 20);
    auto at = (*s)->pin(id_of(2));
    REQUIRE_FALSE(at);
    CHECK(at.error().code() == error_code::data_loss);
    CHECK(at.error().message().find("torn or truncated") != std::string::npos);
    CHECK(at.error().message().find(std::to_string(1 << 20)) != std::string::npos);
  }
  SECTION("a file whose space was reserved but whose tail was never written fails the checksum") {
    // What a crash mid-write leaves: the reserved length, zeros past what was written.
    const auto file = file_of(dir, id_of(2));
    std::filesystem::resize_file(file, 1 << 20);
    std::filesystem::resize_file(file, 3 << 20);
    auto at = (*s)->pin(id_of(2));
    REQUIRE_FALSE(at);
    CHECK(at.error().code() == error_code::data_loss);
    CHECK(at.error().message().find("checksum mismatch") != std::string::npos);
  }
  SECTION("a file missing while the index names it is reported as missing") {
    std::filesystem::remove(file_of(dir, id_of(2)));
    auto at = (*s)->pin(id_of(2));
    REQUIRE_FALSE(at);
    CHECK(at.error().code() == error_code::data_loss);
    CHECK(at.error().message().find("is missing") != std::string::npos);
  }
  // The failed restore gave back the block it took (id 3 spilled to make room for it), and
  // the others read back intact.
  CHECK((*s)->stats().objects_in_memory == 0);
  CHECK((*s)->stats().bytes_in_memory == 0);
  CHECK(reads_back(**s, id_of(1), v[0]));
  CHECK(reads_back(**s, id_of(3), v[2]));
}

TEST_CASE("a durable object whose file is gone is not found again after a restart",
          "[store]") {
  temp_dir dir;
  {
    auto s = object_store::open({.capacity = 4 << 20, .dir = dir.path.string()});
    REQUIRE(s);
    put(**s, id_of(1), pattern(1000, 1), /*durable=*/true);
    put(**s, id_of(2), pattern(1000, 2), /*durable=*/true);
  }
  // As when a free's record deletion had not reached the disk before a crash.
  std::filesystem::remove(file_of(dir, id_of(1)));
  {
    auto s = object_store::open({.capacity = 4 << 20, .dir = dir.path.string()});
    REQUIRE(s);
    CHECK_FALSE((*s)->contains(id_of(1)));
    CHECK(reads_back(**s, id_of(2), pattern(1000, 2)));
    CHECK((*s)->durable_ids() == std::vector<unique_id>{id_of(2)});
  }
  // Its record was deleted, not only skipped: a file of that name later is not taken for it.
  rocksdb::DB* raw = nullptr;
  REQUIRE(rocksdb::DB::OpenForReadOnly(rocksdb::Options(), dir.path.string(), &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  std::string key(1, 'r');
  for (std::uint64_t part : {id_of(1).hi, id_of(1).lo}) {
    for (int i = 7; i >= 0; --i) key.push_back(static_cast<char>(part >> (8 * i)));
  }
  std::string value;
  CHECK(db->Get(rocksdb::ReadOptions(), key, &value).IsNotFound());
}

TEST_CASE("freeing an object removes its file", "[store]") {
  temp_dir dir;
  auto s = object_store::open({.capacity = 4 << 20, .dir = dir.path.string()});
  REQUIRE(s);
  fill_past_capacity(**s, /*first_durable=*/true);
  REQUIRE(std::filesystem::exists(file_of(dir, id_of(1))));
  REQUIRE(std::filesystem::exists(file_of(dir, id_of(2))));
  (*s)->free(id_of(2));  // spilled
  CHECK_FALSE(std::filesystem::exists(file_of(dir, id_of(2))));
  CHECK((*s)->free_job(unique_id{2, 2}) == 2);  // the durable one, and id 3 (in memory)
  CHECK_FALSE(std::filesystem::exists(file_of(dir, id_of(1))));
  CHECK(files_in(dir.path) == 0);
}

TEST_CASE("a restored object that leaves memory again is not written twice", "[store]") {
  temp_dir dir;
  auto s = object_store::open({.capacity = 4 << 20, .dir = dir.path.string()});
  REQUIRE(s);
  const auto v = fill_past_capacity(**s, /*first_durable=*/false);
  CHECK((*s)->stats().spilled_objects == 2);
  CHECK(reads_back(**s, id_of(1), v[0]));  // id 3 spills to make room
  CHECK(reads_back(**s, id_of(2), v[1]));  // id 1 leaves memory: its file is still there
  const auto st = (*s)->stats();
  CHECK(st.spilled_objects == 3);
  CHECK(st.restored_objects == 2);
  CHECK(reads_back(**s, id_of(1), v[0]));
  CHECK(reads_back(**s, id_of(3), v[2]));
}

// Run by the next test in a process of its own, which it ends without closing anything: a
// node that dies.
TEST_CASE("a writer that dies leaves durable objects, spilled files and a file with no record",
          "[.][crash_writer]") {
  const char* at = std::getenv("CELER_STORE_TEST_CRASH_DIR");
  REQUIRE(at != nullptr);
  auto s = object_store::open({.capacity = 4 << 20, .dir = at});
  REQUIRE(s);
  fill_past_capacity(**s, /*first_durable=*/true);  // id 2's file is written, its record not logged
  // Died between writing a file and writing its record.
  std::ofstream(spill_db::file_path(at, id_of(9)), std::ios::binary) << std::string(4096, 'x');
  std::_Exit(0);
}

TEST_CASE("after a crash, durable objects read back and files without a durable record are deleted",
          "[store]") {
  temp_dir dir;
  const auto self = std::filesystem::read_symlink("/proc/self/exe");
  const std::string run = "CELER_STORE_TEST_CRASH_DIR='" + dir.path.string() + "' '" +
                          self.string() + "' '[crash_writer]' > /dev/null";
  const int status = std::system(run.c_str());
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  REQUIRE(std::filesystem::exists(file_of(dir, id_of(1))));
  REQUIRE(std::filesystem::exists(file_of(dir, id_of(2))));  // left behind by the crash
  REQUIRE(std::filesystem::exists(file_of(dir, id_of(9))));

  auto s = object_store::open({.capacity = 4 << 20, .dir = dir.path.string()});
  REQUIRE(s);
  CHECK(reads_back(**s, id_of(1), pattern(3 << 20, 7)));
  CHECK((*s)->durable_ids() == std::vector<unique_id>{id_of(1)});
  for (std::uint64_t n : {2, 3, 9}) CHECK_FALSE((*s)->contains(id_of(n)));
  CHECK_FALSE(std::filesystem::exists(file_of(dir, id_of(2))));
  CHECK_FALSE(std::filesystem::exists(file_of(dir, id_of(9))));
  CHECK(files_in(dir.path) == 1);
}

TEST_CASE("durable objects of the earlier layout (chunks in RocksDB) are still read and freed",
          "[store]") {
  temp_dir dir;
  // 8 MiB chunks after a 61-byte record, as the store wrote them before objects had files.
  const auto v = pattern((8 << 20) + 12345, 5);
  auto u64 = [](std::string& s, std::uint64_t x) {
    for (int i = 7; i >= 0; --i) s.push_back(static_cast<char>(x >> (8 * i)));
  };
  auto key = [&](char kind, const unique_id& id) {
    std::string k(1, kind);
    u64(k, id.hi);
    u64(k, id.lo);
    return k;
  };
  auto record = [&](const unique_id& id, std::size_t size, std::uint64_t sum, bool durable) {
    std::string r;
    u64(r, id.hi);
    u64(r, id.lo);
    u64(r, size);
    u64(r, sum);
    r.append(4, '\0');  // lead
    r.push_back(durable ? 1 : 0);
    u64(r, 1);  // owner
    u64(r, 1);
    u64(r, 2);  // job
    u64(r, 2);
    return r;
  };
  auto chunk = [&](const unique_id& id, char index) { return key('c', id) + std::string(3, '\0') + index; };
  {
    rocksdb::DB* raw = nullptr;
    rocksdb::Options o;
    o.create_if_missing = true;
    o.enable_blob_files = true;
    REQUIRE(rocksdb::DB::Open(o, dir.path.string(), &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    const auto* p = reinterpret_cast<const char*>(v.data());
    REQUIRE(db->Put(rocksdb::WriteOptions(), chunk(id_of(1), 0), rocksdb::Slice(p, 8 << 20)).ok());
    REQUIRE(db->Put(rocksdb::WriteOptions(), chunk(id_of(1), 1), rocksdb::Slice(p + (8 << 20), 12345)).ok());
    REQUIRE(db->Put(rocksdb::WriteOptions(), key('r', id_of(1)), record(id_of(1), v.size(), checksum(v.data(), v.size()), true)).ok());
    REQUIRE(db->Put(rocksdb::WriteOptions(), chunk(id_of(2), 0), "spilled").ok());  // a spilled copy of that run
    REQUIRE(db->Put(rocksdb::WriteOptions(), key('r', id_of(2)), record(id_of(2), 7, checksum("spilled", 7), false)).ok());
  }
  {
    auto s = object_store::open({.capacity = 16 << 20, .dir = dir.path.string()});
    REQUIRE(s);
    CHECK((*s)->durable_ids() == std::vector<unique_id>{id_of(1)});
    CHECK_FALSE((*s)->contains(id_of(2)));
    CHECK(reads_back(**s, id_of(1), v));
    (*s)->free(id_of(1));
  }
  rocksdb::DB* raw = nullptr;
  REQUIRE(rocksdb::DB::OpenForReadOnly(rocksdb::Options(), dir.path.string(), &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
  std::size_t left = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) ++left;
  CHECK(left == 0);  // records and chunks of both are gone
}

TEST_CASE("a full disk fails the put with resource_exhausted and loses nothing", "[store]") {
  if (::geteuid() != 0) {
    WARN("skipped: mounting a small tmpfs as the full disk needs root");
    return;
  }
  temp_dir dir;
  const std::string mnt = (dir.path / "small").string();
  std::filesystem::create_directories(mnt);
  REQUIRE(std::system(("mount -t tmpfs -o size=12m tmpfs " + mnt).c_str()) == 0);
  struct unmount {
    std::string at;
    ~unmount() { (void)std::system(("umount -l " + at).c_str()); }
  } guard{mnt};
  {
    auto s = object_store::open({.capacity = 8 << 20, .dir = mnt});
    REQUIRE(s);
    std::vector<std::vector<std::byte>> kept;
    std::optional<celer::error> failed;
    for (unsigned i = 0; i < 12 && !failed; ++i) {
      kept.push_back(pattern(2 << 20, 40 + i));
      auto at = (*s)->create(id_of(i), kept.back().size(), 0, {}, false);
      if (!at) {
        failed = at.error();
        kept.pop_back();
        break;
      }
      std::memcpy(at->segment->base() + at->offset, kept.back().data(), kept.back().size());
      REQUIRE((*s)->seal(id_of(i)));
      (*s)->unpin(id_of(i));
    }
    REQUIRE(failed);
    CHECK(failed->code() == error_code::resource_exhausted);
    CHECK(failed->message().find("full") != std::string::npos);
    CHECK((*s)->stats().spilled_objects > 0);  // spills went through until the disk filled
    // The spill that failed left no file behind: one file per object on disk.
    CHECK(files_in(mnt) == (*s)->stats().objects_on_disk_only);
    // Every object created before the disk filled reads back, from memory or disk. Newest
    // first, each freed once read: restoring a spilled one needs room in memory, and with
    // the disk full that room cannot come from spilling another.
    for (std::size_t i = kept.size(); i-- > 0;) {
      INFO("object " << i);
      CHECK(reads_back(**s, id_of(i), kept[i]));
      (*s)->free(id_of(i));
    }
  }
}
