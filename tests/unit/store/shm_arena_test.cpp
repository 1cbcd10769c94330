#include <celer/store/shm_arena.hpp>

#include <catch2/catch.hpp>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace celer::store;

TEST_CASE("the allocator fits the best free block and merges freed neighbours", "[store]") {
  block_allocator a(64 * 10);
  auto x = a.allocate(64 * 3);
  auto y = a.allocate(64 * 2);
  auto z = a.allocate(64 * 5);
  REQUIRE((x && y && z));
  CHECK(*x == 0);
  CHECK(*y == 64 * 3);
  CHECK(*z == 64 * 5);
  CHECK_FALSE(a.allocate(1));  // full
  a.release(*x, 64 * 3);
  a.release(*z, 64 * 5);
  // The 2-block request takes the 3-block hole, not the 5-block one.
  auto w = a.allocate(64 * 2);
  REQUIRE(w);
  CHECK(*w == 0);
  a.release(*w, 64 * 2);
  a.release(*y, 64 * 2);
  // Everything merged back into one block.
  CHECK(a.used() == 0);
  CHECK(a.largest_free() == 64 * 10);
  auto all = a.allocate(64 * 10);
  REQUIRE(all);
  CHECK(*all == 0);
}

TEST_CASE("the allocator rounds sizes up to its alignment", "[store]") {
  block_allocator a(4096);
  auto x = a.allocate(1);
  auto y = a.allocate(65);
  REQUIRE((x && y));
  CHECK(*y == 64);
  CHECK(a.used() == 64 + 128);
  CHECK(*y % block_allocator::alignment == 0);
}

TEST_CASE("another process maps the same shared memory by its path", "[store]") {
  auto seg = shm_segment::create(1 << 20);
  REQUIRE(seg);
  std::memcpy(seg->base() + 4096, "written by the parent", 22);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    auto other = shm_segment::open(seg->path(), seg->capacity());
    if (!other) ::_exit(2);
    const bool same = std::memcmp(other->base() + 4096, "written by the parent", 22) == 0;
    std::memcpy(other->base() + 8192, "and read by the child", 22);
    ::_exit(same ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(std::memcmp(seg->base() + 8192, "and read by the child", 22) == 0);
}

TEST_CASE("opening shared memory that is not there says where it looked", "[store]") {
  auto seg = shm_segment::open("/proc/self/fd/987654", 4096);
  REQUIRE_FALSE(seg);
  CHECK(seg.error().message().find("/proc/self/fd/987654") != std::string::npos);
}

TEST_CASE("the allocator refuses sizes whose rounding would wrap around", "[store][security]") {
  block_allocator a(4096);
  const auto max = std::numeric_limits<std::size_t>::max();
  CHECK_FALSE(a.allocate(max));
  CHECK_FALSE(a.allocate(max - 62));
  CHECK_FALSE(a.allocate(4097));
  CHECK(a.used() == 0);
  CHECK(a.allocate(4096));
}

TEST_CASE("mapping more of a segment than it has is refused", "[store][security]") {
  auto seg = shm_segment::create(1 << 20);
  REQUIRE(seg);
  // Bytes past the end of the memfd would fault (SIGBUS) on first touch.
  auto big = shm_segment::open(seg->path(), seg->capacity() * 2);
  REQUIRE_FALSE(big);
  CHECK(big.error().code() == celer::error_code::invalid_argument);
  auto none = shm_segment::open(seg->path(), 0);
  REQUIRE_FALSE(none);
  CHECK(none.error().code() == celer::error_code::invalid_argument);
}

namespace {

/// The permissions ("r--s", "rw-s") of this process's mapping that contains `p`.
std::string protection_of(const void* p) {
  std::FILE* maps = std::fopen("/proc/self/maps", "r");
  REQUIRE(maps != nullptr);
  char line[512];
  std::string perms;
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  while (std::fgets(line, sizeof line, maps) != nullptr) {
    unsigned long lo = 0, hi = 0;
    char mode[8] = {};
    if (std::sscanf(line, "%lx-%lx %7s", &lo, &hi, mode) == 3 && lo <= at && at < hi) perms = mode;
  }
  std::fclose(maps);
  return perms;
}

} // namespace

TEST_CASE("a reader's view of the segment is mapped read-only and writing through it faults",
          "[store][security]") {
  auto seg = shm_segment::create(1 << 20);
  REQUIRE(seg);
  std::memcpy(seg->base() + 4096, "sealed", 7);
  auto reader = shm_segment::open(seg->path(), seg->capacity(), shm_access::read_only);
  REQUIRE(reader);
  CHECK(reader->read_only());
  CHECK(protection_of(reader->base()) == "r--s");
  CHECK(protection_of(seg->base()) == "rw-s");  // the creator's (the node agent's) own
  CHECK(std::memcmp(reader->base() + 4096, "sealed", 7) == 0);
  // Its fd is read-only as well: the mapping cannot be made writable.
  CHECK(::mprotect(reader->base(), 4096, PROT_READ | PROT_WRITE) != 0);
  CHECK(errno == EACCES);

  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The default action, even under a sanitizer that handles SIGSEGV itself.
    std::signal(SIGSEGV, SIG_DFL);
    volatile auto* p = reinterpret_cast<volatile char*>(reader->base() + 4096);
    *p = 'X';  // must fault
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGSEGV);
  CHECK(std::memcmp(seg->base() + 4096, "sealed", 7) == 0);
}

