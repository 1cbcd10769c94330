// Priorities and preemption in an embedded runtime: which actors a higher-priority request
// stops (lowest priority first, then the newest; only those that opted in; never for equal
// or lower priority), the on_preempt callback with its deadline, the error their handles
// then raise, and a long call that polls preemption_notice. (Across processes, where the
// grace is enforced by killing the worker: tests/integration/scheduling_test.cpp.)
#include "unit/runtime/fixtures.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

using namespace celer_test;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

/// What the preemption callbacks of this process saw (embedded actors share the process).
struct notices {
  std::mutex mutex;
  std::vector<std::string> names;
  std::vector<std::int64_t> ms_left;
  std::vector<std::string> reasons;
};
notices& seen() {
  static notices n;
  return n;
}
void forget_notices() {
  auto& n = seen();
  std::lock_guard lock(n.mutex);
  n.names.clear();
  n.ms_left.clear();
  n.reasons.clear();
}
std::vector<std::string> noticed() {
  auto& n = seen();
  std::lock_guard lock(n.mutex);
  return n.names;
}

/// A tuning trial: holds a GPU, and notes its preemption (its "checkpoint").
struct trial {
  explicit trial(std::string name) : name_(std::move(name)) {
    celer::on_preempt([name = name_](const celer::preemption& p) {
      auto& n = seen();
      std::lock_guard lock(n.mutex);
      n.names.push_back(name);
      n.ms_left.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(
                            p.deadline - std::chrono::steady_clock::now())
                            .count());
      n.reasons.push_back(p.reason);
    });
  }
  std::vector<int> gpus() const { return celer::gpu_ids(); }
  /// Runs until preempted (polling the notice) or `max_ms`; whether it was told.
  bool train(int max_ms) const {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(max_ms);
    while (std::chrono::steady_clock::now() < end) {
      if (celer::preemption_notice()) return true;
      std::this_thread::sleep_for(2ms);
    }
    return false;
  }
  std::string name_;
};
trial* make_trial(std::string name) { return new trial(std::move(name)); }

std::vector<int> task_gpus() { return celer::gpu_ids(); }

/// Outside an actor, on_preempt is an error.
int register_outside_actor() {
  celer::on_preempt([](const celer::preemption&) {});
  return 0;
}

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
           std::chrono::steady_clock::now().time_since_epoch())
    .count();
}

/// When it started and ended (embedded workers share this process's clock).
std::pair<std::int64_t, std::int64_t> timed_run(int ms) {
  const auto start = steady_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return {start, steady_ns()};
}

/// A trial whose checkpoint takes `ms`.
struct slow_trial {
  explicit slow_trial(int ms) {
    celer::on_preempt([ms](const celer::preemption&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    });
  }
  int ping() const { return 1; }
};
slow_trial* make_slow_trial(int ms) { return new slow_trial(ms); }

CELER_REMOTE(make_trial, &trial::gpus, &trial::train, task_gpus, register_outside_actor, timed_run,
             make_slow_trial, &slow_trial::ping);

using trial_handle = celer::actor_handle<trial>;

/// A trial holding one GPU, started (its first call answered).
trial_handle start_trial(const std::string& name, int priority, bool preemptible,
                         std::chrono::milliseconds grace = 5s) {
  auto t = celer::actor(make_trial)
             .options({.num_gpus = 1, .priority = priority, .preemptible = preemptible,
                       .preemption_grace = grace})
             .remote(name);
  REQUIRE(celer::get(t.task(&trial::gpus).remote(), 30s).size() == 1);
  return t;
}

/// The message of the actor_preempted_error a call on `t` raises; fails the test if none.
std::string preempted_error(const trial_handle& t) {
  try {
    (void)celer::get(t.task(&trial::gpus).remote(), 30s);
  } catch (const celer::actor_preempted_error& e) {
    return e.what();
  }
  FAIL("the call did not raise actor_preempted_error");
  return {};
}

