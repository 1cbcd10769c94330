// The head's placement groups (head/placement_groups.hpp) on their own, on the recording
// transport: a group reserved on its nodes all or nothing, work that waited handed back
// when it is created, a refusal giving back what was reserved, a bundle's node dying (laid
// out again), removal by its job only, and job_ended.
#include "head/placement_groups.hpp"
#include "unit/runtime/head_managers.hpp"

#include <catch2/catch.hpp>

#include <optional>

using namespace celer;
using namespace celer_test;

namespace {

struct groups_fixture : head_parts {
  std::vector<protocol::request_lease> released_leases;
  std::vector<protocol::task_spec> released_actors;
  std::vector<std::pair<placement_group_id, std::string>> removed;
  placement_groups groups{net,
                          &tables,
                          nodes,
                          view,
                          guard,
                          events,
                          {.released =
                             [this](auto leases, auto actors) {
                               for (auto& l : leases) released_leases.push_back(std::move(l));
                               for (auto& a : actors) released_actors.push_back(std::move(a));
                             },
                           .removed = [this](const placement_group_id& g,
                                             const std::string& why) { removed.emplace_back(g, why); }}};
  const address driver{unique_id::random(), "tcp://10.0.0.9:1"};
  const job_id job = job_id::random();

  placement_group_id ask(std::size_t bundles, bundle_strategy strategy = bundle_strategy::strict_spread,
                         std::string name = {}, placement_group_id id = placement_group_id::random(),
                         std::optional<job_id> of_job = std::nullopt) {
    protocol::create_placement_group m;
    m.request_id = 3;
    m.reply_to = driver;
    m.id = id;
    m.name = std::move(name);
    m.strategy = strategy;
    m.job = of_job.value_or(job);
    for (std::size_t i = 0; i < bundles; ++i) m.bundles.push_back({*protocol::make_request(1, 0, 0, {})});
    groups.on(m);
    return m.id;
  }
  /// The one reply sent since the last call.
  protocol::placement_group_reply reply() {
    auto replies = net.take<protocol::placement_group_reply>();
    REQUIRE(replies.size() == 1);
    return replies[0].second;
  }
  /// The nodes asked to reserve, and each answers `ok`.
  std::size_t answer(bool ok_all, int refuse_index = -1) {
    auto asks = net.take<protocol::reserve_bundle>();
    for (auto& [to, r] : asks) {
      const bool ok = ok_all && r.index != refuse_index;
      protocol::bundle_reserved m{r.group, r.index, node_id{to.id}, ok, ok ? "" : "no room"};
      groups.on(m);
    }
    return asks.size();
  }
};

} // namespace

TEST_CASE("a group is created when every node reserved its bundle; the work that waited is handed back",
          "[head][groups]") {
  groups_fixture g;
  const node_id a = node_id::random(), b = node_id::random();
  (void)g.join(a);
  (void)g.join(b);
  const auto id = g.ask(2);
  auto replies = g.net.take<protocol::placement_group_reply>();
  REQUIRE(replies.size() == 1);
  CHECK(replies[0].second.ok);
  REQUIRE(g.groups.find(id) != nullptr);
  CHECK(g.groups.find(id)->state == protocol::group_state::pending);
  // Work for it before it is created waits.
  protocol::request_lease lease;
  lease.spec.id = task_id::random();
  lease.spec.job = g.job;
  lease.spec.resources = *protocol::make_request(1, 0, 0, {});
  lease.spec.where.how = scheduling_strategy::kind::placement_group;
  lease.spec.where.group = id;
  std::string why;
  bool never = true;
  CHECK(g.groups.route(lease.spec, why, never) == nullptr);
  CHECK_FALSE(never);
  CHECK(why.find("waits for its placement group") != std::string::npos);
  g.groups.wait_for(lease);
  CHECK(g.answer(true) == 2);
  CHECK(g.groups.find(id)->state == protocol::group_state::created);
  REQUIRE(g.released_leases.size() == 1);
  CHECK(g.released_leases[0].spec.id == lease.spec.id);
  // Now it routes to a bundle's node.
  auto* n = g.groups.route(lease.spec, why, never);
  REQUIRE(n != nullptr);
  CHECK((n->first == a || n->first == b));
  CHECK(lease.spec.where.bundle >= 0);
  // More than a bundle holds: never.
  lease.spec.resources = *protocol::make_request(2, 0, 0, {});
  CHECK(g.groups.route(lease.spec, why, never) == nullptr);
  CHECK(never);
}

