// The object store through the API: large values in shared memory, read without a copy,
// freed when no ref remains, spilled past capacity. These run embedded and (except those
// marked [embedded], which choose the store's size) against a local cluster.
#include "fixtures.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <numeric>
#include <thread>
#include <utility>
#include <vector>

using namespace celer_test;
using Catch::Matchers::Contains;

namespace {

celer::bytes pattern(std::size_t size, unsigned seed) {
  celer::bytes b(size);
  std::uint32_t x = seed * 2654435761u + 1;
  for (std::size_t i = 0; i < size; ++i) {
    x = x * 1664525u + 1013904223u;
    b[i] = static_cast<std::uint8_t>(x >> 24);
  }
  return b;
}

std::uint64_t sum_of(const celer::bytes& b) {
  return std::accumulate(b.begin(), b.end(), std::uint64_t{0});
}

celer::bytes make_pattern(int size, int seed) {
  return pattern(static_cast<std::size_t>(size), static_cast<unsigned>(seed));
}
std::uint64_t bytes_sum(celer::bytes b) { return sum_of(b); }
std::uint64_t ref_sum(celer::object_ref<celer::bytes> r) { return sum_of(celer::get(r)); }
double array_sum(celer::array<double> a) { return std::accumulate(a.begin(), a.end(), 0.0); }
celer::array<float> ramp(int n) {
  celer::array<float> a(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) a[static_cast<std::size_t>(i)] = static_cast<float>(i) * 0.5f;
  return a;
}

/// Whether a large argument reached the task as a view of the store, and its sum.
std::pair<bool, std::uint64_t> view_and_sum(celer::bytes b) { return {b.is_view(), sum_of(b)}; }

CELER_REMOTE(make_pattern, bytes_sum, ref_sum, array_sum, ramp, view_and_sum);

/// Waits (bounded) until this node's store holds `n` objects more than `base`: frees travel
/// as messages, so the count follows a dropped ref a moment later.
bool objects_settle_at(std::uint64_t base, std::uint64_t n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (celer::local_object_store_stats().objects_in_memory == base + n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

/// The line of /proc/self/maps that holds `p` (what is mapped there).
std::string mapping_of(const void* p) {
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) == 2 && lo <= at && at < hi) return line;
  }
  return {};
}

} // namespace

TEST_CASE("a large object read on its node is a view of the store's memory", "[store]") {
  scoped_runtime rt;
  const auto value = pattern(1 << 20, 1);
  auto ref = celer::put(value);
  const auto a = celer::get(ref);
  const auto b = celer::get(ref);
  REQUIRE(a.is_view());
  REQUIRE(b.is_view());
  CHECK(a.data() == b.data());  // both map the store's one copy
  CHECK(mapping_of(a.data()).find("celer-object-arena") != std::string::npos);  // the job's arena
  // The value after a bin header starts aligned (arrays of numbers can be read in place).
  CHECK(reinterpret_cast<std::uintptr_t>(a.data()) % 64 == 0);
  CHECK(a == value);
  // Small values still travel inline and are plain copies.
  auto small = celer::get(celer::put(celer::bytes(std::string_view("tiny"))));
  CHECK_FALSE(small.is_view());
  CHECK(small.view() == "tiny");
}

TEST_CASE("a view outlives its ref and the object stays readable while mapped", "[store]") {
  scoped_runtime rt;
  const auto value = pattern(512 << 10, 2);
  celer::bytes view;
  {
    auto ref = celer::put(value);
    view = celer::get(ref);
  }  // the ref is gone: the object is freed, but its mapping is still read
  REQUIRE(view.is_view());
  CHECK(view == value);
  // Writing through a view copies it first: the store's bytes never change.
  auto copy = view;
  copy[0] = static_cast<std::uint8_t>(copy[0] ^ 0xff);
  CHECK_FALSE(copy.is_view());
  CHECK(view == value);
}

TEST_CASE("large arguments and results go through the store and arrive intact", "[store]") {
  scoped_runtime rt;
  const auto value = pattern(3 << 20, 3);
  CHECK(celer::get(celer::task(bytes_sum).remote(value)) == sum_of(value));
  auto made = celer::get(celer::task(make_pattern).remote(2 << 20, 4));
  CHECK(made.is_view());
  CHECK(made == pattern(2 << 20, 4));
  auto flipped = celer::get(celer::task(flip_bytes).remote(made));
  REQUIRE(flipped.size() == made.size());
  for (std::size_t i = 0; i < made.size(); i += 4093) {
    REQUIRE(flipped[i] == static_cast<std::uint8_t>(~made[i]));
  }
}

TEST_CASE("a large argument reaches the task as a view of the store", "[store]") {
  scoped_runtime rt;
  const auto value = pattern(2 << 20, 6);
  const auto [by_value_view, by_value_sum] = celer::get(celer::task(view_and_sum).remote(value));
  CHECK(by_value_view);
  CHECK(by_value_sum == sum_of(value));
  const auto [by_ref_view, by_ref_sum] =
    celer::get(celer::task(view_and_sum).remote(celer::put(value)));
  CHECK(by_ref_view);
  CHECK(by_ref_sum == sum_of(value));
  // A small argument is a plain copy.
  CHECK_FALSE(celer::get(celer::task(view_and_sum).remote(pattern(100, 1))).first);
}

