// celer::cancel through the public API, embedded and (the same cases, by the suite's pass
// against a local cluster) on a cluster: a task taken out before it starts, a running one
// told through its flag, force, children, actor calls. The tasks and the test share a
// folder (they may be other processes) and mark what they did there.
#include "unit/runtime/fixtures.hpp"
#include "unit/runtime/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <sys/types.h>
#include <unistd.h>

using namespace celer_test;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

/// Adds a line (this process's pid) to `dir`/`name`.
void mark(const std::string& dir, const std::string& name) {
  std::ofstream(fs::path(dir) / name, std::ios::app) << ::getpid() << "\n";
}
/// The lines of `dir`/`name` (how often it was marked).
std::vector<std::string> marks(const std::string& dir, const std::string& name) {
  std::vector<std::string> out;
  std::ifstream in(fs::path(dir) / name);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}
bool marked(const std::string& dir, const std::string& name) {
  return fs::exists(fs::path(dir) / name);
}
/// Waits until another thread or process marks `name`, up to `limit`.
bool await_mark(const std::string& dir, const std::string& name, std::chrono::seconds limit = 60s) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!marked(dir, name)) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

/// Runs until it is cancelled (celer::is_cancelled) or `dir`/release appears, at most a
/// minute: marks "<tag>-started", then "<tag>-saw-cancel" when its flag stopped it.
int until_cancelled(std::string dir, std::string tag) {
  mark(dir, tag + "-started");
  const auto until = std::chrono::steady_clock::now() + 60s;
  while (!celer::is_cancelled()) {
    if (marked(dir, "release") || std::chrono::steady_clock::now() > until) return 0;
    std::this_thread::sleep_for(1ms);
  }
  mark(dir, tag + "-saw-cancel");
  return 1;
}
/// Runs, never looking at its flag, until `dir`/release appears (at most a minute).
int ignores_cancel(std::string dir, std::string tag) {
  mark(dir, tag + "-started");
  const auto until = std::chrono::steady_clock::now() + 60s;
  while (!marked(dir, "release") && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(1ms);
  }
  mark(dir, tag + "-finished");
  return 2;
}
int marks_run(std::string dir, std::string tag) {
  mark(dir, tag + "-ran");
  return 3;
}
/// Submits until_cancelled(dir, "child") and returns what it returns.
int parent_of_spinner(std::string dir) {
  return celer::get(celer::task(until_cancelled).remote(dir, std::string("child")));
}
/// A ref this task's process owns, handed to its caller.
celer::object_ref<int> ref_owned_here() { return celer::task(add).remote(1, 1); }

struct cancel_probe {
  int spin(std::string dir) { return until_cancelled(std::move(dir), "call"); }
  int bump() { return ++bumps; }
  int bumps = 0;
};
cancel_probe* make_cancel_probe() { return new cancel_probe; }

CELER_REMOTE(until_cancelled, ignores_cancel, marks_run, parent_of_spinner, ref_owned_here,
             make_cancel_probe, &cancel_probe::spin, &cancel_probe::bump);

bool on_a_cluster() { return std::getenv("CELER_ADDRESS") != nullptr; }

/// Opens `dir`/release when the test ends, so that nothing spins past it.
struct release_at_end {
  const std::string dir;
  ~release_at_end() { mark(dir, "release"); }
};

} // namespace

TEST_CASE("cancel takes out a task that waits for CPUs: it never runs, and get says who "
          "cancelled it", "[api][cancel]") {
  scoped_runtime rt;
  temp_dir dir("celer-cancel");
  const std::string d = dir.path.string();
  release_at_end release{d};
  const int cpus = static_cast<int>(celer::cluster_resources()["CPU"]);
  REQUIRE(cpus >= 1);
  std::vector<celer::object_ref<int>> blockers;
  for (int i = 0; i < cpus; ++i) {
    blockers.push_back(celer::task(ignores_cancel).remote(d, "blocker-" + std::to_string(i)));
  }
  for (int i = 0; i < cpus; ++i) {
    const bool started = await_mark(d, "blocker-" + std::to_string(i) + "-started");
    INFO("blocker " << i << " of " << cpus << " waits: " << celer::pending_reason(blockers[static_cast<std::size_t>(i)])
                    << "; CPUs free: " << celer::available_resources()["CPU"]);
    REQUIRE(started);
  }
  auto target = celer::task(marks_run).options({.num_cpus = 0.5}).remote(d, std::string("target"));
  CHECK(celer::cancel(target));
  try {
    celer::get(target);
    FAIL("a cancelled task's get returned");
  } catch (const celer::task_cancelled_error& e) {
    CHECK(e.code() == celer::error_code::cancelled);
    CHECK_THAT(e.what(), Contains("task marks_run was cancelled by celer::cancel in process " +
                                  std::to_string(::getpid())));
  }
  CHECK_FALSE(celer::cancel(target));  // nothing left to cancel
  mark(d, "release");
  for (auto& b : blockers) CHECK(celer::get(b) == 2);
  // Work of the same shape submitted after it runs; it never did.
  CHECK(celer::get(celer::task(marks_run).options({.num_cpus = 0.5}).remote(d, std::string("after"))) == 3);
  CHECK_FALSE(marked(d, "target-ran"));
}

