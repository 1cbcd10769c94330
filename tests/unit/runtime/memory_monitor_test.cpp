// The node's memory monitor (node/memory_monitor.hpp): its policy on its own, what it reads
// from /proc, and a node agent on the recording transport whose workers' memory is over
// its limit: the newest retriable work's worker is killed first, one at a time, and its
// owner hears why. (A real memory hog on a real cluster: the hidden "[memory-hog]" case below,
// which tests/CMakeLists.txt runs against a cluster whose node has a 1 GiB limit.)
#include "fakes/recording_transport.hpp"
#include "node/memory_monitor.hpp"
#include "node/node_agent.hpp"
#include "unit/runtime/fixtures.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <thread>

using namespace celer;
using Catch::Matchers::Contains;

namespace {

using clock_t_ = std::chrono::steady_clock;

memory_monitor::candidate at(int seconds, bool retriable, worker_id& id) {
  id = worker_id::random();
  return {id, clock_t_::time_point{} + std::chrono::seconds(seconds), retriable};
}

/// A node of 4 CPUs whose workers are all "this process" (its resident memory is far over
/// the 1 MiB limit), on a clock the test moves.
struct hungry_node {
  fakes::recording_transport net;
  fakes::fake_launcher launcher;
  clock_t_::time_point now{};
  address head{unique_id::random(), {}};
  address owner{unique_id::random(), "tcp://10.0.0.9:1"};
  node_agent node;

  hungry_node() : node(net, launcher, config(*this)) {
    node.start();
    (void)net.take<protocol::register_node>();
  }
  static node_agent::config config(hungry_node& self) {
    node_agent::config c;
    c.id = node_id::random();
    c.self = address{c.id, {}};
    c.head = self.head;
    c.total = *protocol::make_request(4, 0, 0, {});
    c.memory_threshold = 0.5;
    c.memory_limit_bytes = 1024 * 1024;
    c.now = [&self] { return self.now; };
    return c;
  }
  /// Leases a worker for a task of function `f` with `max_retries`; the worker.
  worker_id lease(const std::string& f, int max_retries) {
    protocol::task_spec s;
    s.id = task_id::random();
    s.function = f;
    s.owner = owner;
    s.job = job_id::random();
    s.max_retries = max_retries;
    s.resources = *protocol::make_request(1, 0, 0, {});
    protocol::message m = protocol::request_lease{s, false};
    node.handle(m);
    auto g = net.take<protocol::lease_reply>();
    REQUIRE(g.size() == 1);
    REQUIRE(g[0].second.fail.message.empty());
    launcher.pids[g[0].second.worker] = static_cast<int>(::getpid());
    return g[0].second.worker;
  }
  void tick() {
    protocol::message m = protocol::tick{};
    node.handle(m);
  }
  void died(const worker_id& w) {
    protocol::message m = protocol::worker_died{w, "was killed by signal 9"};
    node.handle(m);
  }
};

} // namespace

TEST_CASE("the memory monitor kills the newest retriable worker, else the newest", "[node][memory]") {
  CHECK_FALSE(memory_monitor::choose({}));
  worker_id old_retriable, new_retriable, newest_not;
  const std::vector<memory_monitor::candidate> some{at(1, true, old_retriable), at(5, true, new_retriable),
                                                     at(9, false, newest_not)};
  CHECK(memory_monitor::choose(some) == new_retriable);
  // Order does not matter.
  const std::vector<memory_monitor::candidate> reversed{some[2], some[1], some[0]};
  CHECK(memory_monitor::choose(reversed) == new_retriable);
  // None retriable: the newest.
  worker_id a, b;
  CHECK(memory_monitor::choose({at(3, false, a), at(4, false, b)}) == b);
}

TEST_CASE("the memory monitor reads the machine's memory and a process's resident memory", "[node][memory]") {
  const auto u = memory_monitor::machine_usage();
  CHECK(u.total > 0);
  CHECK(u.used <= u.total);
  CHECK(u.share() > 0.0);
  CHECK(u.share() <= 1.0);
  CHECK(memory_monitor::resident_bytes(static_cast<int>(::getpid())) > 1024 * 1024);
  CHECK(memory_monitor::resident_bytes(-1) == 0);
  memory_monitor::usage over{950, 1000, "its workers' memory"};
  const auto why = memory_monitor::reason(over, 0.9, "hog", true);
  CHECK_THAT(why, Contains("memory monitor") && Contains("95.0%") && Contains("above its threshold of 90.0%") &&
                    Contains("it ran hog, the newest retriable work there") && Contains("raise the threshold"));
  CHECK_THAT(memory_monitor::reason(over, 0.9, "hog", false), Contains("none was retriable"));
  CHECK_FALSE(memory_monitor({.threshold = 1.0}).enabled());
}

