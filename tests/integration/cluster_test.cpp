// A real local cluster: the `celer` CLI starts a head and node agents as processes on
// 127.0.0.1, this binary connects as a driver, and its own copies run as worker processes.
// Each node offers a custom resource named after it ("node0" on the head's node, "node1",
// "node2"), so work can be pinned to a node.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "local_cluster.hpp"

#include <celer/celer.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

using namespace std::chrono_literals;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

using namespace celer_it;

namespace {

std::string node_hex() { return celer::current_node_id().hex(); }

std::string slow_node_hex(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return celer::current_node_id().hex();
}

/// Puts a value from wherever it runs; the ref's owner is that worker.
celer::object_ref<std::vector<int>> make_here(int n) {
  std::vector<int> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = i * 3;
  return celer::put(v);
}

/// Reads an object (fetched from its owner) and says where it read it.
std::pair<std::string, long> read_there(celer::object_ref<std::vector<int>> r) {
  long sum = 0;
  for (int x : celer::get(r)) sum += x;
  return {celer::current_node_id().hex(), sum};
}

/// Writes its pid to `path`, then sleeps (to be killed).
int report_pid_and_sleep(std::string path, int ms) {
  std::ofstream(path) << ::getpid() << std::endl;
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return 0;
}

/// Leaves a marker in `dir` for each run, and exits its worker process (as a crash would)
/// on the first `deaths` runs; then returns which run it was (deaths + 1).
int die_first(std::string dir, int deaths) {
  int runs = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++runs;
  std::ofstream(fs::path(dir) / ("run-" + std::to_string(runs))) << ::getpid() << std::endl;
  if (runs < deaths) std::_Exit(1);
  return runs + 1;
}

struct probe {
  std::string where() const { return celer::current_node_id().hex(); }
  int pid() const { return ::getpid(); }
  int parent_pid() const { return ::getppid(); }
  int nap(int ms) const {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return ms;
  }
};
probe* make_probe() { return new probe(); }

/// An actor that submits tasks of its own (it leases workers for them) and keeps the refs.
struct leaser {
  std::vector<celer::object_ref<std::string>> refs;
  int start(int n, int ms) {
    for (int i = 0; i < n; ++i) refs.push_back(celer::task(slow_node_hex).remote(ms));
    return n;
  }
};
leaser* make_leaser() { return new leaser(); }

/// `size` bytes of a pattern (64-bit words of an LCG seeded with `seed`).
celer::bytes big_pattern(std::int64_t size, int seed) {
  celer::bytes b(static_cast<std::size_t>(size));
  std::uint64_t x = static_cast<std::uint64_t>(seed) * 0x9e3779b97f4a7c15ULL + 1;
  std::size_t i = 0;
  for (; i + 8 <= b.size(); i += 8) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    std::memcpy(b.data() + i, &x, 8);
  }
  for (; i < b.size(); ++i) b[i] = static_cast<std::uint8_t>(i);
  return b;
}

/// A digest of every byte, position-sensitive.
std::uint64_t digest(const celer::bytes& b) {
  std::uint64_t h = b.size();
  std::size_t i = 0;
  for (; i + 8 <= b.size(); i += 8) {
    std::uint64_t w = 0;
    std::memcpy(&w, b.data() + i, 8);
    h = (h ^ w) * 0x100000001b3ULL;
  }
  for (; i < b.size(); ++i) h = (h ^ b.data()[i]) * 0x100000001b3ULL;
  return h;
}

/// The bytes of `b` in reverse order (a task that takes a stored object and makes another).
celer::bytes reversed(celer::bytes b) {
  std::reverse(b.begin(), b.end());
  return b;
}

/// Reads the object where it runs: its digest, and how many objects this node has pulled.
std::pair<std::uint64_t, std::uint64_t> digest_there(celer::object_ref<celer::bytes> r) {
  const auto b = celer::get(r);
  return {digest(b), celer::local_object_store_stats().pulled_objects};
}

CELER_REMOTE(node_hex, slow_node_hex, make_here, read_there, report_pid_and_sleep, make_probe,
             &probe::where, &probe::pid, &probe::parent_pid, &probe::nap, make_leaser,
             &leaser::start, big_pattern, digest_there, die_first, reversed);

} // namespace