TEST_CASE("a running task sees its flag when cancelled and stops; its worker runs the next task",
          "[api][cancel]") {
  scoped_runtime rt;
  temp_dir dir("celer-cancel");
  const std::string d = dir.path.string();
  release_at_end release{d};
  auto r = celer::task(until_cancelled).remote(d, std::string("t"));
  REQUIRE(await_mark(d, "t-started"));
  CHECK(celer::cancel(r));
  CHECK_THROWS_AS(celer::get(r), celer::task_cancelled_error);
  CHECK(await_mark(d, "t-saw-cancel"));
  CHECK_FALSE(celer::cancel(r));
  CHECK(celer::get(celer::task(add).remote(1, 2)) == 3);
  CHECK_FALSE(celer::is_cancelled());  // the driver runs no task
}

TEST_CASE("cancel of a finished task or of a put finds nothing and leaves the value",
          "[api][cancel]") {
  scoped_runtime rt;
  auto done = celer::task(add).remote(2, 3);
  REQUIRE(celer::get(done) == 5);
  CHECK_FALSE(celer::cancel(done));
  CHECK(celer::get(done) == 5);
  auto put = celer::put(7);
  CHECK_FALSE(celer::cancel(put));
  CHECK(celer::get(put) == 7);
}

TEST_CASE("cancel reaches what the cancelled task submitted (recursive, the default)",
          "[api][cancel][nested]") {
  scoped_runtime rt;
  temp_dir dir("celer-cancel");
  const std::string d = dir.path.string();
  release_at_end release{d};
  auto parent = celer::task(parent_of_spinner).remote(d);
  REQUIRE(await_mark(d, "child-started"));
  CHECK(celer::cancel(parent));
  CHECK_THROWS_AS(celer::get(parent), celer::task_cancelled_error);
  CHECK(await_mark(d, "child-saw-cancel"));
}

TEST_CASE("actor calls: a queued call is taken out, a running one sees its flag, and force is "
          "refused", "[api][cancel][actor]") {
  scoped_runtime rt;
  temp_dir dir("celer-cancel");
  const std::string d = dir.path.string();
  release_at_end release{d};
  auto a = celer::actor(make_cancel_probe).remote();
  auto spin = a.task(&cancel_probe::spin).remote(d);
  auto queued = a.task(&cancel_probe::bump).remote();
  REQUIRE(await_mark(d, "call-started"));
  CHECK(celer::cancel(queued));
  try {
    celer::get(queued);
    FAIL("a cancelled call's get returned");
  } catch (const celer::task_cancelled_error& e) {
    CHECK_THAT(e.what(), Contains("of actor"));
    CHECK_THAT(e.what(), Contains("was cancelled by celer::cancel"));
  }
  try {
    celer::cancel(spin, {.force = true});
    FAIL("force on an actor call was accepted");
  } catch (const celer::exception& e) {
    CHECK(e.code() == celer::error_code::invalid_argument);
    CHECK_THAT(e.what(), Contains("celer::kill"));
  }
  CHECK(celer::cancel(spin));
  CHECK_THROWS_AS(celer::get(spin), celer::task_cancelled_error);
  CHECK(await_mark(d, "call-saw-cancel"));
  CHECK(celer::get(a.task(&cancel_probe::bump).remote()) == 1);  // the cancelled bump never ran
}

TEST_CASE("force on an embedded node, whose workers are threads, acts as the flag",
          "[api][cancel][embedded]") {
  scoped_runtime rt;
  temp_dir dir("celer-cancel");
  const std::string d = dir.path.string();
  release_at_end release{d};
  auto r = celer::task(until_cancelled).remote(d, std::string("t"));
  REQUIRE(await_mark(d, "t-started"));
  CHECK(celer::cancel(r, {.force = true}));
  CHECK_THROWS_AS(celer::get(r), celer::task_cancelled_error);
  CHECK(await_mark(d, "t-saw-cancel"));
}

TEST_CASE("force kills the worker process of a task that ignores its flag, and the task is "
          "never retried", "[api][cancel][cluster-only]") {
  REQUIRE(on_a_cluster());
  scoped_runtime rt;
  temp_dir dir("celer-cancel");
  const std::string d = dir.path.string();
  release_at_end release{d};
  auto r = celer::task(ignores_cancel).options({.max_retries = 3}).remote(d, std::string("f"));
  REQUIRE(await_mark(d, "f-started"));
  const pid_t pid = std::stoi(marks(d, "f-started").at(0));
  CHECK(celer::cancel(r, {.force = true}));
  CHECK_THROWS_AS(celer::get(r), celer::task_cancelled_error);
  const auto until = std::chrono::steady_clock::now() + 30s;
  while (::kill(pid, 0) == 0 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(5ms);
  CHECK(::kill(pid, 0) != 0);
  // Work of its shape runs after it; a retry would have gone first.
  for (int i = 0; i < 3; ++i) CHECK(celer::get(celer::task(marks_run).remote(d, std::string("after"))) == 3);
  CHECK(marks(d, "f-started").size() == 1);
  CHECK_FALSE(marked(d, "f-finished"));
}

TEST_CASE("only the process that submitted a task can cancel it", "[api][cancel][cluster-only]") {
  REQUIRE(on_a_cluster());
  scoped_runtime rt;
  auto inner = celer::get(celer::task(ref_owned_here).remote());
  try {
    celer::cancel(inner);
    FAIL("a ref another process owns was cancelled");
  } catch (const celer::exception& e) {
    CHECK(e.code() == celer::error_code::invalid_argument);
    CHECK_THAT(e.what(), Contains("only the process that submitted a task"));
  }
  CHECK(celer::get(inner) == 2);
}
