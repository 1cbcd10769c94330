// Detached actors (actor_options::lifetime): named in a shared namespace, run as that
// namespace's job, found by name, killed by celer::kill. Embedded and (the suite's pass
// against a local cluster) on a cluster, where its calls cross jobs: values only, inline
// both ways. That one outlives its driver is tests/integration/detached_test.cpp's (it takes
// several driver processes).
#include "unit/runtime/fixtures.hpp"

#include <celer/celer.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

using namespace celer_test;
using Catch::Matchers::Contains;
using namespace std::chrono_literals;

namespace {

bool on_a_cluster() { return std::getenv("CELER_ADDRESS") != nullptr; }

struct tally {
  int value = 0;
  int add(int n) { return value += n; }
  std::string job() const { return celer::get_runtime_context().job.hex(); }
  std::string echo(std::string s) const { return s; }
};
tally* make_tally(int start) { return new tally{start}; }

CELER_REMOTE(make_tally, &tally::add, &tally::job, &tally::echo);

/// A namespace of this test run's own (a cluster outlives one run of the suite).
std::string fresh_namespace() { return "detached-test-" + celer::actor_id::random().hex().substr(0, 8); }

} // namespace

TEST_CASE("a detached actor runs as its namespace's job, is found by name there, and ends when killed",
          "[api][actor][detached]") {
  scoped_runtime rt;
  const std::string ns = fresh_namespace();
  auto t = celer::actor(make_tally)
             .options({.name = "tally", .name_space = ns, .lifetime = celer::lifetime::detached})
             .remote(1);
  CHECK(celer::get(t.task(&tally::add).remote(2), 60s) == 3);
  // On a cluster, not the driver's job: no job's end stops it. (Embedded, the runtime
  // context names the running runtime for every actor.)
  if (on_a_cluster()) {
    CHECK(celer::get(t.task(&tally::job).remote(), 60s) != celer::get_runtime_context().job.hex());
  }
  auto found = celer::get_actor<tally>("tally", ns);
  CHECK(celer::get(found.task(&tally::add).remote(4), 60s) == 7);
  // Its name is taken in the namespace, by detached and plain actors alike.
  CHECK_THROWS_WITH(celer::actor(make_tally).options({.name = "tally", .name_space = ns}).remote(0),
                    Contains("already exists"));
  // Values larger than the inline limit travel both ways (inline, across jobs on a cluster).
  const std::string big(300000, 'z');
  CHECK(celer::get(found.task(&tally::echo).remote(big), 60s) == big);
  if (on_a_cluster()) {
    // No store is shared between jobs: an object ref is refused, at once, with why.
    CHECK_THROWS_WITH(found.task(&tally::echo).remote(celer::put(std::string("x"))),
                      Contains("object ref") && Contains("another job"));
  }
  celer::kill(found);
  const auto until = std::chrono::steady_clock::now() + 30s;
  bool gone = false;
  while (!gone && std::chrono::steady_clock::now() < until) {
    try {
      (void)celer::get_actor<tally>("tally", ns);
      std::this_thread::sleep_for(20ms);
    } catch (const celer::exception& e) {
      gone = e.code() == celer::error_code::not_found;
    }
  }
  CHECK(gone);
}

TEST_CASE("a detached actor needs a name in a shared namespace", "[api][actor][detached]") {
  scoped_runtime rt;
  CHECK_THROWS_WITH(celer::actor(make_tally).options({.lifetime = celer::lifetime::detached}).remote(0),
                    Contains("needs a name"));
  if (std::getenv("CELER_NAMESPACE") == nullptr) {
    CHECK_THROWS_WITH(
      celer::actor(make_tally).options({.name = "solo", .lifetime = celer::lifetime::detached}).remote(0),
      Contains("shared namespace"));
  }
}
