// Where code runs and what it may do about it: celer::get_runtime_context, celer::nodes,
// celer::exit_actor and celer::kill with no_restart = false. Embedded, and against a local
// cluster in the suite's pass there (tests/CMakeLists.txt).
#include "unit/runtime/fixtures.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>

using namespace celer_test;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

/// A runtime context as a value that travels back from a task or an actor.
struct seen {
  std::string job, task, actor, node, worker, name_space;
  double cpus = 0;
  std::int32_t attempt = 0;
  bool restarted = false;
  MSGPACK_DEFINE(job, task, actor, node, worker, name_space, cpus, attempt, restarted)
};

seen seen_here() {
  const auto c = celer::get_runtime_context();
  const auto cpu = c.resources.find("CPU");
  return {c.job.hex(),   c.task.hex(), c.actor.hex(),     c.node.hex(), c.worker.hex(), c.name_space,
          cpu == c.resources.end() ? 0.0 : cpu->second, c.attempt, c.was_restarted};
}

seen context_in_task() { return seen_here(); }

/// Fails its first run and returns its attempt number on the next.
int attempt_of_retried_task() {
  const auto attempt = celer::get_runtime_context().attempt;
  if (attempt == 1) throw std::runtime_error("first attempt fails on purpose");
  return attempt;
}

/// What exit_actor does outside an actor's method: the error's code.
int exit_actor_in_task() {
  try {
    celer::exit_actor();
  } catch (const celer::exception& e) {
    return static_cast<int>(e.code());
  }
  return -1;
}

struct quitter {
  int calls = 0;
  seen context() {
    ++calls;
    return seen_here();
  }
  int count() { return ++calls; }
  /// Ends the actor; this call's result still reaches its caller.
  int quit() {
    celer::exit_actor();
    return 40 + calls;
  }
  bool restarted() { return celer::was_restarted(); }
};
quitter* make_quitter() { return new quitter; }

CELER_REMOTE(context_in_task, attempt_of_retried_task, exit_actor_in_task, make_quitter, &quitter::context,
             &quitter::count, &quitter::quit, &quitter::restarted);

/// The id of the task that made `ref` (its return object's id with the low bit cleared).
std::string task_of(const celer::object_ref<seen>& ref) {
  return celer::task_id(celer::unique_id{ref.id().hi, ref.id().lo & ~std::uint64_t{1}}).hex();
}

bool on_a_cluster() { return std::getenv("CELER_ADDRESS") != nullptr; }

} // namespace

TEST_CASE("the driver's runtime context names its job and node, and no task, actor or worker",
          "[context]") {
  scoped_runtime rt;
  const auto c = celer::get_runtime_context();
  CHECK_FALSE(c.job.nil());
  CHECK(c.node == celer::current_node_id());
  CHECK(c.task.nil());
  CHECK(c.actor.nil());
  CHECK(c.worker.nil());
  CHECK(c.attempt == 0);
  CHECK_FALSE(c.was_restarted);
  CHECK(c.resources.empty());
  CHECK(c.gpu_ids.empty());
  const char* ns = std::getenv("CELER_NAMESPACE");
  CHECK(c.name_space == (ns != nullptr && *ns != '\0' ? std::string(ns) : c.job.hex()));
}

TEST_CASE("get_runtime_context before init is failed_precondition", "[context]") {
  REQUIRE_THROWS_AS(celer::get_runtime_context(), celer::exception);
  REQUIRE_THROWS_AS(celer::nodes(), celer::exception);
}

TEST_CASE("a task's runtime context names its own task, its job, its worker and what it was given",
          "[context]") {
  scoped_runtime rt;
  const auto driver = celer::get_runtime_context();
  auto a = celer::task(context_in_task).options({.num_cpus = 1}).remote();
  auto b = celer::task(context_in_task).options({.num_cpus = 0.5}).remote();
  const seen x = celer::get(a), y = celer::get(b);
  CHECK(x.job == driver.job.hex());
  CHECK(x.name_space == driver.name_space);
  CHECK(x.task == task_of(a));
  CHECK(y.task == task_of(b));
  CHECK(x.actor == celer::actor_id{}.hex());
  CHECK(x.worker != celer::worker_id{}.hex());
  CHECK(x.cpus == 1);
  CHECK(y.cpus == 0.5);
  CHECK(x.attempt == 1);
  CHECK_FALSE(x.restarted);
  // It ran on a node of the cluster.
  const auto all = celer::nodes();
  CHECK(std::any_of(all.begin(), all.end(), [&](const celer::node_info& n) { return n.id.hex() == x.node; }));
}

TEST_CASE("a retried task's runtime context counts its attempts", "[context][fault]") {
  scoped_runtime rt;
  auto r = celer::task(attempt_of_retried_task).options({.max_retries = 2, .retry_exceptions = true}).remote();
  CHECK(celer::get(r) == 2);
}

TEST_CASE("an actor's methods see the actor, each call's task and the actor's resources",
          "[context][actor]") {
  scoped_runtime rt;
  auto q = celer::actor(make_quitter).options({.num_cpus = 1}).remote();
  auto first = q.task(&quitter::context).remote();
  auto second = q.task(&quitter::context).remote();
  const seen x = celer::get(first), y = celer::get(second);
  CHECK(x.actor == q.id().hex());
  CHECK(x.task == task_of(first));
  CHECK(y.task == task_of(second));
  CHECK(x.worker == y.worker);
  CHECK(x.cpus == 1);
  CHECK_FALSE(x.restarted);
  CHECK(x.job == celer::get_runtime_context().job.hex());
}

