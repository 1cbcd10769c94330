#include "store_test_support.hpp"

#include <celer/store/object_store.hpp>

#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

using namespace celer;
using namespace celer::store;

using namespace celer::store::testing;

TEST_CASE("a sealed object is read where its writer wrote it", "[store]") {
  auto s = object_store::open({.capacity = 1 << 20});
  REQUIRE(s);
  const auto v = pattern(1000, 1);
  const auto written = put(**s, id_of(1), v);
  auto at = (*s)->pin(id_of(1));
  REQUIRE(at);
  CHECK(at->offset == written.offset);  // the same bytes, not a copy
  CHECK(reads_back(**s, id_of(1), v));
  (*s)->unpin(id_of(1));
}

TEST_CASE("an object is not readable before it is sealed", "[store]") {
  auto s = object_store::open({.capacity = 1 << 20});
  REQUIRE(s);
  REQUIRE((*s)->create(id_of(1), 100, 0, {}, false));
  auto at = (*s)->pin(id_of(1));
  REQUIRE_FALSE(at);
  CHECK(at.error().code() == error_code::not_found);
  CHECK((*s)->create(id_of(1), 100, 0, {}, false).error().code() == error_code::already_exists);
}

TEST_CASE("the lead puts an object's bytes at the requested distance from an aligned block",
          "[store]") {
  auto s = object_store::open({.capacity = 1 << 20});
  REQUIRE(s);
  auto at = (*s)->create(id_of(1), 1000, /*lead=*/59, {}, false);
  REQUIRE(at);
  CHECK((at->offset + 5) % 64 == 0);  // a 5-byte header then the body lands aligned
}

TEST_CASE("a store four times over capacity spills and every object reads back byte-exact",
          "[store]") {
  temp_dir dir;
  constexpr std::size_t capacity = 8 << 20;
  constexpr std::size_t object = 1 << 20;
  auto s = object_store::open({.capacity = capacity, .dir = dir.path.string()});
  REQUIRE(s);
  std::vector<std::vector<std::byte>> values;
  for (unsigned i = 0; i < 4 * capacity / object; ++i) {
    values.push_back(pattern(object - 64 * i, i));  // sizes differ: blocks fragment
    put(**s, id_of(i), values.back());
  }
  auto st = (*s)->stats();
  CHECK(st.spilled_objects >= values.size() - capacity / object);
  CHECK(st.bytes_in_memory <= capacity);
  // Read them all back, in an order unlike the one they were written in.
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::size_t k = (i * 7) % values.size();
    INFO("object " << k);
    CHECK(reads_back(**s, id_of(k), values[k]));
  }
  st = (*s)->stats();
  CHECK(st.restored_objects > 0);
  CHECK(st.restored_bytes > 0);
  CHECK(st.bytes_in_memory <= capacity);
}

TEST_CASE("pinned objects stay in memory and a put that cannot fit says why", "[store]") {
  temp_dir dir;
  auto s = object_store::open({.capacity = 4 << 20, .dir = dir.path.string()});
  REQUIRE(s);
  const auto a = pattern(3 << 20, 1);
  put(**s, id_of(1), a);
  REQUIRE((*s)->pin(id_of(1)));  // a reader maps it
  auto b = (*s)->create(id_of(2), 2 << 20, 0, {}, false);
  REQUIRE_FALSE(b);
  CHECK(b.error().code() == error_code::resource_exhausted);
  CHECK(b.error().message().find("pinned") != std::string::npos);
  CHECK((*s)->stats().spilled_objects == 0);
  (*s)->unpin(id_of(1));
  // Unpinned, it spills to make room.
  REQUIRE((*s)->create(id_of(2), 2 << 20, 0, {}, false));
  CHECK((*s)->stats().spilled_objects == 1);
  (*s)->unpin(id_of(2));
}

