// Placement groups in an embedded runtime: bundles reserved all or nothing, work run
// inside them on what they reserved, waiting until resources free up, and removal
// stopping what runs in them. (Across nodes: tests/integration/scheduling_test.cpp.)
#include "unit/runtime/fixtures.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

using namespace celer_test;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

/// Whether `f` turns true within `limit` (asked every few milliseconds).
template <class F>
bool eventually(F f, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!f()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

std::vector<int> devices_here() { return celer::gpu_ids(); }

struct bundle_tenant {
  int ping() const { return 1; }
};
bundle_tenant* make_bundle_tenant() { return new bundle_tenant(); }

CELER_REMOTE(devices_here, make_bundle_tenant, &bundle_tenant::ping);

celer::placement_group_state state_of(const celer::placement_group& pg) {
  for (auto& g : celer::list_placement_groups()) {
    if (g.id == pg.id()) return g;
  }
  FAIL("placement group not listed");
  throw;
}

} // namespace

TEST_CASE("a placement group reserves its bundles and runs work inside them", "[embedded][groups]") {
  scoped_runtime rt({.num_cpus = 4, .gpus = "A100-80GB:2"});
  auto pg = celer::create_placement_group({.bundles = {{.num_cpus = 1, .num_gpus = 1},
                                                       {.num_cpus = 1, .num_gpus = 1}},
                                           .strategy = celer::bundle_strategy::strict_pack,
                                           .name = "trainers"});
  REQUIRE(pg.ready(10s));
  auto s = state_of(pg);
  CHECK(s.state == "created");
  CHECK(s.name == "trainers");
  CHECK(s.nodes == std::vector<celer::node_id>(2, celer::current_node_id()));
  // What the bundles hold is gone from the node for everything else.
  REQUIRE(eventually([] { return celer::available_resources()["CPU"] == 2; }, 5s));
  CHECK(celer::available_resources()["GPU"] == 0);
  // Inside a bundle, on its GPU.
  auto ids = celer::get(celer::task(devices_here).options({.num_cpus = 1, .num_gpus = 1,
                                                            .scheduling = pg.bundle(1)}).remote(), 30s);
  REQUIRE(ids.size() == 1);
  CHECK((ids[0] == 0 || ids[0] == 1));
  // More than a bundle reserves: refused with why.
  auto big = celer::task(devices_here).options({.num_cpus = 2, .scheduling = pg.bundle(0)}).remote();
  CHECK_THROWS_WITH(celer::get(big, 30s), Contains("more than bundle 0"));
  auto none = celer::task(devices_here).options({.num_cpus = 1, .scheduling = pg.bundle(5)}).remote();
  CHECK_THROWS_WITH(celer::get(none, 30s), Contains("there is no bundle 5"));
  // Removal stops what runs in it and gives everything back.
  auto tenant = celer::actor(make_bundle_tenant).options({.num_cpus = 1, .scheduling = pg.bundle(0)}).remote();
  REQUIRE(celer::get(tenant.task(&bundle_tenant::ping).remote(), 30s) == 1);
  // The tenant holds bundle 0's CPU: work for that bundle waits and says so, although the
  // node has CPUs free outside the group.
  auto second = celer::actor(make_bundle_tenant).options({.num_cpus = 1, .scheduling = pg.bundle(0)}).remote();
  REQUIRE(eventually([&] { return !celer::pending_reason(second).empty(); }, 5s));
  CHECK_THAT(celer::pending_reason(second),
             Contains("waits for room in bundle 0 of placement group") && Contains("reserves"));
  celer::remove_placement_group(pg);
  REQUIRE(eventually([&] { return state_of(pg).state == "removed"; }, 5s));
  CHECK_THROWS_AS(celer::get(tenant.task(&bundle_tenant::ping).remote(), 30s), celer::actor_died_error);
  CHECK_THROWS_WITH(pg.ready(1s), Contains("was removed"));
  REQUIRE(eventually([] { return celer::available_resources()["CPU"] == 4; }, 5s));
  CHECK(celer::available_resources()["GPU"] == 2);
}

TEST_CASE("a placement group that cannot be placed now waits, one that never can fails at once",
          "[embedded][groups]") {
  scoped_runtime rt({.num_cpus = 4});
  CHECK_THROWS_WITH(celer::create_placement_group({.bundles = {{.num_cpus = 5}}}),
                    Contains("can never be placed") && Contains("has 4 CPU in all"));
  CHECK_THROWS_AS(celer::create_placement_group({}), celer::exception);
  CHECK_THROWS_WITH(celer::create_placement_group({.bundles = {{.num_cpus = 1}, {.num_cpus = 1}},
                                                   .strategy = celer::bundle_strategy::strict_spread}),
                    Contains("strict_spread"));
  closed_gate gate;
  auto busy = celer::task(hold_until_released).options({.num_cpus = 3}).remote(7);
  REQUIRE(eventually([] { return celer::available_resources()["CPU"] == 1; }, 5s));
  auto pg = celer::create_placement_group({.bundles = {{.num_cpus = 2}}});
  CHECK_FALSE(pg.ready(200ms));
  // The head's view of the node lags: it may first try to reserve the bundle, be refused, and
  // only then say what the group waits for.
  CHECK(state_of(pg).state == "pending");
  REQUIRE(eventually([&] { return state_of(pg).why.find("waits for resources") != std::string::npos; }, 10s));
  CHECK(state_of(pg).state == "pending");
  CHECK(celer::available_resources()["CPU"] == 1);  // nothing half-reserved
  release_gate = true;
  REQUIRE(celer::get(busy, 30s) == 7);
  REQUIRE(pg.ready(10s));
  CHECK(state_of(pg).state == "created");
}
