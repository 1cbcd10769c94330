// GPUs in an embedded runtime: declared devices handed out by index (celer::gpu_ids()),
// matching by model and memory, fractional sharing of one device, requests that can never
// run, why a request waits (celer::pending_reason), and plain devices from num_gpus alone.
// No device is needed: every GPU here is declared, or a plain one made up from a count.
#include "unit/runtime/fixtures.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>
#include <thread>
#include <utility>

using namespace celer_test;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
           std::chrono::steady_clock::now().time_since_epoch())
    .count();
}

/// What a GPU task saw: its devices and when it ran (steady_clock: embedded workers are
/// threads of this process, so the clock is shared).
struct gpu_run {
  std::vector<int> ids;
  std::int64_t start = 0, end = 0;
  MSGPACK_DEFINE(ids, start, end)
};

std::vector<int> my_gpus() { return celer::gpu_ids(); }

gpu_run hold_gpu(int ms) {
  gpu_run r;
  r.start = steady_ns();
  r.ids = celer::gpu_ids();
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  r.end = steady_ns();
  return r;
}

/// Calls inside meet_pair at once.
std::atomic<int> pair_inside{0};

/// Waits (at most 10 s) until two calls are inside at once, so that both hold their GPU
/// together; returns the caller's devices.
std::vector<int> meet_pair() {
  ++pair_inside;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (pair_inside.load() < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  return celer::gpu_ids();
}

struct gpu_holder {
  std::vector<int> ids() const { return celer::gpu_ids(); }
};
gpu_holder* make_gpu_holder() { return new gpu_holder(); }

CELER_REMOTE(my_gpus, hold_gpu, meet_pair, make_gpu_holder, &gpu_holder::ids);

/// Index 0: an A100 with 80 GB (score 2); index 1: a V100 with 16 GB (score 1).
const celer::init_options two_declared{.num_cpus = 4, .gpus = "A100-80GB:1@2,V100-16GB:1@1"};

/// The most runs that overlap in time.
std::size_t max_overlap(const std::vector<gpu_run>& runs) {
  std::vector<std::pair<std::int64_t, int>> edges;
  for (const auto& r : runs) {
    edges.emplace_back(r.start, +1);
    edges.emplace_back(r.end, -1);
  }
  std::sort(edges.begin(), edges.end());  // at equal times an end (-1) sorts first
  int now = 0, most = 0;
  for (const auto& [t, step] : edges) most = std::max(most, now += step);
  return static_cast<std::size_t>(most);
}

/// What `get(r)` throws, as text; fails the test when it throws nothing.
template <class T>
std::string failure_of(const celer::object_ref<T>& r) {
  try {
    celer::get(r, 30s);
  } catch (const celer::infeasible_error& e) {
    return e.what();
  }
  FAIL("get did not throw infeasible_error");
  return {};
}

} // namespace

TEST_CASE("declared GPUs are handed out by index and gpu_ids names them",
          "[embedded][gpus]") {
  scoped_runtime rt(two_declared);
  REQUIRE(celer::cluster_resources()["GPU"] == 2);

  auto v100 = celer::task(my_gpus).options({.num_gpus = 1, .accelerator_type = "V100"}).remote();
  REQUIRE(celer::get(v100, 30s) == std::vector<int>{1});
  auto a100 = celer::task(my_gpus).options({.num_gpus = 1, .accelerator_type = "A100"}).remote();
  REQUIRE(celer::get(a100, 30s) == std::vector<int>{0});
  // 40 GB: only the 80 GB device has that much (the V100 has 16 GiB, about 17.2 GB).
  auto big = celer::task(my_gpus).options({.num_gpus = 1, .gpu_memory_gb = 40}).remote();
  REQUIRE(celer::get(big, 30s) == std::vector<int>{0});
  auto none = celer::task(my_gpus).remote();
  REQUIRE(celer::get(none, 30s).empty());
  REQUIRE(celer::gpu_ids().empty());  // the driver is given no GPU
}

TEST_CASE("fractional GPU tasks on one device never exceed it", "[embedded][gpus]") {
  scoped_runtime rt({.num_cpus = 4, .gpus = "T4-16GB:1"});
  std::vector<celer::object_ref<gpu_run>> refs;
  for (int i = 0; i < 6; ++i) {
    refs.push_back(celer::task(hold_gpu).options({.num_gpus = 0.5}).remote(200));
  }
  std::vector<gpu_run> runs;
  for (auto& r : refs) runs.push_back(celer::get(r, 60s));
  for (const auto& r : runs) REQUIRE(r.ids == std::vector<int>{0});
  // Four CPUs would run four at once; half a device each lets two share it.
  const auto overlap = max_overlap(runs);
  REQUIRE(overlap <= 2);
  CHECK(overlap == 2);  // and the two halves are used together
}

