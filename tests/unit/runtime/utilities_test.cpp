// The utilities over the core API: celer::as_completed, celer::actor_pool and celer::queue.
// Embedded, and against a local cluster in the suite's pass there (tests/CMakeLists.txt).
#include "unit/runtime/fixtures.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

using namespace celer_test;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

/// Takes one item from the queue (waiting up to 60 s) and returns it.
int take_one(celer::queue<int> q) { return q.get(60s); }

/// Puts 0..n-1 into the queue, in order, waiting while it is full; returns n.
int produce_items(celer::queue<int> q, int n) {
  for (int i = 0; i < n; ++i) q.put(i, 60s);
  return n;
}

struct squarer {
  int calls = 0;
  int square(int x) {
    ++calls;
    if (x < 0) throw std::invalid_argument("negative input " + std::to_string(x));
    return x * x;
  }
  /// Which actor ran the call (its first argument) and how many calls it had.
  std::pair<int, int> tagged(int tag) { return {tag, ++calls}; }
  int calls_so_far() const { return calls; }
};
squarer* make_squarer() { return new squarer; }

/// Waits for a queue item inside an actor: a call of an actor blocked in get.
struct consumer {
  celer::queue<int> q;
  explicit consumer(celer::queue<int> queue) : q(std::move(queue)) {}
  int take() { return q.get(60s); }
};
consumer* make_consumer(celer::queue<int> q) { return new consumer(std::move(q)); }

CELER_REMOTE(take_one, produce_items, make_squarer, &squarer::square, &squarer::tagged, &squarer::calls_so_far,
             make_consumer, &consumer::take);

std::vector<celer::actor_handle<squarer>> squarers(int n) {
  std::vector<celer::actor_handle<squarer>> out;
  for (int i = 0; i < n; ++i) out.push_back(celer::actor(make_squarer).remote());
  return out;
}

} // namespace

// ---------------------------------------------------------------- as_completed

TEST_CASE("as_completed yields each ref once, the ready one before the one still waiting",
          "[utilities][as_completed]") {
  scoped_runtime rt;
  auto q = celer::make_queue<int>();
  auto waiting = celer::task(take_one).remote(q);  // returns once the loop below puts
  auto ready = celer::task(add).remote(1, 2);
  std::vector<celer::object_ref<int>> order;
  for (const auto& r : celer::as_completed(std::vector{waiting, ready}, 60s)) {
    order.push_back(r);
    if (order.size() == 1) q.put(7);
  }
  REQUIRE(order.size() == 2);
  CHECK(order[0] == ready);
  CHECK(order[1] == waiting);
  CHECK(celer::get(order[0]) == 3);
  CHECK(celer::get(order[1]) == 7);
}

TEST_CASE("as_completed of many refs yields them all, and of none yields nothing", "[utilities][as_completed]") {
  scoped_runtime rt;
  std::vector<celer::object_ref<int>> refs;
  for (int i = 0; i < 30; ++i) refs.push_back(celer::task(twice).remote(i));
  std::multiset<int> got;
  for (const auto& r : celer::as_completed(refs)) got.insert(celer::get(r));
  std::multiset<int> want;
  for (int i = 0; i < 30; ++i) want.insert(2 * i);
  CHECK(got == want);
  int none = 0;
  for (const auto& r : celer::as_completed(std::vector<celer::object_ref<int>>{})) {
    (void)r;
    ++none;
  }
  CHECK(none == 0);
}

TEST_CASE("as_completed throws get_timeout_error when its timeout passes", "[utilities][as_completed]") {
  scoped_runtime rt;
  auto q = celer::make_queue<int>();
  auto waiting = celer::task(take_one).remote(q);
  auto ready = celer::put(5);
  int yielded = 0;
  REQUIRE_THROWS_AS(
    [&] {
      for (const auto& r : celer::as_completed(std::vector{waiting, ready}, 200ms)) {
        CHECK(r == ready);
        ++yielded;
      }
    }(),
    celer::get_timeout_error);
  CHECK(yielded == 1);
  q.put(1);  // lets the task end
  CHECK(celer::get(waiting, 60s) == 1);
}

// ---------------------------------------------------------------- actor_pool

TEST_CASE("an actor pool's map returns results in input order, map_unordered all of them",
          "[utilities][actor_pool]") {
  scoped_runtime rt;
  celer::actor_pool pool(squarers(3));
  std::vector<int> inputs;
  for (int i = 0; i < 20; ++i) inputs.push_back(i);
  const std::vector<int> squares = pool.map(&squarer::square, inputs);
  REQUIRE(squares.size() == inputs.size());
  for (int i = 0; i < 20; ++i) CHECK(squares[static_cast<std::size_t>(i)] == i * i);

  auto unordered = pool.map_unordered(
    [](const celer::actor_handle<squarer>& a, int x) { return a.task(&squarer::square).remote(x); }, inputs);
  std::sort(unordered.begin(), unordered.end());
  CHECK(unordered == squares);
  CHECK_FALSE(pool.has_next());
  CHECK(pool.has_free());
}

