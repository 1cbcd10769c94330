// Concurrency groups (actor_options::concurrency_groups, actor_builder::group,
// call_options::concurrency_group): an actor's methods run on their group's threads, beside
// the other groups'. Embedded and (the suite's pass against a local cluster) on a cluster:
// what the test sees is the actor's own state, shared by its threads in either mode.
#include "unit/runtime/fixtures.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

using namespace celer_test;
using Catch::Matchers::Contains;

namespace {

/// Waits (polling) until `done`, or 30 s: false if it never was.
template <class F>
bool within_30s(F done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

struct grouped {
  std::atomic<int> io_inside{0};
  std::atomic<int> io_most{0};
  std::atomic<bool> open{false};
  /// An io call: waits inside until a compute call opens the gate; false if none did.
  bool io() {
    const int now = ++io_inside;
    int most = io_most.load();
    while (now > most && !io_most.compare_exchange_weak(most, now)) {
    }
    const bool opened = within_30s([&] { return open.load(); });
    --io_inside;
    return opened;
  }
  /// Waits until `n` io calls are inside at once, then opens the gate for them: how many
  /// were inside (fewer than `n` after 30 s when they cannot all be).
  int compute(int n) {
    (void)within_30s([&] { return io_inside.load() >= n; });
    const int inside = io_inside.load();
    open = true;
    return inside;
  }
  int most_io_at_once() const { return io_most.load(); }
  std::string where() const { return "answered"; }
};
grouped* make_grouped() { return new grouped; }

CELER_REMOTE(make_grouped, &grouped::io, &grouped::compute, &grouped::most_io_at_once, &grouped::where);

} // namespace

TEST_CASE("a concurrency group's calls run on its own threads, beside another group's",
          "[api][actor][concurrency_groups]") {
  scoped_runtime rt;
  auto a = celer::actor(make_grouped)
             .options({.concurrency_groups = {{"io", 2}, {"compute", 1}}})
             .group("io", &grouped::io)
             .group("compute", &grouped::compute)
             .remote();
  // Three io calls, two threads: two wait inside, the third waits for a thread. The
  // compute call runs on its own group's thread, sees the two, and lets them go.
  std::vector<celer::object_ref<bool>> io;
  for (int i = 0; i < 3; ++i) io.push_back(a.task(&grouped::io).remote());
  CHECK(celer::get(a.task(&grouped::compute).remote(2)) == 2);
  for (bool opened : celer::get(io)) CHECK(opened);
  // Never more than the group's two threads at once; the rest (no group) runs as
  // max_concurrency says, beside the groups.
  CHECK(celer::get(a.task(&grouped::most_io_at_once).remote()) == 2);
  CHECK(celer::get(a.task(&grouped::where).remote()) == "answered");
}

TEST_CASE("one call can name its group; a group the actor lacks fails the call", "[api][actor][concurrency_groups]") {
  scoped_runtime rt;
  auto a = celer::actor(make_grouped).options({.concurrency_groups = {{"io", 1}, {"other", 1}}}).remote();
  // io() is in no group: it runs on the actor's own thread. compute, sent to "other",
  // runs beside it and lets it go.
  auto waiting = a.task(&grouped::io).remote();
  CHECK(celer::get(a.task(&grouped::compute).options({.concurrency_group = "other"}).remote(1)) == 1);
  CHECK(celer::get(waiting));
  auto bad = a.task(&grouped::where).options({.concurrency_group = "gpu"}).remote();
  CHECK_THROWS_WITH(celer::get(bad), Contains("no concurrency group 'gpu'") && Contains("io, other"));
  CHECK(celer::get(a.task(&grouped::where).remote()) == "answered");  // the actor lives on
}

TEST_CASE("concurrency groups are checked when the actor is created", "[api][actor][concurrency_groups]") {
  scoped_runtime rt;
  CHECK_THROWS_WITH(celer::actor(make_grouped).options({.concurrency_groups = {{"io", 0}}}).remote(),
                    Contains("1 to 1024 threads"));
  CHECK_THROWS_WITH(celer::actor(make_grouped).options({.concurrency_groups = {{"", 2}}}).remote(),
                    Contains("a name of 1 to 64 characters"));
  CHECK_THROWS_WITH(celer::actor(make_grouped).group("gpu", &grouped::io).remote(),
                    Contains("method") && Contains("'gpu'"));
  // options() after group() keeps the methods' groups.
  auto a = celer::actor(make_grouped).group("io", &grouped::io).options({.concurrency_groups = {{"io", 1}}}).remote();
  CHECK(celer::get(a.task(&grouped::where).remote()) == "answered");
}
