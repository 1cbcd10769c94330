// Multiple returns (a remote function or method returning celer::returns<A, B, ...>, that
// is std::tuple): one ref per value, each its own object. Through the public API embedded
// and (the suite's pass against a local cluster) on a cluster; the pieces underneath
// (splitting the packed tuple, the table's objects) directly.
#include "core/reference_table.hpp"
#include "unit/runtime/core_pieces.hpp"
#include "unit/runtime/fixtures.hpp"
#include "worker/split_returns.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

using namespace celer_test;
using Catch::Matchers::Contains;

namespace {

celer::returns<int, std::string, std::vector<double>> three_kinds(int n) {
  return {n * 2, "n=" + std::to_string(n), std::vector<double>(static_cast<std::size_t>(n), 0.5)};
}
/// A pair of halves: the first large enough to go to the object store, the second inline.
celer::returns<std::vector<std::uint8_t>, std::int64_t> big_and_small(std::int64_t bytes) {
  return {std::vector<std::uint8_t>(static_cast<std::size_t>(bytes), 7), bytes};
}
std::tuple<int> only_one(int x) { return {x + 1}; }
celer::returns<int, int> throws_before_returning(int x) {
  if (x > 0) throw std::invalid_argument("no returns for " + std::to_string(x));
  return {x, x};
}
std::int64_t length_of(std::vector<std::uint8_t> v) { return static_cast<std::int64_t>(v.size()); }

struct splitter {
  int calls = 0;
  celer::returns<int, std::string> next(std::string word) {
    ++calls;
    return {calls, word + "!"};
  }
};
splitter* make_splitter() { return new splitter; }

CELER_REMOTE(three_kinds, big_and_small, only_one, throws_before_returning, length_of,
             make_splitter, &splitter::next);

} // namespace

TEST_CASE("a task returning a tuple gives one ref per value, each read on its own",
          "[api][returns]") {
  scoped_runtime rt;
  auto [number, text, values] = celer::task(three_kinds).remote(3);
  static_assert(std::is_same_v<decltype(number), celer::object_ref<int>>);
  static_assert(std::is_same_v<decltype(values), celer::object_ref<std::vector<double>>>);
  CHECK(number.id() != text.id());
  CHECK(number.id() != values.id());
  CHECK(celer::get(values) == std::vector<double>{0.5, 0.5, 0.5});
  CHECK(celer::get(text) == "n=3");
  CHECK(celer::get(number) == 6);

  // A one-value tuple is one ref to the value.
  auto [one] = celer::task(only_one).remote(41);
  CHECK(celer::get(one) == 42);
}

TEST_CASE("returns of one call may be stored and inline, and each is passed on as a ref",
          "[api][returns]") {
  scoped_runtime rt;
  const auto large = static_cast<std::int64_t>(celer::detail::inline_object_limit()) * 4;
  auto [blob, size] = celer::task(big_and_small).remote(large);
  // The stored one feeds another task by ref; the inline one is read here.
  CHECK(celer::get(celer::task(length_of).remote(blob)) == large);
  CHECK(celer::get(size) == large);
  const auto bytes = celer::get(blob);
  REQUIRE(bytes.size() == static_cast<std::size_t>(large));
  CHECK(bytes.front() == 7);
  CHECK(bytes.back() == 7);
}

TEST_CASE("a failed call with several returns fails every one of them, with the same error",
          "[api][returns]") {
  scoped_runtime rt;
  auto [first, second] = celer::task(throws_before_returning).remote(5);
  for (auto* ref : {&first, &second}) {
    try {
      celer::get(*ref);
      FAIL("get of a failed call's return gave a value");
    } catch (const celer::task_error& e) {
      CHECK(e.exception_type() == "std::invalid_argument");
      CHECK_THAT(e.what(), Contains("no returns for 5"));
    }
  }
  auto [a, b] = celer::task(throws_before_returning).remote(0);
  CHECK(celer::get(a) == 0);
  CHECK(celer::get(b) == 0);
}

TEST_CASE("an actor method returning a tuple gives one ref per value, in call order",
          "[api][returns][actor]") {
  scoped_runtime rt;
  auto s = celer::actor(make_splitter).remote();
  auto [n1, w1] = s.task(&splitter::next).remote(std::string("a"));
  auto [n2, w2] = s.task(&splitter::next).remote(std::string("b"));
  CHECK(celer::get(w2) == "b!");
  CHECK(celer::get(n1) == 1);
  CHECK(celer::get(n2) == 2);
  CHECK(celer::get(w1) == "a!");
}

