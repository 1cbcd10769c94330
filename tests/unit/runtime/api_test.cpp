// The public API on the embedded runtime: tasks, put/get/wait, argument types, nested work.
#include "unit/runtime/fixtures.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <numeric>

using namespace celer_test;
using namespace std::chrono_literals;

TEST_CASE("a task returns its result through get", "[api]") {
  scoped_runtime rt;
  auto r = celer::task(add).remote(1, 2);
  REQUIRE(r.valid());
  REQUIRE(celer::get(r) == 3);
}

TEST_CASE("get with a timeout returns a result that is ready in time", "[api]") {
  scoped_runtime rt;
  REQUIRE(celer::get(celer::task(twice).remote(21), 30s) == 42);
}

TEST_CASE("get of a vector of refs returns values in order", "[api]") {
  scoped_runtime rt;
  std::vector<celer::object_ref<int>> refs;
  for (int i = 0; i < 20; ++i) refs.push_back(celer::task(twice).remote(i));
  auto values = celer::get(refs);
  REQUIRE(values.size() == 20);
  for (int i = 0; i < 20; ++i) REQUIRE(values[static_cast<std::size_t>(i)] == 2 * i);
}

TEST_CASE("put stores a value that get reads back", "[api]") {
  scoped_runtime rt;
  auto r = celer::put(std::string("hello"));
  REQUIRE(celer::get(r) == "hello");
  auto p = celer::put(point{1, 2, "p"});
  REQUIRE(celer::get(p) == point{1, 2, "p"});
}

TEST_CASE("arguments and results of many msgpack types travel intact", "[api]") {
  scoped_runtime rt;
  REQUIRE(celer::get(celer::task(concat).remote(std::string("ab"), std::string("cd"))) == "abcd");
  REQUIRE(celer::get(celer::task(reversed).remote(std::vector<int>{1, 2, 3})) ==
          std::vector<int>{3, 2, 1});
  auto counts = celer::get(celer::task(count_words).remote(
    std::vector<std::string>{"a", "b", "a"}));
  REQUIRE(counts == std::map<std::string, int>{{"a", 2}, {"b", 1}});
  REQUIRE(celer::get(celer::task(moved).remote(point{1, 2, "q"}, 0.5)) == point{1.5, 2, "q"});
  REQUIRE(celer::get(celer::task(no_args).remote()) == 42);
  auto v = celer::task(nothing).remote(1);
  celer::wait(std::vector{v});
  REQUIRE_NOTHROW(celer::get(v));
}

TEST_CASE("a byte buffer of a megabyte travels intact", "[api]") {
  scoped_runtime rt;
  celer::bytes b(1 << 20);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::uint8_t>(i * 7);
  auto out = celer::get(celer::task(flip_bytes).remote(b));
  REQUIRE(out.size() == b.size());
  for (std::size_t i = 0; i < b.size(); i += 4099) {
    REQUIRE(out[i] == static_cast<std::uint8_t>(~b[i]));
  }
}

TEST_CASE("object refs passed as arguments are resolved before the call", "[api]") {
  scoped_runtime rt;
  auto a = celer::task(add).remote(1, 2);
  auto b = celer::task(add).remote(a, 10);            // a pending task result
  auto c = celer::task(add).remote(celer::put(5), b); // a put and a chained result
  REQUIRE(celer::get(c) == 18);
}

TEST_CASE("an object_ref parameter receives the ref itself, not its value", "[api]") {
  scoped_runtime rt;
  auto inner = celer::task(twice).remote(20);
  REQUIRE(celer::get(celer::task(deref).remote(inner)) == 41);
}

TEST_CASE("tasks submit and wait for tasks of their own", "[api][nested]") {
  scoped_runtime rt;
  REQUIRE(celer::get(celer::task(sum_of_squares).remote(10)) == 385);
  REQUIRE(celer::get(celer::task(fib).remote(10)) == 55);
}

TEST_CASE("tasks create and call actors of their own", "[api][nested]") {
  scoped_runtime rt;
  REQUIRE(celer::get(celer::task(use_counter_in_task).remote(40)) == 42);
}

TEST_CASE("ten thousand small tasks all return correct results", "[api][scale]") {
  scoped_runtime rt;
  constexpr int n = 10'000;
  std::vector<celer::object_ref<int>> refs;
  refs.reserve(n);
  for (int i = 0; i < n; ++i) refs.push_back(celer::task(add).remote(i, i));
  auto values = celer::get(refs);
  REQUIRE(values.size() == n);
  long long bad = 0;
  for (int i = 0; i < n; ++i) bad += values[static_cast<std::size_t>(i)] != 2 * i ? 1 : 0;
  REQUIRE(bad == 0);
}

TEST_CASE("wait returns the ready refs once num_returns are done", "[api]") {
  scoped_runtime rt;
  std::vector<celer::object_ref<int>> refs{celer::task(twice).remote(1),
                                           celer::task(twice).remote(2),
                                           celer::task(twice).remote(3)};
  auto [ready, pending] = celer::wait(refs, 3);
  REQUIRE(ready.size() == 3);
  REQUIRE(pending.empty());
  REQUIRE(ready[0] == refs[0]);  // input order is kept
}

TEST_CASE("wait stops at its timeout and reports what is still pending", "[api][embedded]") {
  scoped_runtime rt;
  closed_gate gate;
  std::vector<celer::object_ref<int>> refs{celer::task(twice).remote(1),
                                           celer::task(hold_until_released).remote(7)};
  REQUIRE(celer::get(refs[0]) == 2);  // ready before the wait starts: no timing involved
  auto [ready, pending] = celer::wait(refs, 2, 100ms);
  REQUIRE(ready.size() == 1);
  REQUIRE(ready[0] == refs[0]);
  REQUIRE(pending.size() == 1);
  release_gate = true;
  REQUIRE(celer::get(refs[1]) == 7);
}

TEST_CASE("wait rejects num_returns larger than the number of refs", "[api]") {
  scoped_runtime rt;
  std::vector<celer::object_ref<int>> refs{celer::task(twice).remote(1)};
  REQUIRE_THROWS_AS(celer::wait(refs, 2), celer::exception);
}

TEST_CASE("try_get returns values and errors instead of throwing", "[api]") {
  scoped_runtime rt;
  auto ok = celer::try_get(celer::task(twice).remote(4));
  REQUIRE(ok.has_value());
  REQUIRE(*ok == 8);
  auto bad = celer::try_get(celer::task(fail_with).remote(std::string("nope")));
  REQUIRE_FALSE(bad.has_value());
  REQUIRE(bad.error().message().find("nope") != std::string::npos);
}

TEST_CASE("current_worker_id is nil in the driver and set inside tasks", "[api]") {
  scoped_runtime rt;
  REQUIRE(celer::current_worker_id().nil());
  REQUIRE_FALSE(celer::current_node_id().nil());
}