TEST_CASE("many concurrent readers of one object read the same bytes", "[store]") {
  scoped_runtime rt;
  const auto value = pattern(4 << 20, 5);
  const auto want = sum_of(value);
  auto ref = celer::put(value);
  std::vector<celer::object_ref<std::uint64_t>> sums;
  for (int i = 0; i < 16; ++i) sums.push_back(celer::task(ref_sum).remote(ref));
  std::vector<std::thread> readers;
  std::atomic<int> good{0};
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&] {
      for (int i = 0; i < 8; ++i) good += sum_of(celer::get(ref)) == want ? 1 : 0;
    });
  }
  for (auto& r : readers) r.join();
  CHECK(good == 32);
  for (auto s : celer::get(sums)) CHECK(s == want);
}

TEST_CASE("refcounting frees what no one holds and keeps what someone holds", "[store]") {
  scoped_runtime rt;
  REQUIRE(objects_settle_at(0, 0));
  std::vector<celer::object_ref<celer::bytes>> kept;
  {
    std::vector<celer::object_ref<celer::bytes>> dropped;
    for (unsigned i = 0; i < 8; ++i) {
      (i % 2 == 0 ? kept : dropped).push_back(celer::put(pattern(256 << 10, i)));
    }
    // A result nobody keeps a ref to is freed as soon as it arrives.
    (void)celer::task(make_pattern).remote(300 << 10, 9);
    REQUIRE(objects_settle_at(0, 8));
  }
  CHECK(objects_settle_at(0, 4));
  for (unsigned i = 0; i < kept.size(); ++i) CHECK(celer::get(kept[i]) == pattern(256 << 10, 2 * i));
  // A copy of a ref keeps the object as well as the original.
  auto copy = kept.front();
  kept.clear();
  CHECK(objects_settle_at(0, 1));
  CHECK(celer::get(copy) == pattern(256 << 10, 0));
  // A ref passed to a pending task keeps its object until the task has run.
  auto arg = celer::put(pattern(256 << 10, 7));
  auto sum = celer::task(ref_sum).remote(arg);
  arg = {};
  CHECK(celer::get(sum) == sum_of(pattern(256 << 10, 7)));
}

TEST_CASE("a ref held inside another object keeps its object alive", "[store]") {
  scoped_runtime rt;
  std::vector<celer::object_ref<celer::bytes>> inner{celer::put(pattern(200 << 10, 11))};
  auto outer = celer::put(inner);
  inner.clear();
  auto back = celer::get(outer);
  REQUIRE(back.size() == 1);
  CHECK(celer::get(back[0]) == pattern(200 << 10, 11));
}

TEST_CASE("a store four times over capacity spills and every object reads back byte-exact",
          "[store][embedded]") {
  scoped_runtime rt({.num_cpus = 2, .object_store_memory = 8 << 20});
  std::vector<celer::object_ref<celer::bytes>> refs;
  for (unsigned i = 0; i < 32; ++i) refs.push_back(celer::put(pattern(1 << 20, 100 + i)));
  auto st = celer::local_object_store_stats();
  CHECK(st.capacity_bytes == 8u << 20);
  CHECK(st.spilled_objects >= 24);
  CHECK(st.bytes_in_memory <= st.capacity_bytes);
  for (unsigned i = 0; i < refs.size(); ++i) {
    INFO("object " << i);
    CHECK(celer::get(refs[(i * 5) % refs.size()]) == pattern(1 << 20, 100 + (i * 5) % 32));
  }
  st = celer::local_object_store_stats();
  CHECK(st.restored_objects >= 24);
  CHECK(st.restored_bytes >= 24u << 20);
}

TEST_CASE("a put larger than the store fails with resource_exhausted and the sizes",
          "[store][embedded]") {
  scoped_runtime rt({.num_cpus = 2, .object_store_memory = 4 << 20});
  try {
    (void)celer::put(pattern(6 << 20, 1));
    FAIL("the put should not fit");
  } catch (const celer::exception& e) {
    CHECK(e.code() == celer::error_code::resource_exhausted);
    CHECK_THAT(e.what(), Contains("capacity") && Contains("4194304"));
  }
  // Nothing was lost: the store still serves puts that fit.
  auto ok = celer::put(pattern(1 << 20, 2));
  CHECK(celer::get(ok) == pattern(1 << 20, 2));
}

TEST_CASE("a durable put is written through to disk and reads back", "[store]") {
  scoped_runtime rt;
  auto ref = celer::put(pattern(300 << 10, 21), {.durable = true});
  CHECK(celer::get(ref) == pattern(300 << 10, 21));
  auto small = celer::put(std::string("small but durable"), {.durable = true});
  CHECK(celer::get(small) == "small but durable");
  auto result = celer::task(make_pattern).options({.durable = true}).remote(1000, 22);
  CHECK(celer::get(result) == pattern(1000, 22));
}

TEST_CASE("a large array of numbers is read in place, aligned, from the store", "[store]") {
  scoped_runtime rt;
  celer::array<double> w(200000);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<double>(i) / 3;
  const auto back = celer::get(celer::put(w));
  REQUIRE(back.is_view());
  CHECK(reinterpret_cast<std::uintptr_t>(back.data()) % 64 == 0);
  CHECK(back == w);
  CHECK(celer::get(celer::task(array_sum).remote(w)) ==
        Approx(std::accumulate(w.begin(), w.end(), 0.0)));
  const auto made = celer::get(celer::task(ramp).remote(100000));
  CHECK(made.is_view());
  REQUIRE(made.size() == 100000);
  CHECK(made[99999] == 99999 * 0.5f);
  // Small arrays travel inline, as copies.
  const auto small = celer::get(celer::put(celer::array<int>{1, 2, 3}));
  CHECK_FALSE(small.is_view());
  CHECK(small.to_vector() == std::vector<int>{1, 2, 3});
}
