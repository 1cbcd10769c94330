// Pipelining is on by default: tasks queue on a leased worker behind the one it runs. These
// cases prove that nothing then waits behind a call that waits for it: the worker gives back
// what is queued behind a call that blocks in get, embedded and (in the cluster pass) with
// worker processes.
#include "unit/runtime/fixtures.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <thread>
#include <vector>

using namespace celer_test;

namespace {

/// Holds a ref until someone takes it.
struct ref_box {
  void post(std::vector<celer::object_ref<int>> r) { refs = std::move(r); }
  std::vector<celer::object_ref<int>> take() const { return refs; }
  std::vector<celer::object_ref<int>> refs;
};
ref_box* make_ref_box() { return new ref_box(); }

/// With `wait`, waits (in get) until the box holds a ref, then for that ref's value;
/// without, returns at once: a function that waits only sometimes.
int wait_for_posted(celer::actor_handle<ref_box> box, bool wait) {
  if (!wait) return 0;
  for (;;) {
    auto refs = celer::get(box.task(&ref_box::take).remote());
    if (!refs.empty()) return celer::get(refs.front()) * 10;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

int plus_one(int x) { return x + 1; }

/// Recursion whose every level waits in get for the next: each level's child may be queued
/// on a worker behind a call that waits for it.
int depth_sum(int n) {
  if (n == 0) return 0;
  return n + celer::get(celer::task(depth_sum).remote(n - 1));
}

} // namespace

CELER_REMOTE(make_ref_box, &ref_box::post, &ref_box::take, wait_for_posted, plus_one, depth_sum);

TEST_CASE("a task queued behind a call that waits for it is given back and runs elsewhere",
          "[api][pipelining]") {
  scoped_runtime rt({.num_cpus = 1});
  auto box = celer::actor(make_ref_box).options({.num_cpus = 0}).remote();
  // Both functions came back quickly once, without waiting: the caller queues their tasks
  // behind others on a worker (pipelining) from now on.
  REQUIRE(celer::get(celer::task(wait_for_posted).remote(box, false)) == 0);
  REQUIRE(celer::get(celer::task(plus_one).remote(0)) == 1);
  // On one CPU, both go to the one leased worker: the waiter first, then what it waits for.
  auto waiter = celer::task(wait_for_posted).remote(box, true);
  auto awaited = celer::task(plus_one).remote(4);
  celer::get(box.task(&ref_box::post).remote(std::vector<celer::object_ref<int>>{awaited}));
  // Without the give-back, `awaited` would wait behind `waiter` forever.
  REQUIRE(celer::get(waiter, std::chrono::seconds(60)) == 50);
  REQUIRE(celer::get(awaited) == 5);
}

TEST_CASE("recursive tasks that each wait for the next finish with pipelining on",
          "[api][pipelining][nested]") {
  scoped_runtime rt({.num_cpus = 2});
  std::vector<celer::object_ref<int>> refs;
  for (int i = 0; i < 8; ++i) refs.push_back(celer::task(depth_sum).remote(6));
  for (auto& r : refs) REQUIRE(celer::get(r, std::chrono::seconds(120)) == 21);
}

TEST_CASE("a thousand small tasks pipelined on leased workers all return their own results",
          "[api][pipelining]") {
  scoped_runtime rt;
  std::vector<celer::object_ref<int>> refs;
  for (int i = 0; i < 1000; ++i) refs.push_back(celer::task(plus_one).remote(i));
  auto values = celer::get(refs);
  REQUIRE(values.size() == 1000);
  for (int i = 0; i < 1000; ++i) REQUIRE(values[static_cast<std::size_t>(i)] == i + 1);
}