TEST_CASE("an actor pool reuses each actor as its calls finish, one call at a time",
          "[utilities][actor_pool]") {
  scoped_runtime rt;
  const auto actors = squarers(2);
  celer::actor_pool pool(actors);
  // Each submission tags the call with its actor's index.
  for (int i = 0; i < 10; ++i) {
    pool.submit(
      [&](const celer::actor_handle<squarer>& a, int) {
        const int tag = a == actors[0] ? 0 : 1;
        return a.task(&squarer::tagged).remote(tag);
      },
      i);
  }
  CHECK_FALSE(pool.has_free());
  std::map<int, int> last_count;
  int taken = 0;
  while (pool.has_next()) {
    const auto [tag, count] = pool.get_next<std::pair<int, int>>(60s);
    // One call at a time per actor, in the order given: its counts go up by one.
    CHECK(count == last_count[tag] + 1);
    last_count[tag] = count;
    ++taken;
  }
  CHECK(taken == 10);
  CHECK(last_count[0] + last_count[1] == 10);
  CHECK(last_count[0] > 0);
  CHECK(last_count[1] > 0);
  CHECK(celer::get(actors[0].task(&squarer::calls_so_far).remote()) == last_count[0]);
  REQUIRE_THROWS_AS(pool.get_next<int>(), celer::exception);  // nothing left
}

TEST_CASE("a failed call throws from get_next and its actor goes back to the pool", "[utilities][actor_pool]") {
  scoped_runtime rt;
  celer::actor_pool pool(squarers(1));
  pool.submit(&squarer::square, -3);
  pool.submit(&squarer::square, 4);
  REQUIRE_THROWS_WITH(pool.get_next<int>(), Contains("negative input -3"));
  CHECK(pool.get_next<int>() == 16);
  CHECK(pool.map(&squarer::square, std::vector<int>{5, 6}) == std::vector<int>{25, 36});
  auto only = pool.pop_idle();
  CHECK(only.valid());
  CHECK_FALSE(pool.has_free());
  REQUIRE_THROWS_AS(celer::actor_pool<squarer>({}), celer::exception);
}

// ---------------------------------------------------------------- queue

TEST_CASE("a queue hands items out in the order they went in, across processes", "[utilities][queue]") {
  scoped_runtime rt;
  celer::queue<int> q({.maxsize = 5});
  CHECK(q.valid());
  CHECK(q.empty());
  // A task fills it past its size: it waits for room as the driver takes items.
  auto producer = celer::task(produce_items).remote(q, 50);
  for (int i = 0; i < 50; ++i) REQUIRE(q.get(60s) == i);
  CHECK(celer::get(producer) == 50);
  CHECK(q.empty());
  CHECK(q.size() == 0);
}

TEST_CASE("a queue's bounds: put_nowait on a full queue and get_nowait on an empty one throw",
          "[utilities][queue]") {
  scoped_runtime rt;
  celer::queue<std::string> q({.maxsize = 2});
  q.put_nowait("a");
  q.put("b", 5s);
  CHECK(q.full());
  CHECK(q.size() == 2);
  try {
    q.put_nowait("c");
    FAIL("put_nowait on a full queue returned");
  } catch (const celer::queue_full_error& e) {
    CHECK(e.code() == celer::error_code::resource_exhausted);
  }
  try {
    q.put("c", 100ms);
    FAIL("put on a full queue returned before its timeout");
  } catch (const celer::queue_full_error& e) {
    CHECK(e.code() == celer::error_code::deadline_exceeded);
  }
  CHECK(q.get_nowait() == "a");
  CHECK(q.get() == "b");
  try {
    (void)q.get_nowait();
    FAIL("get_nowait on an empty queue returned");
  } catch (const celer::queue_empty_error& e) {
    CHECK(e.code() == celer::error_code::not_found);
  }
  REQUIRE_THROWS_AS(q.get(100ms), celer::queue_empty_error);
  CHECK(q.maxsize() == 2);
}

TEST_CASE("a get waiting in an actor is woken by a put from the driver", "[utilities][queue]") {
  scoped_runtime rt;
  auto q = celer::make_queue<int>();
  auto c = celer::actor(make_consumer).remote(q);
  auto taken = c.task(&consumer::take).remote();  // waits: the queue is empty
  auto also = celer::task(take_one).remote(q);
  // Both wait on the queue's actor at once; the puts get in beside them.
  q.put(11);
  q.put(12);
  std::multiset<int> got{celer::get(taken, 60s), celer::get(also, 60s)};
  CHECK(got == std::multiset<int>{11, 12});
}

TEST_CASE("a shut-down queue fails its calls with actor_died_error", "[utilities][queue]") {
  scoped_runtime rt;
  auto q = celer::make_queue<int>();
  q.put(1);
  q.shutdown();
  // This process fails its calls at once (celer::kill); others hear it from the head.
  REQUIRE_THROWS_AS(q.size(), celer::actor_died_error);
  REQUIRE_THROWS_WITH(q.get_nowait(), Contains("killed"));
  CHECK_FALSE(celer::queue<int>().valid());
}