TEST_CASE("nodes lists the cluster's nodes with their resources, and the driver's is alive", "[context]") {
  scoped_runtime rt;
  const auto all = celer::nodes();
  REQUIRE_FALSE(all.empty());
  const auto here = celer::current_node_id();
  auto it = std::find_if(all.begin(), all.end(), [&](const celer::node_info& n) { return n.id == here; });
  REQUIRE(it != all.end());
  CHECK(it->alive);
  CHECK(it->dead_reason.empty());
  CHECK(it->resources.at("CPU") > 0);
  CHECK(it->resources.count("node:" + here.hex()) == 1);
  if (on_a_cluster()) {
    CHECK(it->address.rfind("tcp://", 0) == 0);
  } else {
    CHECK(all.size() == 1);
    CHECK(it->address == "embedded");
  }
  // Their totals add up to the cluster's.
  double cpus = 0;
  for (const auto& n : all) {
    if (n.alive) cpus += n.resources.at("CPU");
  }
  CHECK(cpus == celer::cluster_resources().at("CPU"));
}

TEST_CASE("an actor that calls exit_actor answers that call, and later calls fail saying it exited",
          "[actor][exit]") {
  scoped_runtime rt;
  // Restarts left do not bring it back: it ended itself.
  auto q = celer::actor(make_quitter).options({.max_restarts = 2}).remote();
  REQUIRE(celer::get(q.task(&quitter::count).remote()) == 1);
  auto quit = q.task(&quitter::quit).remote();
  auto after = q.task(&quitter::count).remote();  // sent before the actor ended
  CHECK(celer::get(quit) == 41);
  REQUIRE_THROWS_AS(celer::get(after, 30s), celer::actor_died_error);
  REQUIRE_THROWS_WITH(celer::get(q.task(&quitter::count).remote(), 30s),
                      Contains("exited") && Contains("celer::exit_actor() was called in") && Contains("quit"));
  REQUIRE_THROWS_AS(celer::get(q.task(&quitter::restarted).remote(), 30s), celer::actor_died_error);
}

TEST_CASE("exit_actor outside an actor's method is invalid_argument", "[actor][exit]") {
  scoped_runtime rt;
  REQUIRE_THROWS_AS(celer::exit_actor(), celer::exception);
  try {
    celer::exit_actor();
  } catch (const celer::exception& e) {
    CHECK(e.code() == celer::error_code::invalid_argument);
  }
  CHECK(celer::get(celer::task(exit_actor_in_task).remote()) ==
        static_cast<int>(celer::error_code::invalid_argument));
}

TEST_CASE("an actor that ended itself gives its resources back", "[actor][exit][resources][embedded]") {
  scoped_runtime rt;
  auto q = celer::actor(make_quitter).options({.num_cpus = 2}).remote();
  REQUIRE(celer::get(q.task(&quitter::quit).remote()) == 40);
  // The 2-CPU task can only run once the actor's CPUs are back.
  REQUIRE(celer::get(celer::task(add).options({.num_cpus = 2}).remote(1, 1), 30s) == 2);
}

TEST_CASE("kill with no_restart false restarts an actor with restarts left, then kills it for good",
          "[actor][fault][kill]") {
  scoped_runtime rt;
  auto q = celer::actor(make_quitter).options({.max_restarts = 1, .max_task_retries = -1}).remote();
  REQUIRE(celer::get(q.task(&quitter::count).remote()) == 1);
  CHECK_FALSE(celer::get(q.task(&quitter::restarted).remote()));
  celer::kill(q, {.no_restart = false});
  // Calls made since go to the old instance until the kill reaches it, then (sent again,
  // max_task_retries) to the restarted one: each answers which it is, until a restarted one.
  bool restarted = false;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!restarted && std::chrono::steady_clock::now() < deadline) {
    restarted = celer::get(q.task(&quitter::restarted).remote(), 60s);
  }
  REQUIRE(restarted);
  // A fresh instance: its factory ran again (restarted() does not count).
  CHECK(celer::get(q.task(&quitter::count).remote()) == 1);
  CHECK(celer::get(q.task(&quitter::context).remote()).restarted);

  // Its one restart is spent: this kill is final, and says so. Calls made since reach the
  // instance until the kill does (this process hears of the death from the head).
  celer::kill(q, {.no_restart = false});
  std::string why;
  while (why.empty() && std::chrono::steady_clock::now() < deadline) {
    try {
      (void)celer::get(q.task(&quitter::count).remote(), 60s);
    } catch (const celer::actor_died_error& e) {
      why = e.what();
    }
  }
  CHECK_THAT(why, Contains("no restarts left"));
}

TEST_CASE("kill without options stays final for an actor with restarts left", "[actor][kill]") {
  scoped_runtime rt;
  auto q = celer::actor(make_quitter).options({.max_restarts = 3}).remote();
  REQUIRE(celer::get(q.task(&quitter::count).remote()) == 1);
  celer::kill(q);
  REQUIRE_THROWS_AS(celer::get(q.task(&quitter::count).remote(), 30s), celer::actor_died_error);
}