int main(int argc, char** argv) {
  // A worker that takes too long to start (for the start-timeout test below).
  if (std::getenv("CELER_WORKER_ID") != nullptr && std::getenv("CELERTEST_SLOW_WORKER") != nullptr) {
    std::this_thread::sleep_for(60s);
  }
  celer::serve_if_worker();
  // A driver of detached_test.cpp's, run as a process of its own.
  if (const char* role = std::getenv("CELERTEST_DETACHED")) return celer_it::run_detached_role(role);
  return Catch::Session().run(argc, argv);
}

TEST_CASE("tasks land on every node of a local cluster", "[cluster]") {
  local_cluster cluster;
  celer::init();
  std::vector<celer::object_ref<std::string>> refs;
  for (int i = 0; i < 30; ++i) refs.push_back(celer::task(slow_node_hex).remote(100));
  std::set<std::string> nodes;
  for (auto& r : refs) nodes.insert(celer::get(r, 60s));
  REQUIRE(nodes.size() == 3);
  REQUIRE(nodes.contains(celer::current_node_id().hex()));  // the driver's local node too
}

TEST_CASE("actors run on each node and objects made on one node are read on another",
          "[cluster]") {
  local_cluster cluster;
  celer::init();
  std::set<std::string> nodes;
  std::vector<celer::actor_handle<probe>> actors;
  for (int i = 0; i < 3; ++i) {
    actors.push_back(celer::actor(make_probe)
                       .options({.num_cpus = 0, .resources = {{"node" + std::to_string(i), 0.5}}})
                       .remote());
    nodes.insert(celer::get(actors.back().task(&probe::where).remote(), 60s));
  }
  REQUIRE(nodes.size() == 3);
  // Made by a worker on node1 (which owns it), read by a task on node2 and by the driver.
  auto inner = celer::get(celer::task(make_here).options(on_node(1)).remote(1000), 60s);
  auto [where, sum] = celer::get(celer::task(read_there).options(on_node(2)).remote(inner), 60s);
  REQUIRE(where != celer::get(celer::task(node_hex).options(on_node(1)).remote(), 60s));
  REQUIRE(sum == 3L * 999 * 1000 / 2);
  REQUIRE(celer::get(inner, 60s).size() == 1000);
}

TEST_CASE("killing an actor's worker process fails its calls with actor_died_error",
          "[cluster][chaos]") {
  local_cluster cluster;
  celer::init();
  auto a = celer::actor(make_probe).options({.num_cpus = 0, .resources = {{"node1", 0.5}}}).remote();
  const int pid = celer::get(a.task(&probe::pid).remote(), 60s);
  auto waiting = a.task(&probe::nap).remote(30000);
  std::this_thread::sleep_for(100ms);
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(::kill(pid, SIGKILL) == 0);
  REQUIRE_THROWS_AS(celer::get(waiting, 20s), celer::actor_died_error);
  REQUIRE(std::chrono::steady_clock::now() - t0 < 10s);
  try {
    celer::get(a.task(&probe::where).remote(), 20s);
    FAIL("a call to the dead actor returned");
  } catch (const celer::actor_died_error& e) {
    REQUIRE_THAT(e.what(), Contains("worker process was killed by signal 9"));
  }
}

TEST_CASE("a task whose worker process dies on its first attempts succeeds on a retry",
          "[cluster][chaos][retry]") {
  local_cluster cluster;
  celer::init();
  const fs::path runs = cluster.dir / "runs";
  fs::create_directories(runs);
  auto r = celer::task(die_first).options({.max_retries = 3}).remote(runs.string(), 2);
  REQUIRE(celer::get(r, 120s) == 3);
  int markers = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(runs)) ++markers;
  REQUIRE(markers == 3);
}

