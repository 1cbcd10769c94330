// One arena per job: each job's objects in a memfd of its own, the capacity one budget for
// all of them, and the memory of a job's arena gone with the job.
#include "store_test_support.hpp"

#include <celer/store/object_store.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <vector>

using namespace celer;
using namespace celer::store;
using namespace celer::store::testing;

namespace {

const unique_id job_a{10, 1}, job_b{10, 2};

/// Whether `needle` occurs anywhere in the first `size` bytes of `seg`.
bool holds(const shm_segment& seg, std::size_t size, const std::vector<std::byte>& needle) {
  const auto* begin = seg.base();
  return std::search(begin, begin + size, needle.begin(), needle.end()) != begin + size;
}

} // namespace

TEST_CASE("each job's objects are in an arena of its own that holds no other job's bytes",
          "[store][security]") {
  auto s = object_store::open({.capacity = 1 << 20});
  REQUIRE(s);
  const auto a = pattern(5000, 1), b = pattern(5000, 2);
  const auto at_a = put(**s, id_of(1), a, false, job_a);
  const auto at_b = put(**s, id_of(2), b, false, job_b);
  const auto again_a = put(**s, id_of(3), pattern(100, 3), false, job_a);
  CHECK(at_a.arena != 0);
  CHECK(at_a.arena != at_b.arena);
  CHECK(again_a.arena == at_a.arena);  // one arena per job, not per object
  CHECK((*s)->arena_of_job(job_a) == at_a.arena);
  CHECK((*s)->job_of_arena(at_b.arena) == job_b);
  CHECK((*s)->stats().arenas == 2);
  auto seg_a = (*s)->arena_segment(at_a.arena);
  auto seg_b = (*s)->arena_segment(at_b.arena);
  REQUIRE((seg_a && seg_b));
  CHECK(seg_a->fd() != seg_b->fd());
  CHECK(holds(*seg_a, 1 << 20, a));
  CHECK_FALSE(holds(*seg_a, 1 << 20, b));  // job A's memory has nothing of job B's
  CHECK_FALSE(holds(*seg_b, 1 << 20, a));
  CHECK(reads_back(**s, id_of(1), a));
  CHECK(reads_back(**s, id_of(2), b));
}

TEST_CASE("the capacity is one budget across jobs: one job's put spills another job's objects",
          "[store]") {
  temp_dir dir;
  constexpr std::size_t object = 1 << 20;
  auto s = object_store::open({.capacity = 4 * object, .dir = dir.path.string()});
  REQUIRE(s);
  std::vector<std::vector<std::byte>> values;
  for (unsigned i = 0; i < 4; ++i) {
    values.push_back(pattern(object, i));
    put(**s, id_of(i), values.back(), false, job_a);
  }
  CHECK((*s)->stats().spilled_objects == 0);
  // Job B's first object does not fit beside A's four: A's least recently used one spills.
  values.push_back(pattern(object, 9));
  put(**s, id_of(9), values.back(), false, job_b);
  const auto st = (*s)->stats();
  CHECK(st.spilled_objects == 1);
  CHECK(st.bytes_in_memory <= 4 * object);
  CHECK(st.arenas == 2);
  // Every object reads back, A's spilled one restored (spilling another in turn).
  for (unsigned i = 0; i < 4; ++i) CHECK(reads_back(**s, id_of(i), values[i]));
  CHECK(reads_back(**s, id_of(9), values[4]));
  CHECK((*s)->stats().bytes_in_memory <= 4 * object);
}

TEST_CASE("a job's end frees its arena, once its last pinned object is released", "[store]") {
  auto s = object_store::open({.capacity = 1 << 20});
  REQUIRE(s);
  const auto at = put(**s, id_of(1), pattern(4096, 1), false, job_a);
  put(**s, id_of(2), pattern(4096, 2), false, job_b);
  REQUIRE((*s)->pin(id_of(1)));  // a reader maps it still
  CHECK((*s)->free_job(job_a) == 1);
  CHECK((*s)->stats().arenas == 2);
  auto held = (*s)->arena_segment(at.arena);
  CHECK(held != nullptr);
  (*s)->unpin(id_of(1));
  CHECK((*s)->stats().arenas == 1);
  CHECK((*s)->arena_segment(at.arena) == nullptr);
  CHECK((*s)->arena_of_job(job_a) == 0);
  // The memory itself goes when the last mapping of it does (here, `held`).
  CHECK(held->resident_bytes() > 0);
  // A job's object after its end (a late message) gets a new arena, with a new id.
  const auto late = put(**s, id_of(3), pattern(10, 3), false, job_a);
  CHECK(late.arena != at.arena);
}

TEST_CASE("freed pages stay resident within a job's arena and are reused without punching",
          "[store]") {
  auto s = object_store::open({.capacity = 8 << 20});
  REQUIRE(s);
  for (unsigned round = 0; round < 5; ++round) {
    for (unsigned i = 0; i < 6; ++i) put(**s, id_of(i), pattern(1 << 20, i), false, job_a);
    for (unsigned i = 0; i < 6; ++i) (*s)->free(id_of(i));
  }
  CHECK((*s)->stats().punched_bytes == 0);
  CHECK((*s)->stats().resident_free_bytes >= std::size_t{6} << 20);
}

TEST_CASE("the memory of all arenas together stays within the capacity as jobs come and go",
          "[store][security]") {
  constexpr std::size_t capacity = 8 << 20;
  auto s = object_store::open({.capacity = capacity});
  REQUIRE(s);
  // Four jobs, each writing 6 MiB and freeing it (their arenas stay, their pages resident):
  // without punching, 24 MiB would stay in memory.
  for (std::uint64_t j = 0; j < 4; ++j) {
    const unique_id job{20, j};
    for (unsigned i = 0; i < 6; ++i) put(**s, id_of(j * 10 + i), pattern(1 << 20, i), false, job);
    for (unsigned i = 0; i < 6; ++i) (*s)->free(id_of(j * 10 + i));
    INFO("after job " << j);
    // A partial page at each end of a punched range stays; a few pages at most.
    CHECK((*s)->resident_bytes() <= capacity + 64 * 4096);
  }
  CHECK((*s)->stats().arenas == 4);
  CHECK((*s)->stats().punched_bytes > 0);
  // A job's end gives its arena's memory back at once.
  for (std::uint64_t j = 0; j < 4; ++j) (void)(*s)->free_job(unique_id{20, j});
  CHECK((*s)->stats().arenas == 0);
  CHECK((*s)->resident_bytes() == 0);
}
