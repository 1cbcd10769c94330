// Actors: state, ordering, concurrency, names, kill.
#include "unit/runtime/fixtures.hpp"

#include <catch2/catch.hpp>

#include <chrono>

using namespace celer_test;
using namespace std::chrono_literals;

TEST_CASE("an actor keeps its state between calls", "[actor]") {
  scoped_runtime rt;
  auto c = celer::actor(make_counter).remote(10);
  REQUIRE(celer::get(c.task(&counter::incr).remote(5)) == 15);
  REQUIRE(celer::get(c.task(&counter::incr).remote(5)) == 20);
  REQUIRE(celer::get(c.task(&counter::read).remote()) == 20);
}

TEST_CASE("calls from one caller run in submission order, one at a time", "[actor]") {
  scoped_runtime rt;
  auto c = celer::actor(make_counter).remote(0);
  // Submitted back to back, before the actor is even constructed.
  std::vector<celer::object_ref<std::vector<int>>> refs;
  for (int i = 0; i < 200; ++i) refs.push_back(c.task(&counter::log_call).remote(i));
  auto last = celer::get(refs.back());
  REQUIRE(last.size() == 200);
  for (int i = 0; i < 200; ++i) REQUIRE(last[static_cast<std::size_t>(i)] == i);
  // Each call saw exactly the calls before it: none overlapped.
  for (int i = 0; i < 200; i += 37) {
    REQUIRE(celer::get(refs[static_cast<std::size_t>(i)]).size() == static_cast<std::size_t>(i + 1));
  }
}

TEST_CASE("an actor with max_concurrency above 1 runs calls at the same time", "[actor][embedded]") {
  scoped_runtime rt;
  closed_gate gate;
  auto r = celer::actor(make_rendezvous).options({.max_concurrency = 3}).remote();
  std::vector<celer::object_ref<int>> refs;
  for (int i = 0; i < 3; ++i) refs.push_back(r.task(&rendezvous::meet).remote(3));
  // Each call returns only once all three are inside: impossible one at a time.
  for (auto& ref : refs) REQUIRE(celer::get(ref, 30s) >= 3);
}

TEST_CASE("an actor with max_concurrency 1 never runs two calls at once", "[actor][embedded]") {
  scoped_runtime rt;
  closed_gate gate;
  auto r = celer::actor(make_rendezvous).remote();
  auto first = r.task(&rendezvous::meet).remote(2);
  auto second = r.task(&rendezvous::meet).remote(2);
  auto [ready, pending] = celer::wait(std::vector{first, second}, 1, 200ms);
  REQUIRE(ready.empty());  // the first waits for a second caller that cannot enter
  release_gate = true;
  REQUIRE(celer::get(first) == 1);   // it was alone inside
  REQUIRE(celer::get(second) == 2);
}

TEST_CASE("a named actor is found again with get_actor", "[actor]") {
  scoped_runtime rt;
  auto c = celer::actor(make_counter).options({.name = "shared"}).remote(1);
  auto again = celer::get_actor<counter>("shared");
  REQUIRE(again == c);
  REQUIRE(celer::get(again.task(&counter::incr).remote(1)) == 2);
  REQUIRE(celer::get(c.task(&counter::read).remote()) == 2);
}

TEST_CASE("get_if_exists returns the live actor of a name instead of failing", "[actor]") {
  scoped_runtime rt;
  auto first = celer::actor(make_counter).options({.name = "only-one", .get_if_exists = true}).remote(10);
  auto second = celer::actor(make_counter).options({.name = "only-one", .get_if_exists = true}).remote(99);
  CHECK(second == first);
  CHECK(celer::get(second.task(&counter::read).remote()) == 10);  // its factory ran once
  // Without it, the name is taken.
  try {
    (void)celer::actor(make_counter).options({.name = "only-one"}).remote(1);
    FAIL("a taken name should be refused");
  } catch (const celer::exception& e) {
    CHECK(e.code() == celer::error_code::already_exists);
  }
  // Of another class: not this actor.
  CHECK_THROWS_WITH(
    celer::actor(make_rendezvous).options({.name = "only-one", .get_if_exists = true}).remote(),
    Catch::Contains("not of the requested type"));
  CHECK_THROWS_WITH(celer::actor(make_counter).options({.get_if_exists = true}).remote(1),
                    Catch::Contains("get_if_exists needs a name"));
  // Once it is gone, the next asks make a new one.
  celer::kill(first);
  auto third = celer::actor(make_counter).options({.name = "only-one", .get_if_exists = true}).remote(3);
  CHECK_FALSE(third == first);
  CHECK(celer::get(third.task(&counter::read).remote()) == 3);
}