bool answers(const trial_handle& t) {
  return celer::get(t.task(&trial::gpus).remote(), 30s).size() == 1;
}

} // namespace

TEST_CASE("preemption stops the lowest priority first, then the newest, and tells each",
          "[embedded][preemption]") {
  scoped_runtime rt({.num_cpus = 8, .gpus = "A100-80GB:4"});
  forget_notices();
  auto keep = start_trial("keep", -5, false);  // lowest, but did not opt in
  auto x = start_trial("x", -1, true);
  auto z = start_trial("z", -1, true);  // same priority as x, started later
  auto y = start_trial("y", 0, true);   // started last, but of higher priority

  // Each high-priority actor needs one GPU; none is free.
  auto h1 = start_trial("h1", 5, false);
  REQUIRE(noticed() == std::vector<std::string>{"z"});
  REQUIRE_THAT(preempted_error(z), Contains("preempted") && Contains("make_trial") &&
                                     Contains("priority 5") && Contains("priority -1"));
  auto h2 = start_trial("h2", 5, false);
  REQUIRE(noticed() == std::vector<std::string>{"z", "x"});
  auto h3 = start_trial("h3", 5, false);
  REQUIRE(noticed() == std::vector<std::string>{"z", "x", "y"});
  CHECK_THAT(preempted_error(x), Contains("preempted"));
  CHECK_THAT(preempted_error(y), Contains("preempted"));
  // The devices went to the new actors; the one that did not opt in still runs.
  std::set<int> devices;
  for (const auto* h : {&h1, &h2, &h3, &keep}) {
    const auto g = celer::get(h->task(&trial::gpus).remote(), 30s);
    REQUIRE(g.size() == 1);
    devices.insert(g[0]);
  }
  CHECK(devices == std::set<int>{0, 1, 2, 3});

  // Each callback ran before its deadline, which is the grace (5 s) from the notice.
  {
    auto& n = seen();
    std::lock_guard lock(n.mutex);
    for (std::size_t i = 0; i < n.ms_left.size(); ++i) {
      INFO(n.names[i] << ": " << n.ms_left[i] << " ms left; " << n.reasons[i]);
      CHECK(n.ms_left[i] > 0);
      CHECK(n.ms_left[i] <= 5000);
      CHECK_THAT(n.reasons[i], Contains("priority 5"));
    }
  }

  // Nothing preemptible is left: a fourth waits, and says why; it runs once one is gone.
  auto h4 = celer::actor(make_trial).options({.num_gpus = 1, .priority = 5}).remote("h4");
  auto h4_gpus = h4.task(&trial::gpus).remote();
  REQUIRE(celer::wait(std::vector{h4_gpus}, 1, 300ms).ready.empty());
  CHECK(noticed().size() == 3);
  CHECK_THAT(celer::pending_reason(h4), Contains("GPU"));
  celer::kill(h3);
  REQUIRE(celer::get(h4_gpus, 30s).size() == 1);
  CHECK(answers(keep));
}

TEST_CASE("equal or lower priority never preempts, nor does anything preempt an actor that "
          "did not opt in",
          "[embedded][preemption]") {
  scoped_runtime rt({.num_cpus = 8, .gpus = "A100-80GB:2"});
  forget_notices();
  auto a = start_trial("a", 3, true);
  auto b = start_trial("b", 0, false);
  // Equal priority to a, and higher than b's (which did not opt in): both wait.
  auto same = celer::task(task_gpus).options({.num_gpus = 1, .priority = 3}).remote();
  auto lower = celer::task(task_gpus).options({.num_gpus = 1, .priority = 1}).remote();
  REQUIRE(celer::wait(std::vector{same, lower}, 1, 500ms).ready.empty());
  CHECK(noticed().empty());
  CHECK(answers(a));
  CHECK(answers(b));
  // A task of higher priority does preempt a, and the waiting ones run in priority order
  // as GPUs free up (the first takes a's device).
  auto higher = celer::task(task_gpus).options({.num_gpus = 1, .priority = 4}).remote();
  REQUIRE(celer::get(higher, 30s).size() == 1);
  CHECK(noticed() == std::vector<std::string>{"a"});
  CHECK_THAT(preempted_error(a), Contains("task task_gpus") && Contains("priority 4"));
  REQUIRE(celer::get(same, 30s).size() == 1);
  REQUIRE(celer::get(lower, 30s).size() == 1);
  CHECK(answers(b));
}