TEST_CASE("a writer gets a writable view of its object only, and readers see what it wrote",
          "[store][security]") {
  auto seg = shm_segment::create(1 << 20);
  REQUIRE(seg);
  auto reader = shm_segment::open(seg->path(), seg->capacity(), shm_access::read_only);
  REQUIRE(reader);
  const std::size_t offset = 3 * 4096 + 64, size = 5000;
  {
    auto out = reader->map_writable(offset, size);
    REQUIRE(out);
    REQUIRE(out->size() == size);
    CHECK(protection_of(out->data()) == "rw-s");
    std::memset(out->data(), 'w', size);
    CHECK(protection_of(reader->base() + offset) == "r--s");  // the whole view stays read-only
  }  // sealed: the writable view is gone
  CHECK(std::string(reinterpret_cast<const char*>(reader->base() + offset), size) ==
        std::string(size, 'w'));
  CHECK(std::string(reinterpret_cast<const char*>(seg->base() + offset), size) ==
        std::string(size, 'w'));
  // Past the segment, or wrapping around, is refused.
  CHECK(reader->map_writable(seg->capacity() - 10, 11).error().code() ==
        celer::error_code::invalid_argument);
  CHECK_FALSE(reader->map_writable(std::numeric_limits<std::size_t>::max() - 5, 10));
  auto empty = reader->map_writable(100, 0);
  REQUIRE(empty);
  CHECK(empty->data() == nullptr);
}

TEST_CASE("the allocator counts the free blocks whose pages are resident until they are taken",
          "[store]") {
  block_allocator a(64 * 100);
  auto x = a.allocate(64 * 10);
  auto y = a.allocate(64 * 10);
  REQUIRE((x && y));
  CHECK(a.resident_free() == 0);  // never used before: nothing resident
  a.release(*x, 64 * 10);
  CHECK(a.resident_free() == 64 * 10);
  // Reused (best fit takes the same block): resident and in use, no longer free.
  auto again = a.allocate(64 * 4);
  REQUIRE(again);
  CHECK(*again == *x);
  CHECK(a.resident_free() == 64 * 6);
  a.release(*y, 64 * 10);
  CHECK(a.resident_free() == 64 * 16);  // merged with the rest of x's block
  const auto taken = a.take_resident_free();
  REQUIRE(taken.size() == 1);
  CHECK(taken[0] == std::pair<std::size_t, std::size_t>{*x + 64 * 4, 64 * 16});
  CHECK(a.resident_free() == 0);
  a.release(*again, 64 * 4);
  CHECK(a.resident_free() == 64 * 4);
}

TEST_CASE("a segment handed over as an fd maps read-only, and its writer writes through that fd",
          "[store][security]") {
  auto seg = shm_segment::create(1 << 20);
  REQUIRE(seg);
  std::memcpy(seg->base() + 4096, "sealed", 7);
  auto got = shm_segment::adopt(::fcntl(seg->fd(), F_DUPFD_CLOEXEC, 0), seg->capacity());
  REQUIRE(got);
  CHECK(got->read_only());
  CHECK(got->path().empty());  // no path: it came as an fd
  CHECK(protection_of(got->base()) == "r--s");
  CHECK(std::memcmp(got->base() + 4096, "sealed", 7) == 0);
  {
    auto out = got->map_writable(8192, 5);
    REQUIRE(out);
    std::memcpy(out->data(), "fresh", 5);
  }
  CHECK(std::memcmp(seg->base() + 8192, "fresh", 5) == 0);

  // More than the segment holds, or nothing: refused (and the fd closed).
  CHECK(shm_segment::adopt(::fcntl(seg->fd(), F_DUPFD_CLOEXEC, 0), seg->capacity() * 2)
          .error()
          .code() == celer::error_code::invalid_argument);
  CHECK_FALSE(shm_segment::adopt(-1, 4096));
}

TEST_CASE("punching a range gives back its whole pages and leaves its neighbours' bytes",
          "[store]") {
  auto seg = shm_segment::create(1 << 20);
  REQUIRE(seg);
  std::memset(seg->base(), 'x', 1 << 20);
  CHECK(seg->resident_bytes() >= std::size_t{1} << 20);
  seg->punch(100, (1 << 20) - 200);  // all but the first and last page
  CHECK(seg->resident_bytes() <= 2 * 4096);
  CHECK(seg->base()[99] == std::byte{'x'});
  CHECK(seg->base()[(1 << 20) - 1] == std::byte{'x'});
  CHECK(seg->base()[8192] == std::byte{0});
}
