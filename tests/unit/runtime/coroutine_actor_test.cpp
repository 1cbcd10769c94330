// Coroutine actors (<celer/future.hpp>): a method returning celer::future<T> parks at each
// co_await whose value is not there, and the actor's thread runs other calls meanwhile.
// Embedded and (the suite's pass against a local cluster) on a cluster: the parked calls,
// the gate they wait on and the counts the test reads are real actors' state in either mode.
#include "unit/runtime/fixtures.hpp"

#include <catch2/catch.hpp>

#include <celer/future.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

using namespace celer_test;
using Catch::Matchers::Contains;

namespace {

/// A plain actor (two threads) whose wait() returns only once open(v) was called: a ref the
/// test makes ready when it chooses.
struct gatekeeper {
  std::mutex m;
  std::condition_variable cv;
  std::optional<int> value;
  int wait() {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return value.has_value(); });
    return *value;
  }
  bool open(int v) {
    {
      std::lock_guard lock(m);
      value = v;
    }
    cv.notify_all();
    return true;
  }
};
gatekeeper* make_gatekeeper() { return new gatekeeper; }

struct adder {
  int add(int a, int b) { return a + b; }
  int fail(int) { throw std::invalid_argument("no such row"); }
};
adder* make_adder() { return new adder; }

/// The coroutine actor. Its state is touched by its one thread only: no lock.
struct waiter {
  int inside = 0;
  int most_inside = 0;
  int finished = 0;

  /// Parks until `gate` holds its value, then adds `i`.
  celer::future<int> wait_on(celer::object_ref<int> gate, int i) {
    ++inside;
    most_inside = std::max(most_inside, inside);
    struct leaving {
      int& inside;
      ~leaving() { --inside; }
    } left{inside};  // also when its co_await throws (a cancel)
    const int v = co_await gate;
    ++finished;
    co_return v + i;
  }
  /// Calls another actor twice, the second time through a helper coroutine of its own.
  celer::future<int> twice_through(celer::actor_handle<adder> a, int x) {
    const int y = co_await a.task(&adder::add).remote(x, 1);
    co_return co_await doubled(a, y);
  }
  celer::future<int> doubled(celer::actor_handle<adder> a, int y) { co_return co_await a.task(&adder::add).remote(y, y); }
  /// The error of what it awaits, caught inside the coroutine.
  celer::future<std::string> catches(celer::actor_handle<adder> a) {
    try {
      (void)co_await a.task(&adder::fail).remote(1);
      co_return std::string("no error");
    } catch (const celer::task_error& e) {
      co_return std::string("caught: ") + e.what();
    }
  }
  /// ... and not caught: the call fails with it.
  celer::future<int> lets_through(celer::actor_handle<adder> a) { co_return co_await a.task(&adder::fail).remote(2); }
  /// Two returns, each its own object.
  celer::future<std::tuple<int, std::string>> pair_of(celer::object_ref<int> r) {
    const int v = co_await r;
    co_return std::make_tuple(v, std::to_string(v));
  }
  /// Nothing to return; what it awaited is counted.
  celer::future<void> touch(celer::object_ref<int> r) {
    finished += co_await r;
    co_return;
  }
  int inside_now() const { return inside; }
  int most_at_once() const { return most_inside; }
  int finished_calls() const { return finished; }
  /// No state: calls of it may resume on several threads at once.
  celer::future<int> after(celer::object_ref<int> gate, int i) { co_return co_await gate + i; }
};
waiter* make_waiter() { return new waiter; }

CELER_REMOTE(make_gatekeeper, &gatekeeper::wait, &gatekeeper::open, make_adder, &adder::add, &adder::fail,
             make_waiter, &waiter::wait_on, &waiter::twice_through, &waiter::catches, &waiter::lets_through,
             &waiter::pair_of, &waiter::touch, &waiter::inside_now, &waiter::most_at_once, &waiter::finished_calls,
             &waiter::after);

celer::future<int> plus_one(celer::object_ref<int> r) { co_return co_await r + 1; }

} // namespace

TEST_CASE("thousands of calls park on one actor's thread, which answers other calls meanwhile",
          "[api][actor][coroutine]") {
  scoped_runtime rt;
  auto keeper = celer::actor(make_gatekeeper).options({.max_concurrency = 2}).remote();
  auto w = celer::actor(make_waiter).remote();
  auto gate = keeper.task(&gatekeeper::wait).remote();
  constexpr int calls = 3000;
  std::vector<celer::object_ref<int>> out;
  out.reserve(calls);
  for (int i = 0; i < calls; ++i) out.push_back(w.task(&waiter::wait_on).remote(gate, i));
  // The actor has one thread: each call ran to its co_await and parked, and this call,
  // sent after them, ran after them all, on that thread.
  CHECK(celer::get(w.task(&waiter::inside_now).remote()) == calls);
  CHECK(celer::get(w.task(&waiter::finished_calls).remote()) == 0);
  CHECK(celer::get(keeper.task(&gatekeeper::open).remote(1000)));
  const auto values = celer::get(out);
  for (int i = 0; i < calls; ++i) REQUIRE(values[static_cast<std::size_t>(i)] == 1000 + i);
  CHECK(celer::get(w.task(&waiter::inside_now).remote()) == 0);
  CHECK(celer::get(w.task(&waiter::most_at_once).remote()) == calls);
  CHECK(celer::get(w.task(&waiter::finished_calls).remote()) == calls);
}