TEST_CASE("one refusal gives back the bundles reserved; the group is laid out again at a tick",
          "[head][groups]") {
  groups_fixture g;
  (void)g.join(node_id::random());
  (void)g.join(node_id::random());
  const auto id = g.ask(2);
  CHECK(g.answer(true, 1) == 2);
  CHECK(g.groups.find(id)->state == protocol::group_state::pending);
  CHECK(g.groups.find(id)->why.find("no room") != std::string::npos);
  auto back = g.net.take<protocol::return_bundles>();
  REQUIRE(back.size() == 1);  // bundle 0's node gives it back
  CHECK(back[0].second.indices == std::vector<std::int32_t>{0});
  g.groups.tick();
  CHECK(g.answer(true) == 2);
  CHECK(g.groups.find(id)->state == protocol::group_state::created);
}

TEST_CASE("a bundle's node dying lays the group out again; its job ending removes it", "[head][groups][fault]") {
  groups_fixture g;
  const node_id a = node_id::random(), b = node_id::random(), c = node_id::random();
  (void)g.join(a);
  (void)g.join(b);
  const auto id = g.ask(2);
  (void)g.answer(true);
  REQUIRE(g.groups.find(id)->state == protocol::group_state::created);
  const auto dead = g.groups.find(id)->nodes[0];
  g.net.sent.clear();
  (void)g.join(c);
  g.node_dies(dead, "killed");
  CHECK(g.groups.find(id)->state == protocol::group_state::pending);
  auto back = g.net.take<protocol::return_bundles>();
  REQUIRE(back.size() == 1);  // the living bundle's node gives it back
  g.groups.tick();
  CHECK(g.answer(true) == 2);
  CHECK(g.groups.find(id)->state == protocol::group_state::created);
  const auto& now = g.groups.find(id)->nodes;
  CHECK(std::find(now.begin(), now.end(), dead) == now.end());

  // Another job cannot remove it; its job ending does.
  protocol::remove_placement_group evil{id, job_id::random()};
  g.groups.on(evil);
  CHECK(g.groups.find(id)->state == protocol::group_state::created);
  g.events.job_ended(g.job);
  CHECK(g.groups.find(id) == nullptr);
  REQUIRE(g.removed.size() == 1);
  CHECK(g.removed[0].first == id);
  auto state = g.tables.load();
  REQUIRE(state);
  CHECK(state->groups.empty());
}

TEST_CASE("a job is shown and may use its own groups only", "[head][groups][security]") {
  groups_fixture g;
  (void)g.join(node_id::random());
  const auto id = g.ask(1, bundle_strategy::pack);
  protocol::placement_group_query q{1, g.driver, {}, job_id::random()};
  g.groups.on(q);
  auto list = g.net.take<protocol::placement_group_list>();
  REQUIRE(list.size() == 1);
  CHECK(list[0].second.groups.empty());
  q.sender_job = g.job;
  g.groups.on(q);
  list = g.net.take<protocol::placement_group_list>();
  REQUIRE(list.size() == 1);
  CHECK(list[0].second.groups.size() == 1);
  protocol::task_spec spec;
  spec.job = job_id::random();
  spec.where.how = scheduling_strategy::kind::placement_group;
  spec.where.group = id;
  CHECK_FALSE(g.groups.may_use(spec));
  spec.job = g.job;
  CHECK(g.groups.may_use(spec));
}

TEST_CASE("a name names one live group of a job: a second is refused until the first is removed",
          "[head][groups]") {
  groups_fixture g;
  (void)g.join(node_id::random());
  const auto first = g.ask(1, bundle_strategy::pack, "trainers");
  CHECK(g.reply().ok);
  // Its request retried (a lost reply) is the same group, not a second one.
  (void)g.ask(1, bundle_strategy::pack, "trainers", first);
  CHECK(g.reply().ok);

  const auto second = g.ask(1, bundle_strategy::pack, "trainers");
  auto refused = g.reply();
  CHECK_FALSE(refused.ok);
  CHECK(refused.fail.code == error_code::already_exists);
  CHECK(refused.fail.message.find("'trainers' already exists (" + first.short_hex()) != std::string::npos);
  CHECK(g.groups.find(second) == nullptr);

  // Another job's group may have the name (names are the job's, as its groups are).
  (void)g.ask(1, bundle_strategy::pack, "trainers", placement_group_id::random(), job_id::random());
  CHECK(g.reply().ok);

  protocol::remove_placement_group remove{first, g.job};
  g.groups.on(remove);
  const auto third = g.ask(1, bundle_strategy::pack, "trainers");
  CHECK(g.reply().ok);
  REQUIRE(g.groups.find(third) != nullptr);
  CHECK(g.groups.find(third)->name == "trainers");
}