TEST_CASE("a node over its memory limit kills one worker at a time, retriable work first, and says why",
          "[node][memory]") {
  hungry_node n;
  const auto retriable = n.lease("retried_f", 3);
  n.now += std::chrono::seconds(1);
  const auto newest = n.lease("once_f", 0);
  n.tick();
  REQUIRE(n.launcher.terminated == std::vector<worker_id>{retriable});
  // Not exited yet: no second kill.
  n.tick();
  CHECK(n.launcher.terminated.size() == 1);
  n.died(retriable);
  auto told = n.net.take<protocol::worker_died>();
  REQUIRE(told.size() == 1);
  CHECK(told[0].first == n.owner);
  CHECK(told[0].second.worker == retriable);
  CHECK_THAT(told[0].second.reason, Contains("killed by the node's memory monitor") && Contains("its workers' memory") &&
                                      Contains("retried_f, the newest retriable work there"));
  // Still over: the one left, not retriable, goes next.
  n.tick();
  REQUIRE(n.launcher.terminated == std::vector<worker_id>{retriable, newest});
  n.died(newest);
  told = n.net.take<protocol::worker_died>();
  REQUIRE(told.size() == 1);
  CHECK_THAT(told[0].second.reason, Contains("once_f, the newest work there (none was retriable)"));
  // Nothing lent: nothing to kill.
  n.tick();
  CHECK(n.launcher.terminated.size() == 2);
}

TEST_CASE("a node's memory monitor leaves thread workers alone", "[node][memory]") {
  hungry_node n;
  const auto w = n.lease("threaded_f", 3);
  n.launcher.pids.erase(w);  // an embedded worker: a thread of this process
  n.tick();
  CHECK(n.launcher.terminated.empty());
}

// ---- A real hog on a real cluster (tests/CMakeLists.txt starts the cluster with
// CELER_MEMORY_LIMIT_MB=1024 and CELER_MEMORY_USAGE_THRESHOLD=0.9; hidden elsewhere).

namespace {

/// Touches `mib` MiB, 32 MiB at a time, then holds it for up to 5 minutes (the node's
/// monitor kills it long before; the test's get gives up after 2). Returns `mib`.
std::size_t hog_memory(std::size_t mib) {
  std::vector<std::unique_ptr<char[]>> held;
  for (std::size_t got = 0; got < mib; got += 32) {
    held.push_back(std::make_unique<char[]>(32u << 20));
    std::memset(held.back().get(), 1, 32u << 20);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (int i = 0; i < 3000; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return mib;
}

/// A hog on its first attempt; a retry uses little and returns its attempt.
int hog_once(std::size_t mib) {
  const int attempt = celer::get_runtime_context().attempt;
  if (attempt == 1) (void)hog_memory(mib);
  return attempt;
}

CELER_REMOTE(hog_memory, hog_once);

} // namespace

TEST_CASE("a memory hog's worker is killed by its node's memory monitor; a retry that fits finishes",
          "[.][memory-hog][cluster-only]") {
  celer_test::scoped_runtime rt;
  // No retries: the task fails, saying what killed it and why.
  auto hog = celer::task(hog_memory).options({.max_retries = 0}).remote(std::size_t{2048});
  try {
    (void)celer::get(hog, std::chrono::seconds(120));
    FAIL("the hog was not killed");
  } catch (const celer::worker_died_error& e) {
    CHECK_THAT(std::string(e.what()), Contains("killed by the node's memory monitor") &&
                                        Contains("its workers' memory") && Contains("above its threshold of 90.0%") &&
                                        Contains("none was retriable"));
  }
  // With retries: the first attempt is killed, the second (small) finishes.
  auto once = celer::task(hog_once).options({.max_retries = 2}).remote(std::size_t{2048});
  CHECK(celer::get(once, std::chrono::seconds(120)) == 2);
}