TEST_CASE("with max_retries 0 a task whose worker process dies fails with worker_died_error "
          "naming its one attempt",
          "[cluster][chaos][retry]") {
  local_cluster cluster;
  celer::init();
  const fs::path runs = cluster.dir / "runs";
  fs::create_directories(runs);
  auto r = celer::task(die_first).options({.max_retries = 0}).remote(runs.string(), 5);
  try {
    celer::get(r, 60s);
    FAIL("the task returned");
  } catch (const celer::worker_died_error& e) {
    REQUIRE_THAT(e.what(), Contains("task die_first failed after 1 attempt: ") &&
                             Contains("exited with status 1"));
  }
  int markers = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(runs)) ++markers;
  REQUIRE(markers == 1);
}

TEST_CASE("killing a task's worker process fails the task with worker_died_error",
          "[cluster][chaos]") {
  local_cluster cluster;
  celer::init();
  const std::string pid_file = (cluster.dir / "task.pid").string();
  auto once = on_node(2);
  once.max_retries = 0;
  auto r = celer::task(report_pid_and_sleep).options(once).remote(pid_file, 30000);
  int pid = 0;
  REQUIRE(eventually([&] { return (std::ifstream(pid_file) >> pid) && pid > 0; }, 30s));
  REQUIRE(::kill(pid, SIGKILL) == 0);
  try {
    celer::get(r, 20s);
    FAIL("the task returned");
  } catch (const celer::worker_died_error& e) {
    REQUIRE_THAT(e.what(), Contains("report_pid_and_sleep") && Contains("signal 9"));
  }
  // The node goes on: the next task runs there.
  REQUIRE(!celer::get(celer::task(node_hex).options(on_node(2)).remote(), 60s).empty());
}

TEST_CASE("killing a node agent fails its work with node_died_error and status shows it dead",
          "[cluster][chaos]") {
  local_cluster cluster(/*node_timeout_ms=*/1500);
  celer::init();
  auto a = celer::actor(make_probe).options({.num_cpus = 0, .resources = {{"node2", 0.5}}}).remote();
  const int agent = celer::get(a.task(&probe::parent_pid).remote(), 60s);  // the node agent
  const std::string node2 = celer::get(a.task(&probe::where).remote(), 60s);
  auto call = a.task(&probe::nap).remote(60000);
  auto task = celer::task(slow_node_hex).options(on_node(2)).remote(60000);
  std::this_thread::sleep_for(300ms);
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(::kill(agent, SIGKILL) == 0);
  REQUIRE_THROWS_AS(celer::get(task, 30s), celer::node_died_error);
  REQUIRE_THROWS_AS(celer::get(call, 30s), celer::actor_died_error);
  REQUIRE(std::chrono::steady_clock::now() - t0 < 15s);
  const std::string st = cluster.status();
  REQUIRE_THAT(st, Contains(node2.substr(0, 8) + "  DEAD") && Contains("no heartbeat"));
  REQUIRE_THAT(st, Contains("2 alive, 1 dead"));
  // The rest of the cluster still serves; work for the dead node's resource is infeasible.
  REQUIRE(!celer::get(celer::task(node_hex).options(on_node(1)).remote(), 60s).empty());
  REQUIRE_THROWS_AS(celer::get(celer::task(node_hex).options(on_node(2)).remote(), 30s),
                    celer::infeasible_error);
}