TEST_CASE("each return is freed on its own: dropping one ref frees its stored object only",
          "[api][returns][embedded]") {
  scoped_runtime rt;
  const auto large = static_cast<std::int64_t>(celer::detail::inline_object_limit()) * 4;
  const auto base = celer::local_object_store_stats().objects_in_memory;
  auto [x, y] = celer::task(big_and_small).remote(large);
  auto [z, w] = celer::task(big_and_small).remote(large);
  CHECK(celer::get(y) == large);
  CHECK(celer::get(w) == large);
  CHECK(celer::local_object_store_stats().objects_in_memory == base + 2);
  x = {};
  // Frees travel as messages: the count follows a moment later.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (celer::local_object_store_stats().objects_in_memory != base + 1 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(celer::local_object_store_stats().objects_in_memory == base + 1);
  CHECK(celer::get(z).size() == static_cast<std::size_t>(large));  // the other call's is whole
  CHECK(celer::get(y) == large);  // the dropped one's sibling still reads
}

TEST_CASE("split_returns cuts a packed tuple into its packed values", "[worker][returns]") {
  const auto packed = celer::detail::pack(std::make_tuple(1, std::string("two"), std::vector<int>{3, 4}));
  auto values = celer::split_returns(packed, 3);
  REQUIRE(values.size() == 3);
  CHECK(celer::detail::unpack<int>(values[0], "v") == 1);
  CHECK(celer::detail::unpack<std::string>(values[1], "v") == "two");
  CHECK(celer::detail::unpack<std::vector<int>>(values[2], "v") == std::vector<int>{3, 4});

  // More than 15 values: an array16 header. (Strings: a vector of numbers packs as bytes.)
  std::vector<std::string> many;
  for (int i = 0; i < 40; ++i) many.push_back(std::to_string(i));
  auto split = celer::split_returns(celer::detail::pack(many), 40);
  REQUIRE(split.size() == 40);
  CHECK(celer::detail::unpack<std::string>(split[39], "v") == "39");

  CHECK_THROWS_WITH(celer::split_returns(packed, 2), Contains("to return 2 values, but returned 3"));
  CHECK_THROWS_WITH(celer::split_returns(celer::detail::pack(7), 2), Contains("not a tuple"));
  CHECK_THROWS_WITH(celer::split_returns(packed.substr(0, packed.size() - 2), 3), Contains("cut short"));
  CHECK_THROWS_WITH(celer::split_returns(packed + "x", 3), Contains("bytes after"));
  CHECK_THROWS_AS(celer::split_returns("", 1), celer::detail::argument_error);
}

TEST_CASE("the table holds one object per return, frees each on its own, and a failure fills "
          "them all", "[core][reference_table][returns]") {
  celer::testing::core_pieces f;
  auto spec = f.task("f");
  spec.num_returns = 3;
  std::vector<celer::object_ref<void>> all;
  auto first = f.objects.submit(spec, {}, &all);
  REQUIRE(all.size() == 3);
  CHECK(all[0].id() == first.id());
  CHECK(all[1].id() == spec.return_id(1));
  CHECK(f.objects.owned_objects() == 3);
  all[2] = {};
  CHECK(f.objects.owned_objects() == 3);  // the task may still answer it; freed once it does
  // The call failed: one failure answers, every return holds it (the dropped one is freed).
  auto r = celer::testing::core_pieces::failed(spec.id, celer::detail::failure_kind::task_error, "boom");
  f.objects.finish_task(spec.id, r.returns);
  CHECK_FALSE(f.value_of(all[0]).ok);
  CHECK(f.value_of(all[1]).fail.message == "boom");
  CHECK(f.objects.owned_objects() == 2);
  all.clear();
  first = {};
  CHECK(f.objects.owned_objects() == 0);

  // fail_task (a lost worker, a cancel) fills them all too.
  auto other = f.task("g");
  other.num_returns = 2;
  std::vector<celer::object_ref<void>> refs;
  (void)f.objects.submit(other, {}, &refs);
  f.objects.fail_task(other.id, celer::protocol::failure_info::make(
                                  celer::detail::failure_kind::worker_died,
                                  celer::error_code::unavailable, "its worker died"));
  CHECK(f.value_of(refs[1]).fail.message == "its worker died");

  auto bad = f.task("h");
  bad.num_returns = 0;
  CHECK_THROWS_WITH(f.objects.submit(bad, {}), Contains("returns 1 to 1024 objects, not 0"));
}