TEST_CASE("a namespace named in the call holds the name for that actor only", "[actor][namespace]") {
  scoped_runtime rt;
  auto a = celer::actor(make_counter).options({.name = "ns-counter", .name_space = "ns-test-a"}).remote(1);
  // The same name in another namespace is another actor; neither is in the job's own.
  auto b = celer::actor(make_counter).options({.name = "ns-counter", .name_space = "ns-test-b"}).remote(2);
  CHECK(celer::get(celer::get_actor<counter>("ns-counter", "ns-test-a").task(&counter::read).remote()) == 1);
  CHECK(celer::get(celer::get_actor<counter>("ns-counter", "ns-test-b").task(&counter::read).remote()) == 2);
  CHECK_THROWS_WITH(celer::get_actor<counter>("ns-counter"), Catch::Contains("no live actor is named 'ns-counter'"));
  CHECK_THROWS_WITH(celer::get_actor<counter>("ns-counter", "ns-test-c"), Catch::Contains("in namespace 'ns-test-c'"));
  // Named in the call, the namespace did not become the job's default: a name in the job's
  // own namespace is still free.
  auto own = celer::actor(make_counter).options({.name = "ns-counter"}).remote(3);
  CHECK(celer::get(celer::get_actor<counter>("ns-counter").task(&counter::read).remote()) == 3);
  try {
    (void)celer::actor(make_counter).options({.name = "ns-counter", .name_space = "ns-test-a"}).remote(4);
    FAIL("a taken name should be refused");
  } catch (const celer::exception& e) {
    CHECK(e.code() == celer::error_code::already_exists);
    CHECK_THAT(std::string(e.what()), Catch::Contains("in namespace 'ns-test-a'"));
  }
  // get_if_exists looks in the namespace named.
  auto again = celer::actor(make_counter)
                 .options({.name = "ns-counter", .name_space = "ns-test-b", .get_if_exists = true})
                 .remote(9);
  CHECK(again == b);
  CHECK_THROWS_WITH(celer::actor(make_counter).options({.name_space = "ns-test-a"}).remote(1),
                    Catch::Contains("no name to put in it"));
  celer::kill(a);
  celer::kill(b);
  celer::kill(own);
  CHECK_THROWS_AS(celer::get_actor<counter>("ns-counter", "ns-test-a"), celer::exception);
}

TEST_CASE("an actor handle passed to a task calls the same actor", "[actor][nested]") {
  scoped_runtime rt;
  auto c = celer::actor(make_counter).remote(100);
  REQUIRE(celer::get(c.task(&counter::add_via_task).remote(5)) == 105);
}

TEST_CASE("a killed actor fails later calls with actor_died_error", "[actor][errors]") {
  scoped_runtime rt;
  auto c = celer::actor(make_counter).options({.name = "doomed"}).remote(0);
  REQUIRE(celer::get(c.task(&counter::incr).remote(1)) == 1);
  celer::kill(c);
  REQUIRE_THROWS_AS(celer::get(c.task(&counter::incr).remote(1)), celer::actor_died_error);
  // Its name is free again.
  REQUIRE_THROWS_AS(celer::get_actor<counter>("doomed"), celer::exception);
  auto next = celer::actor(make_counter).options({.name = "doomed"}).remote(7);
  REQUIRE(celer::get(next.task(&counter::read).remote()) == 7);
}

TEST_CASE("killing an actor returns its resources to the node", "[actor][resources][embedded]") {
  scoped_runtime rt;
  auto c = celer::actor(make_counter).options({.num_cpus = 2}).remote(0);
  REQUIRE(celer::get(c.task(&counter::incr).remote(1)) == 1);
  REQUIRE(celer::available_resources()["CPU"] == 0);
  celer::kill(c);
  // The 2-CPU task below can only run once the actor's CPUs are back.
  REQUIRE(celer::get(celer::task(add).options({.num_cpus = 2}).remote(1, 1), 30s) == 2);
}