TEST_CASE("a driver killed with SIGKILL has its actors stopped and their resources freed",
          "[cluster][chaos]") {
  local_cluster cluster(/*node_timeout_ms=*/1500);
  const std::string pid_file = (cluster.dir / "actor.pid").string();
  ::setenv("CELER_TEST_PID_FILE", pid_file.c_str(), 1);
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  const pid_t driver = ::fork();
  if (driver == 0) {
    ::execl(self.c_str(), self.c_str(), "[.child-driver]", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int actor_pid = 0;
  REQUIRE(eventually([&] { return (std::ifstream(pid_file) >> actor_pid) && actor_pid > 0; }, 60s));
  REQUIRE_THAT(cluster.status(), Contains("node1 1/1"));
  ::kill(driver, SIGKILL);
  ::waitpid(driver, nullptr, 0);
  REQUIRE(eventually([&] { return ::kill(actor_pid, 0) != 0; }, 15s));
  REQUIRE(eventually([&] { return cluster.status().find("node1 0/1") != std::string::npos; }, 10s));
  REQUIRE_THAT(cluster.logs(), Contains("stopped heartbeating"));
}

// The driver the test above kills: it makes an actor, says where it is, and waits.
TEST_CASE("a driver that makes an actor and waits", "[.child-driver]") {
  celer::init();
  auto a = celer::actor(make_probe).options({.num_cpus = 0, .resources = {{"node1", 1}}}).remote();
  const int pid = celer::get(a.task(&probe::pid).remote(), 60s);
  std::ofstream(std::getenv("CELER_TEST_PID_FILE")) << pid << std::endl;
  std::this_thread::sleep_for(600s);
}

TEST_CASE("a worker process that never connects is killed and its task fails", "[cluster][chaos]") {
  ::setenv("CELERTEST_SLOW_WORKER", "1", 1);  // inherited by the nodes, and so the workers
  ::setenv("CELER_WORKER_START_TIMEOUT_MS", "1000", 1);
  local_cluster cluster;
  ::unsetenv("CELERTEST_SLOW_WORKER");
  ::unsetenv("CELER_WORKER_START_TIMEOUT_MS");
  celer::init();
  try {
    celer::get(celer::task(node_hex).remote(), 30s);
    FAIL("the task returned");
  } catch (const celer::worker_died_error& e) {
    REQUIRE_THAT(e.what(), Contains("did not start within 1000 ms"));
  }
}

TEST_CASE("a driver with a wrong token is refused and the head logs it", "[cluster][security]") {
  local_cluster cluster;
  ::setenv("CELER_TOKEN", "0000000000000000000000000000000000000000000000000000000000000000", 1);
  try {
    celer::init();
    FAIL("a wrong token was accepted");
  } catch (const celer::exception& e) {
    REQUIRE(e.code() == celer::error_code::unauthenticated);
    REQUIRE_THAT(e.what(), Contains("the cluster token is wrong"));
  }
  ::unsetenv("CELER_TOKEN");
  REQUIRE(eventually([&] {
    return cluster.logs().find("a connection failed its handshake") != std::string::npos;
  }, 5s));
  // The right token (from the session directory) still works.
  celer::init();
  REQUIRE(!celer::get(celer::task(node_hex).remote(), 60s).empty());
}

TEST_CASE("the token file is readable by its owner only", "[cluster][security]") {
  local_cluster cluster;
  const auto perms = fs::status(cluster.dir / "session_latest" / "token").permissions();
  REQUIRE((perms & (fs::perms::group_all | fs::perms::others_all)) == fs::perms::none);
}

TEST_CASE("celer status lists every node with its resources and labels", "[cluster]") {
  local_cluster cluster;
  REQUIRE(eventually([&] { return cluster.status().find("3 alive, 0 dead") != std::string::npos; }, 10s));
  const std::string st = cluster.status();
  REQUIRE_THAT(st, Contains("node0 0/1") && Contains("node1 0/1") && Contains("node2 0/1"));
  REQUIRE_THAT(st, Contains("CPU 0/1"));
  REQUIRE_THAT(st, Contains("labels: kind=spot zone=a"));
}

// Run by tests/cluster/netns_test.sh against a cluster it made across network namespaces
// (hidden: not run on its own).
std::string node_ip() {
  const char* ip = std::getenv("CELER_NODE_IP");
  return ip == nullptr ? "" : ip;
}
CELER_REMOTE(node_ip);

TEST_CASE("a cluster across network namespaces runs work on every host", "[.netns]") {
  REQUIRE(std::getenv("CELER_ADDRESS") != nullptr);
  celer::init();
  std::set<std::string> ips;
  for (int i = 0; i < 3; ++i) {
    ips.insert(celer::get(celer::task(node_ip).options(on_node(i)).remote(), 60s));
  }
  REQUIRE(ips.size() == 3);
  REQUIRE_FALSE(ips.contains(""));
  auto inner = celer::get(celer::task(make_here).options(on_node(1)).remote(1000), 60s);
  auto [where, sum] = celer::get(celer::task(read_there).options(on_node(2)).remote(inner), 60s);
  REQUIRE(sum == 3L * 999 * 1000 / 2);
  REQUIRE(celer::get(inner, 60s).size() == 1000);
  std::set<std::string> spread;
  std::vector<celer::object_ref<std::string>> refs;
  for (int i = 0; i < 30; ++i) refs.push_back(celer::task(slow_node_hex).remote(100));
  for (auto& r : refs) spread.insert(celer::get(r, 60s));
  REQUIRE(spread.size() == 3);
  celer::shutdown();
}

TEST_CASE("a caller killed while it leases workers gives their CPUs back", "[cluster][chaos]") {
  local_cluster cluster;
  celer::init();
  // The actor leases every CPU of the cluster for its tasks and has more waiting.
  auto a = celer::actor(make_leaser).options({.num_cpus = 0}).remote();
  REQUIRE(celer::get(a.task(&leaser::start).remote(9, 1500), 60s) == 9);
  std::this_thread::sleep_for(300ms);
  celer::kill(a);
  // Its running tasks finish; the nodes take back its leases and drop its requests, so
  // the driver's tasks get all three CPUs.
  std::vector<celer::object_ref<std::string>> refs;
  for (int i = 0; i < 3; ++i) refs.push_back(celer::task(slow_node_hex).remote(10));
  std::set<std::string> nodes;
  for (auto& r : refs) nodes.insert(celer::get(r, 30s));
  REQUIRE(!nodes.empty());
  REQUIRE(eventually([&] {
    const auto st = cluster.status();
    return st.find("CPU 1/1") == std::string::npos && st.find("queued 0") != std::string::npos;
  }, 15s));
}

TEST_CASE("a 1 GiB object made on one node is read byte-exact on two others, one pull each",
          "[cluster][store]") {
  local_cluster cluster;
  celer::init();
  constexpr std::int64_t size = std::int64_t{1} << 30;
  const std::uint64_t want = digest(big_pattern(size, 7));
  auto big = celer::task(big_pattern).options(on_node(1)).remote(size, 7);
  // Two readers on node 2 at once: one transfer serves both.
  auto r1 = celer::task(digest_there).options(on_node(2)).remote(big);
  auto r2 = celer::task(digest_there).options(on_node(2)).remote(big);
  const auto [d1, pulled1] = celer::get(r1, 300s);
  const auto [d2, pulled2] = celer::get(r2, 300s);
  CHECK(d1 == want);
  CHECK(d2 == want);
  CHECK(std::max(pulled1, pulled2) == 1);
  // The driver's node (node 0) pulls its own copy, which the driver maps.
  const auto here = celer::get(big, 300s);
  CHECK(here.is_view());
  CHECK(here.size() == static_cast<std::size_t>(size));
  CHECK(digest(here) == want);
  CHECK(celer::local_object_store_stats().pulled_objects == 1);
  // The job ends: every node frees its objects and copies.
  celer::shutdown();
  auto count = [](const std::string& st, const std::string& what) {
    std::size_t n = 0;
    for (auto at = st.find(what); at != std::string::npos; at = st.find(what, at + 1)) ++n;
    return n;
  };
  CHECK(eventually([&] { return count(cluster.status(), "in memory (0 objects)") == 3; }, 15s));
}

TEST_CASE("a durable result survives SIGKILL of its node agent and is found after a restart",
          "[cluster][store][chaos]") {
  local_cluster cluster(/*node_timeout_ms=*/1500);
  celer::init();
  auto a = celer::actor(make_probe).options({.num_cpus = 0, .resources = {{"node1", 0.5}}}).remote();
  const int agent = celer::get(a.task(&probe::parent_pid).remote(), 60s);
  auto opts = on_node(1);
  opts.durable = true;
  auto kept = celer::task(big_pattern).options(opts).remote(3 << 20, 11);
  auto no_retries = on_node(1);
  no_retries.max_retries = 0;  // else it would be made again (lineage)
  auto lost = celer::task(big_pattern).options(no_retries).remote(3 << 20, 12);
  // Made, but not read yet: the only copies are on node 1.
  REQUIRE(celer::wait(std::vector{kept, lost}, 2, 60s).ready.size() == 2);
  REQUIRE(::kill(agent, SIGKILL) == 0);
  REQUIRE(eventually([&] { return cluster.status().find("1 dead") != std::string::npos; }, 15s));
  const std::string again = run(std::string(CELER_CLI) + " start --address " + cluster.address +
                                " --num-cpus 1 --resources '{\"node1\": 1}'");
  REQUIRE_THAT(again, Contains("joined"));
  // The restarted node reports what it found on disk to the head just after it registers;
  // a read finds the object once the head has that report.
  celer::bytes back;
  REQUIRE(eventually([&] {
    auto got = celer::try_get(kept, 10s);
    if (got) back = std::move(*got);
    return got.has_value();
  }, 20s));
  CHECK(digest(back) == digest(big_pattern(3 << 20, 11)));
  // What was not durable died with the node, and says so.
  try {
    (void)celer::get(lost, 60s);
    FAIL("a non-durable object of a dead node was read");
  } catch (const celer::object_lost_error& e) {
    CHECK_THAT(e.what(), Contains("died") && Contains("max_retries"));
    CHECK(e.origin() == "big_pattern");
  }
}

TEST_CASE("lost task outputs are made again from their lineage when their node dies",
          "[cluster][store][chaos]") {
  local_cluster cluster(/*node_timeout_ms=*/1500);
  celer::init();
  auto a = celer::actor(make_probe).options({.num_cpus = 0, .resources = {{"node1", 0.5}}}).remote();
  const int agent = celer::get(a.task(&probe::parent_pid).remote(), 60s);
  const auto node1 = celer::node_id::parse(celer::get(a.task(&probe::where).remote(), 60s));
  REQUIRE(node1);
  // Preferring node 1, but free to run elsewhere once it is gone.
  celer::task_options there{.scheduling = celer::scheduling_strategy::node_affinity(*node1, true)};
  // One at a time, so that each finds node 1's CPU free.
  auto first = celer::task(big_pattern).options(there).remote(3 << 20, 21);
  REQUIRE(celer::wait(std::vector{first}, 1, 60s).ready.size() == 1);
  auto second = celer::task(reversed).options(there).remote(first);  // two tasks deep
  REQUIRE(celer::wait(std::vector{second}, 1, 60s).ready.size() == 1);
  auto no_retries = there;
  no_retries.max_retries = 0;
  auto gone = celer::task(big_pattern).options(no_retries).remote(3 << 20, 22);
  REQUIRE(celer::wait(std::vector{gone}, 1, 60s).ready.size() == 1);
  REQUIRE(::kill(agent, SIGKILL) == 0);
  // Both outputs lived only on node 1: each task runs again (second's run asks for first).
  const auto expected_first = big_pattern(3 << 20, 21);
  auto expected_second = expected_first;
  std::reverse(expected_second.begin(), expected_second.end());
  CHECK(digest(celer::get(second, 60s)) == digest(expected_second));
  CHECK(digest(celer::get(first, 60s)) == digest(expected_first));
  // Without retries it is lost, and says what made it.
  try {
    (void)celer::get(gone, 60s);
    FAIL("an output without retries was read after its node died");
  } catch (const celer::object_lost_error& e) {
    CHECK(e.origin() == "big_pattern");
    CHECK(e.node() == node1->short_hex());
    CHECK_THAT(e.what(), Contains("max_retries"));
  }
}

TEST_CASE("an object no ref holds is freed on every node that has a copy", "[cluster][store]") {
  local_cluster cluster;
  celer::init();
  auto count = [](const std::string& st, const std::string& what) {
    std::size_t n = 0;
    for (auto at = st.find(what); at != std::string::npos; at = st.find(what, at + 1)) ++n;
    return n;
  };
  {
    auto made = celer::task(big_pattern).options(on_node(1)).remote(8 << 20, 3);
    const auto here = celer::get(made, 60s);  // pulled to the driver's node: two copies
    CHECK(digest(here) == digest(big_pattern(8 << 20, 3)));
    REQUIRE(eventually([&] { return count(cluster.status(), "in memory (1 objects)") == 2; }, 15s));
  }  // the ref and the view are gone: the owner frees both copies
  CHECK(eventually([&] { return count(cluster.status(), "in memory (0 objects)") == 3; }, 15s));
}