TEST_CASE("a request no node can satisfy fails at once and says why", "[embedded][gpus]") {
  scoped_runtime rt(two_declared);
  SECTION("a GPU model the node does not have") {
    auto r = celer::task(my_gpus).options({.num_gpus = 1, .accelerator_type = "H100"}).remote();
    const auto why = failure_of(r);
    REQUIRE_THAT(why, Contains("H100") && Contains("my_gpus"));
  }
  SECTION("more GPU memory than any device has") {
    auto r = celer::task(my_gpus).options({.num_gpus = 1, .gpu_memory_gb = 100}).remote();
    REQUIRE_THAT(failure_of(r), Contains("100 GB"));
  }
  SECTION("labels the node does not have") {
    auto r = celer::task(my_gpus).options({.label_selector = {"zone=a"}}).remote();
    REQUIRE_THAT(failure_of(r), Contains("do not match") && Contains("zone=a"));
  }
  SECTION("a malformed selector or a negative memory is refused at submission") {
    try {
      (void)celer::task(my_gpus).options({.label_selector = {"zone="}}).remote();
      FAIL("no error");
    } catch (const celer::exception& e) {
      REQUIRE(e.code() == celer::error_code::invalid_argument);
      REQUIRE_THAT(e.what(), Contains("zone=") && Contains("empty value"));
    }
    try {
      (void)celer::task(my_gpus).options({.num_gpus = 1, .gpu_memory_gb = -1}).remote();
      FAIL("no error");
    } catch (const celer::exception& e) {
      REQUIRE(e.code() == celer::error_code::invalid_argument);
      REQUIRE_THAT(e.what(), Contains("gpu_memory_gb"));
    }
  }
  // The runtime keeps working after each.
  REQUIRE(celer::get(celer::task(my_gpus).options({.num_gpus = 1}).remote(), 30s).size() == 1);
}

TEST_CASE("a task waiting for a GPU an actor holds says why and runs once the actor is gone",
          "[embedded][gpus]") {
  scoped_runtime rt({.num_cpus = 4, .gpus = "T4-16GB:1"});
  auto holder = celer::actor(make_gpu_holder).options({.num_gpus = 1}).remote();
  REQUIRE(celer::get(holder.task(&gpu_holder::ids).remote(), 30s) == std::vector<int>{0});
  REQUIRE(celer::pending_reason(holder).empty());  // alive

  auto r = celer::task(my_gpus).options({.num_gpus = 1}).remote();
  // Polled: the reason is asked of the head, nothing signals it. Each wait on the ref is
  // both the pause between polls and a check that the task has not run.
  std::string why;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    why = celer::pending_reason(r);
    if (why.find("waits for resources") != std::string::npos) break;
    REQUIRE(celer::wait(std::vector{r}, 1, 20ms).ready.empty());
  }
  INFO("pending_reason: " << why);
  REQUIRE_THAT(why, Contains("waits for resources") && Contains("GPU"));

  celer::kill(holder);
  REQUIRE(celer::get(r, 30s) == std::vector<int>{0});
  REQUIRE(celer::pending_reason(r).empty());
}

TEST_CASE("num_gpus without a declaration offers plain devices where NVML finds none",
          "[embedded][gpus]") {
  // With a driver, found devices come first and plain ones pad to the count; the indices
  // are 0 and 1 either way.
  scoped_runtime rt({.num_cpus = 4, .num_gpus = 2});
  REQUIRE(celer::cluster_resources()["GPU"] == 2);
  pair_inside = 0;
  auto a = celer::task(meet_pair).options({.num_gpus = 1}).remote();
  auto b = celer::task(meet_pair).options({.num_gpus = 1}).remote();
  const auto ga = celer::get(a, 30s);
  const auto gb = celer::get(b, 30s);
  REQUIRE(pair_inside.load() == 2);
  // Held together, the two got different devices.
  const std::set<std::vector<int>> got{ga, gb};
  REQUIRE(got == std::set<std::vector<int>>{{0}, {1}});
}

// The embedded node reports to its head on ticks, so its view (which pending_reason
// asks) knows what the node handed out itself.
TEST_CASE("a task waiting for CPUs that other tasks hold says it waits for resources",
          "[embedded][gpus]") {
  scoped_runtime rt({.num_cpus = 1, .gpus = "T4-16GB:1"});
  closed_gate gate;
  auto holder = celer::task(hold_until_released).remote(1);
  auto r = celer::task(my_gpus).options({.num_gpus = 1}).remote();
  std::string why;
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < deadline) {
    why = celer::pending_reason(r);
    if (why.find("waits for resources") != std::string::npos) break;
    REQUIRE(celer::wait(std::vector{r}, 1, 20ms).ready.empty());
  }
  INFO("pending_reason: " << why);
  CHECK_THAT(why, Contains("waits for resources"));
  release_gate = true;
  REQUIRE(celer::get(holder, 30s) == 1);
  REQUIRE(celer::get(r, 30s) == std::vector<int>{0});
}