TEST_CASE("a long call sees the preemption notice and can return early", "[embedded][preemption]") {
  scoped_runtime rt({.num_cpus = 4, .gpus = "T4-16GB:1"});
  forget_notices();
  auto t = start_trial("long", 0, true, 10s);
  auto run = t.task(&trial::train).remote(60'000);
  // Inside the call, before anything preempts it.
  std::this_thread::sleep_for(100ms);
  auto high = celer::task(task_gpus).options({.num_gpus = 1, .priority = 1}).remote();
  // The call returns early (told) or fails as preempted; either way well before 60 s, and
  // the high-priority task gets the device.
  bool told = false;
  try {
    told = celer::get(run, 30s);
  } catch (const celer::actor_preempted_error&) {
    told = true;
  }
  CHECK(told);
  REQUIRE(celer::get(high, 30s) == std::vector<int>{0});
  CHECK(noticed() == std::vector<std::string>{"long"});
}

TEST_CASE("on_preempt outside an actor is an error; the job's priority is the default",
          "[embedded][preemption]") {
  SECTION("outside an actor") {
    scoped_runtime rt({.num_cpus = 2});
    REQUIRE_THROWS_AS(celer::on_preempt([](const celer::preemption&) {}), celer::exception);
    REQUIRE_THROWS_AS(celer::get(celer::task(register_outside_actor).remote(), 30s),
                      celer::task_error);
    CHECK_FALSE(celer::preemption_notice().has_value());
  }
  SECTION("work of a job with a higher priority preempts") {
    scoped_runtime rt({.num_cpus = 4, .gpus = "T4-16GB:1", .priority = 2});
    forget_notices();
    auto low = start_trial("low", 1, true);
    // No priority in its options: the job's (2) is above the trial's (1).
    REQUIRE(celer::get(celer::task(task_gpus).options({.num_gpus = 1}).remote(), 30s) ==
            std::vector<int>{0});
    CHECK(noticed() == std::vector<std::string>{"low"});
    CHECK_THAT(preempted_error(low), Contains("priority 2"));
  }
}

TEST_CASE("the room a preemption makes is held for its request, not taken by lower priorities",
          "[embedded][preemption]") {
  scoped_runtime rt({.num_cpus = 4, .gpus = "T4-16GB:1"});
  // The victim holds 2 CPUs and the GPU; its checkpoint takes 500 ms.
  auto victim = celer::actor(make_slow_trial)
                  .options({.num_cpus = 2, .num_gpus = 1, .priority = 0, .preemptible = true})
                  .remote(500);
  REQUIRE(celer::get(victim.task(&slow_trial::ping).remote(), 30s) == 1);
  // The request needs the whole node; a task of lower priority that would fit in the two
  // free CPUs now must not take them meanwhile.
  auto high = celer::task(timed_run).options({.num_cpus = 4, .num_gpus = 1, .priority = 5}).remote(200);
  std::this_thread::sleep_for(50ms);  // the preemption is under way
  auto low = celer::task(timed_run).options({.num_cpus = 2, .priority = -1}).remote(10);
  const auto [high_start, high_end] = celer::get(high, 30s);
  const auto [low_start, low_end] = celer::get(low, 30s);
  CHECK(low_start >= high_end);  // it ran after, not in the room held for `high`
  (void)high_start;
  (void)low_end;
}