TEST_CASE("a coroutine method awaits other actors' calls, its own helper coroutines, and their errors",
          "[api][actor][coroutine]") {
  scoped_runtime rt;
  auto a = celer::actor(make_adder).remote();
  auto w = celer::actor(make_waiter).remote();
  CHECK(celer::get(w.task(&waiter::twice_through).remote(a, 4)) == 10);  // (4 + 1) * 2
  CHECK_THAT(celer::get(w.task(&waiter::catches).remote(a)),
             Contains("caught: ") && Contains("no such row") && Contains("std::invalid_argument"));
  auto through = w.task(&waiter::lets_through).remote(a);
  CHECK_THROWS_AS(celer::get(through), celer::task_error);
  CHECK_THROWS_WITH(celer::get(through), Contains("no such row"));
  // Two returns, each its own ref; and one returning nothing.
  auto [n, text] = w.task(&waiter::pair_of).remote(celer::put(7));
  CHECK(celer::get(n) == 7);
  CHECK(celer::get(text) == "7");
  celer::get(w.task(&waiter::touch).remote(celer::put(5)));
  CHECK(celer::get(w.task(&waiter::finished_calls).remote()) == 5);
}

TEST_CASE("a parked call cancelled goes on at once and fails as cancelled; the actor lives on",
          "[api][actor][coroutine][cancel]") {
  scoped_runtime rt;
  auto keeper = celer::actor(make_gatekeeper).options({.max_concurrency = 2}).remote();
  auto w = celer::actor(make_waiter).remote();
  auto gate = keeper.task(&gatekeeper::wait).remote();
  auto parked = w.task(&waiter::wait_on).remote(gate, 1);
  auto other = w.task(&waiter::wait_on).remote(gate, 2);
  CHECK(celer::get(w.task(&waiter::inside_now).remote()) == 2);
  CHECK(celer::cancel(parked));
  CHECK_THROWS_AS(celer::get(parked), celer::task_cancelled_error);
  // It leaves its co_await (the gate still shut) as soon as the cancel reaches the actor;
  // the other waits on.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  int inside = 2;
  while ((inside = celer::get(w.task(&waiter::inside_now).remote())) == 2 && std::chrono::steady_clock::now() < until) {
  }
  CHECK(inside == 1);
  CHECK(celer::get(keeper.task(&gatekeeper::open).remote(10)));
  CHECK(celer::get(other) == 12);
  CHECK(celer::get(w.task(&waiter::finished_calls).remote()) == 1);
}

TEST_CASE("a killed coroutine actor's parked calls fail as its calls do", "[api][actor][coroutine]") {
  scoped_runtime rt;
  auto keeper = celer::actor(make_gatekeeper).options({.max_concurrency = 2}).remote();
  auto w = celer::actor(make_waiter).remote();
  auto gate = keeper.task(&gatekeeper::wait).remote();
  auto parked = w.task(&waiter::wait_on).remote(gate, 1);
  CHECK(celer::get(w.task(&waiter::inside_now).remote()) == 1);
  celer::kill(w);
  CHECK_THROWS_AS(celer::get(parked, std::chrono::seconds(60)), celer::actor_died_error);
  CHECK(celer::get(keeper.task(&gatekeeper::open).remote(1)));  // its value fills no one now
}

TEST_CASE("coroutine calls of an actor with max_concurrency resume on its pool", "[api][actor][coroutine]") {
  scoped_runtime rt;
  auto keeper = celer::actor(make_gatekeeper).options({.max_concurrency = 2}).remote();
  auto w = celer::actor(make_waiter).options({.max_concurrency = 1, .concurrency_groups = {{"io", 1}}}).remote();
  auto gate = keeper.task(&gatekeeper::wait).remote();
  std::vector<celer::object_ref<int>> out;
  for (int i = 0; i < 100; ++i) {
    out.push_back(w.task(&waiter::after).options({.concurrency_group = i % 2 == 0 ? "io" : ""}).remote(gate, i));
  }
  CHECK(celer::get(keeper.task(&gatekeeper::open).remote(1)));
  const auto values = celer::get(out);
  for (int i = 0; i < 100; ++i) CHECK(values[static_cast<std::size_t>(i)] == 1 + i);
}

TEST_CASE("a coroutine called locally runs to its end with get, each co_await waiting in place",
          "[api][coroutine]") {
  scoped_runtime rt;
  CHECK(plus_one(celer::put(41)).get() == 42);
  waiter local;
  auto f = local.wait_on(celer::put(2), 3);
  CHECK(f.get() == 5);
  CHECK(local.finished == 1);
}
