// A head killed with SIGKILL: the driver's waits fail with `unavailable` within
// head_timeout_ms, and the node agents stop, with their workers, within
// node_head_timeout_ms (short values here), saying why in their logs.
#include "local_cluster.hpp"

#include <celer/celer.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

using namespace celer_it;

namespace {

int pid_of_worker() { return ::getpid(); }

/// The worker's pid, and its parent's (its node agent).
std::pair<int, int> pids_here(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return {::getpid(), ::getppid()};
}

struct sleeper {
  int pid() const { return ::getpid(); }
  int agent() const { return ::getppid(); }
};
sleeper* make_sleeper() { return new sleeper(); }

CELER_REMOTE(pid_of_worker, pids_here, make_sleeper, &sleeper::pid, &sleeper::agent);

/// The pids the cluster's daemons wrote (`role` "head" or "node").
std::vector<int> daemon_pids(const local_cluster& c, const std::string& role) {
  std::vector<int> out;
  for (const auto& e : fs::directory_iterator(c.dir / "session_latest" / "pids")) {
    if (e.path().filename().string().rfind(role + "-", 0) != 0) continue;
    int pid = 0;
    if (std::ifstream(e.path()) >> pid) out.push_back(pid);
  }
  return out;
}

/// Gone, or a zombie no one has reaped yet (the daemons' parent is init).
bool gone(int pid) {
  if (::kill(pid, 0) != 0) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_text, comm, state;
  stat >> pid_text >> comm >> state;
  return state == "Z" || state == "X";
}

/// Sets a variable for the daemons and the driver this test starts, and unsets it after.
struct scoped_env {
  std::string name;
  scoped_env(std::string n, const std::string& value) : name(std::move(n)) {
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~scoped_env() { ::unsetenv(name.c_str()); }
};

} // namespace

TEST_CASE("a driver whose head is killed gets unavailable within head_timeout_ms",
          "[cluster][chaos][head]") {
  scoped_env timeout("CELER_HEAD_TIMEOUT_MS", "2000");
  local_cluster cluster;
  celer::init();
  REQUIRE(celer::get(celer::task(pid_of_worker).options(on_node(1)).remote(), 60s) > 0);
  auto waiting = celer::task(pids_here).options(on_node(2)).remote(60000);
  const auto heads = daemon_pids(cluster, "head");
  REQUIRE(heads.size() == 1);
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(::kill(heads[0], SIGKILL) == 0);
  try {
    (void)celer::get(waiting, 30s);
    FAIL("the get returned");
  } catch (const celer::get_timeout_error&) {
    FAIL("the get timed out instead of failing with unavailable");
  } catch (const celer::exception& e) {
    CHECK(e.code() == celer::error_code::unavailable);
    CHECK_THAT(e.what(), Contains(cluster.address) && Contains("has not answered for") &&
                           Contains("head_timeout_ms is 2000"));
  }
  // Silence counts from the last answer, up to a probe interval (500 ms here) before the kill.
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(took >= 1500ms);
  CHECK(took < 6s);
  // Later calls fail the same way, at once.
  auto later = celer::try_get(waiting, 30s);
  REQUIRE_FALSE(later.has_value());
  CHECK(later.error().code() == celer::error_code::unavailable);
  try {
    (void)celer::task(pid_of_worker).remote();
    FAIL("a task was submitted to a cluster without a head");
  } catch (const celer::exception& e) {
    CHECK(e.code() == celer::error_code::unavailable);
  }
  // Shutting down does not wait for the dead head either.
  const auto t1 = std::chrono::steady_clock::now();
  celer::shutdown();
  CHECK(std::chrono::steady_clock::now() - t1 < 5s);
}

TEST_CASE("node agents whose head is killed stop with their workers within node_head_timeout_ms",
          "[cluster][chaos][head]") {
  scoped_env timeout("CELER_NODE_HEAD_TIMEOUT_MS", "3000");
  local_cluster cluster(/*node_timeout_ms=*/1000);
  celer::init();
  // A worker on each node agent: an actor (its own process) on node 1, a task on node 2.
  auto a = celer::actor(make_sleeper).options({.num_cpus = 0, .resources = {{"node1", 0.5}}}).remote();
  const int actor_worker = celer::get(a.task(&sleeper::pid).remote(), 60s);
  const int agent1 = celer::get(a.task(&sleeper::agent).remote(), 60s);
  auto running = celer::task(pids_here).options(on_node(2)).remote(200);
  const auto here = celer::get(running, 60s);
  const int task_worker = here.first;
  const int agent2 = here.second;
  const auto nodes = daemon_pids(cluster, "node");
  REQUIRE(nodes.size() == 2);
  CHECK(std::find(nodes.begin(), nodes.end(), agent1) != nodes.end());
  CHECK(std::find(nodes.begin(), nodes.end(), agent2) != nodes.end());
  const auto heads = daemon_pids(cluster, "head");
  REQUIRE(heads.size() == 1);
  REQUIRE(::kill(heads[0], SIGKILL) == 0);
  const auto t0 = std::chrono::steady_clock::now();
  // 3 s of silence, plus up to a probe interval and a tick, plus stopping (workers get 5 s).
  REQUIRE(eventually([&] { return gone(agent1) && gone(agent2); }, 15s));
  CHECK(std::chrono::steady_clock::now() - t0 >= 2500ms);
  CHECK(eventually([&] { return gone(actor_worker) && gone(task_worker); }, 5s));
  const std::string logs = cluster.logs();
  CHECK_THAT(logs, Contains("cannot reach the head at tcp://" + cluster.address));
  CHECK_THAT(logs, Contains("stopping: the head at tcp://" + cluster.address) &&
                     Contains("node_head_timeout_ms is 3000"));
  celer::shutdown();
}