TEST_CASE("with spilling off, a full store refuses new objects with their sizes", "[store]") {
  auto s = object_store::open({.capacity = 4 << 20});
  REQUIRE(s);
  put(**s, id_of(1), pattern(3 << 20, 1));
  auto b = (*s)->create(id_of(2), 2 << 20, 0, {}, false);
  REQUIRE_FALSE(b);
  CHECK(b.error().code() == error_code::resource_exhausted);
  CHECK(b.error().message().find("spilling to disk is off") != std::string::npos);
  CHECK(reads_back(**s, id_of(1), pattern(3 << 20, 1)));  // nothing lost
  auto huge = (*s)->create(id_of(3), 5 << 20, 0, {}, false);
  REQUIRE_FALSE(huge);
  CHECK(huge.error().message().find("capacity") != std::string::npos);
}

TEST_CASE("a freed object's memory returns once its last reader unpins it", "[store]") {
  auto s = object_store::open({.capacity = 1 << 20});
  REQUIRE(s);
  put(**s, id_of(1), pattern(4096, 1));
  REQUIRE((*s)->pin(id_of(1)));
  (*s)->free(id_of(1));
  CHECK_FALSE((*s)->contains(id_of(1)));
  CHECK((*s)->stats().bytes_in_memory == 4096);  // still mapped by the reader
  (*s)->unpin(id_of(1));
  CHECK((*s)->stats().bytes_in_memory == 0);
  CHECK_FALSE((*s)->pin(id_of(1)));
}

TEST_CASE("objects of a finished job or a gone owner are freed; durable ones outlive the owner",
          "[store]") {
  temp_dir dir;
  auto s = object_store::open({.capacity = 1 << 20, .dir = dir.path.string()});
  REQUIRE(s);
  const unique_id owner{1, 1}, job{2, 2};
  put(**s, id_of(1), pattern(100, 1));
  put(**s, id_of(2), pattern(100, 2), /*durable=*/true);
  CHECK((*s)->free_owner(owner) == 1);
  CHECK_FALSE((*s)->contains(id_of(1)));
  CHECK((*s)->contains(id_of(2)));
  CHECK((*s)->free_job(job) == 1);
  CHECK_FALSE((*s)->contains(id_of(2)));
}

TEST_CASE("a durable object needs a disk tier", "[store]") {
  auto s = object_store::open({.capacity = 1 << 20});
  REQUIRE(s);
  auto at = (*s)->create(id_of(1), 10, 0, {}, /*durable=*/true);
  REQUIRE_FALSE(at);
  CHECK(at.error().code() == error_code::failed_precondition);
}

TEST_CASE("sizes and leads that overflow or exceed the store are refused, never wrapped",
          "[store][security]") {
  auto s = object_store::open({.capacity = 1 << 20});
  REQUIRE(s);
  const auto max = std::numeric_limits<std::size_t>::max();
  for (const std::size_t size : {max, max - 1, max - 63, max - 64, max / 2 + 1, std::size_t{1} << 21}) {
    INFO(size);
    auto at = (*s)->create(id_of(size), size, /*lead=*/0, {}, false);
    REQUIRE_FALSE(at);
    CHECK(at.error().code() == error_code::resource_exhausted);
    CHECK(at.error().message().find(std::to_string(size)) != std::string::npos);
  }
  // size + lead wraps around to a small number.
  auto wrap = (*s)->create(id_of(1), max - 10, /*lead=*/20, {}, false);
  REQUIRE_FALSE(wrap);
  CHECK(wrap.error().code() == error_code::resource_exhausted);
  // A lead is what puts a value's body on the next aligned byte: less than the alignment.
  auto lead = (*s)->create(id_of(2), 100, /*lead=*/block_allocator::alignment, {}, false);
  REQUIRE_FALSE(lead);
  CHECK(lead.error().code() == error_code::invalid_argument);
  CHECK((*s)->stats().objects_in_memory == 0);
  CHECK((*s)->create(id_of(3), 100, /*lead=*/63, {}, false));  // the largest lead is fine
}
