#include "shm_arena.hpp"

#include <catch2/catch.hpp>

#include <cstring>

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
