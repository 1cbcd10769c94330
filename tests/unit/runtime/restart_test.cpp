// Actor restarts (actor_options::max_restarts, max_task_retries, on_restart): the actor's
// worker process kills itself, the head starts it again, and its callers carry on. The
// "[cluster-only]" cases need worker processes: they run in the suite's pass against a local
// cluster (tests/CMakeLists.txt), not embedded, where an actor is a thread of this process.
#include "unit/runtime/fixtures.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

using namespace celer_test;

namespace {

/// A counter that checkpoints to a file and dies on request.
struct phoenix {
  std::string checkpoint;
  int count = 0;
  bool restored = false;

  explicit phoenix(std::string file) : checkpoint(std::move(file)) {}
  int incr() { return ++count; }
  void save() {
    std::ofstream(checkpoint + ".tmp") << count;
    std::filesystem::rename(checkpoint + ".tmp", checkpoint);
  }
  /// The restore hook: reloads the last checkpoint.
  void restore() {
    std::ifstream in(checkpoint);
    in >> count;
    restored = true;
  }
  [[noreturn]] int die() { std::_Exit(1); }
  /// Dies the first time it runs in this actor, returns the count once restarted.
  int die_unless_restarted() {
    if (!celer::was_restarted()) std::_Exit(1);
    return count;
  }
  bool was_restarted() { return celer::was_restarted(); }
  bool was_restored() { return restored; }
};
phoenix* make_phoenix(std::string file) { return new phoenix(std::move(file)); }

CELER_REMOTE(make_phoenix, &phoenix::incr, &phoenix::save, &phoenix::restore, &phoenix::die,
             &phoenix::die_unless_restarted, &phoenix::was_restarted, &phoenix::was_restored);

/// A checkpoint file's path, removed with it.
struct checkpoint_file {
  std::filesystem::path path =
    std::filesystem::temp_directory_path() /
    ("celer-restart-test-" + std::to_string(std::random_device{}()));
  ~checkpoint_file() { std::filesystem::remove(path); }
};

bool on_a_cluster() { return std::getenv("CELER_ADDRESS") != nullptr; }

} // namespace

TEST_CASE("restart options are checked when the actor is created", "[actor][fault]") {
  scoped_runtime rt;
  REQUIRE_THROWS_AS(
    celer::actor(make_phoenix).options({.max_restarts = -2}).remote(std::string("x")),
    celer::exception);
  REQUIRE_THROWS_WITH(
    celer::actor(make_phoenix).options({.max_task_retries = -5}).remote(std::string("x")),
    Catch::Contains("max_task_retries") && Catch::Contains("-5"));
  CHECK_FALSE(celer::was_restarted());  // outside an actor
  auto a = celer::actor(make_phoenix)
             .on_restart(&phoenix::restore)
             .options({.max_restarts = 1})
             .remote(std::string("unused"));
  CHECK_FALSE(celer::get(a.task(&phoenix::was_restarted).remote()));
  CHECK_FALSE(celer::get(a.task(&phoenix::was_restored).remote()));
}

TEST_CASE("an actor whose process dies restarts, reloads its checkpoint, and the call it died "
          "running is sent again",
          "[actor][fault][cluster-only]") {
  REQUIRE(on_a_cluster());
  scoped_runtime rt;
  checkpoint_file file;
  auto a = celer::actor(make_phoenix)
             .options({.max_restarts = 1, .max_task_retries = -1})
             .on_restart(&phoenix::restore)
             .remote(file.path.string());
  for (int i = 1; i <= 3; ++i) REQUIRE(celer::get(a.task(&phoenix::incr).remote()) == i);
  celer::get(a.task(&phoenix::save).remote());
  REQUIRE(celer::get(a.task(&phoenix::incr).remote()) == 4);  // after the checkpoint: lost

  // Its process dies running this call; the actor restarts, reloads 3, and the call runs
  // again there. The calls made meanwhile wait for it, in order, and do not fail.
  auto died = a.task(&phoenix::die_unless_restarted).remote();
  auto next = a.task(&phoenix::incr).remote();
  CHECK(celer::get(died) == 3);
  CHECK(celer::get(next) == 4);
  CHECK(celer::get(a.task(&phoenix::was_restarted).remote()));
  CHECK(celer::get(a.task(&phoenix::was_restored).remote()));

  // Its one restart is spent: the next death is final.
  auto last = a.task(&phoenix::die).remote();
  REQUIRE_THROWS_AS(celer::get(last), celer::actor_died_error);
  REQUIRE_THROWS_AS(celer::get(a.task(&phoenix::incr).remote()), celer::actor_died_error);
}

TEST_CASE("with max_task_retries 0 a call its actor died running fails, and the restarted "
          "actor takes the next",
          "[actor][fault][cluster-only]") {
  REQUIRE(on_a_cluster());
  scoped_runtime rt;
  auto a = celer::actor(make_phoenix).options({.max_restarts = -1}).remote(std::string("none"));
  REQUIRE(celer::get(a.task(&phoenix::incr).remote()) == 1);
  auto died = a.task(&phoenix::die).remote();
  REQUIRE_THROWS_WITH(celer::get(died), Catch::Contains("died while running this call") &&
                                          Catch::Contains("max_task_retries is 0"));
  // No restore hook: the factory ran again, from scratch.
  CHECK(celer::get(a.task(&phoenix::was_restarted).remote()));
  CHECK_FALSE(celer::get(a.task(&phoenix::was_restored).remote()));
  CHECK(celer::get(a.task(&phoenix::incr).remote()) == 1);
}
