// What one job's messages can do to another job at the head (issue 34): placement groups,
// resource amounts, what a job reports, queries, actor names and subscriptions. Each
// message is one a job's connection may send; `sender_job` is what the transport stamps.
#include "fakes/recording_transport.hpp"
#include "head/head.hpp"

#include <celer/version.hpp>

#include <catch2/catch.hpp>

#include <limits>

using namespace celer;
using Catch::Matchers::Contains;

namespace {

struct isolation_fixture {
  fakes::recording_transport net;
  head h{net};
  node_id node = node_id::random();
  address node_addr{node, "tcp://10.0.0.1:7"};
  job_id k = job_id::random(), j = job_id::random();
  address k_driver{unique_id::random(), "tcp://10.0.0.9:1#job=" + k.hex()};
  address j_driver{unique_id::random(), "tcp://10.0.0.9:2#job=" + j.hex()};

  isolation_fixture() {
    protocol::register_node r;
    r.protocol_version = protocol_version;
    r.node = node;
    r.node_address = node_addr;
    r.total = *protocol::make_request(4, 0, 0, {{"slot", 2}});
    handle(r);
  }
  void handle(protocol::message m) { h.handle(m); }

  protocol::create_actor actor(const job_id& job, const address& driver, const std::string& name = {}) {
    protocol::create_actor c;
    c.request_id = 7;
    c.reply_to = driver;
    c.spec.id = task_id::random();
    c.spec.kind = protocol::task_kind::actor_creation;
    c.spec.function = "make_counter";
    c.spec.actor = actor_id::random();
    c.spec.actor_name = name;
    c.spec.owner = driver;
    c.spec.job = job;
    c.spec.resources = *protocol::make_request(1, 0, 0, {});
    return c;
  }
  /// Job K's group of one bundle of "slot" 1, created (the node said yes).
  placement_group_id k_group() {
    protocol::create_placement_group g;
    g.request_id = 3;
    g.reply_to = k_driver;
    g.id = placement_group_id::random();
    g.name = "k-group";
    g.bundles.push_back({*protocol::make_request(0, 0, 0, {{"slot", 1}}), {}});
    g.job = k;
    handle(g);
    REQUIRE(net.take<protocol::reserve_bundle>().size() == 1);
    handle(protocol::bundle_reserved{g.id, 0, node, true, {}});
    REQUIRE(net.take<protocol::placement_group_reply>().at(0).second.ok);
    return g.id;
  }
  protocol::request_lease lease(const job_id& job, const address& owner) {
    protocol::request_lease r;
    r.spec.id = task_id::random();
    r.spec.function = "f";
    r.spec.owner = owner;
    r.spec.job = job;
    r.spec.resources = *protocol::make_request(1, 0, 0, {});
    return r;
  }
};

protocol::placement in_group(const placement_group_id& g, std::int32_t bundle) {
  protocol::placement p;
  p.how = scheduling_strategy::kind::placement_group;
  p.group = g;
  p.bundle = bundle;
  return p;
}

} // namespace

TEST_CASE("resource amounts are valid only when non-negative, bounded, with whole GPUs above 1",
          "[resources][security]") {
  protocol::resource_set s;
  s.amounts = {{"CPU", 2 * protocol::resource_unit}, {"GPU", protocol::resource_unit / 2}};
  CHECK(protocol::validate_amounts(s, "request").has_value());
  s.amounts = {{"CPU", -100 * protocol::resource_unit}};
  auto bad = protocol::validate_amounts(s, "request f");
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().code() == error_code::invalid_argument);
  CHECK_THAT(bad.error().message(), Contains("request f") && Contains("'CPU'") && Contains("-100"));
  s.amounts = {{"GPU", std::numeric_limits<std::int64_t>::max()}};
  CHECK_FALSE(protocol::validate_amounts(s, "x").has_value());
  s.amounts = {{"GPU", 1'000'001 * protocol::resource_unit}};  // past a million units
  CHECK_FALSE(protocol::validate_amounts(s, "x").has_value());
  s.amounts = {{"GPU", 1'000'000 * protocol::resource_unit}};
  CHECK(protocol::validate_amounts(s, "x").has_value());
  s.amounts = {{"GPU", 25'000}};  // 2.5 GPUs
  CHECK_FALSE(protocol::validate_amounts(s, "x").has_value());
  s.amounts = {{"memory", static_cast<std::int64_t>(1e14) * protocol::resource_unit}};  // 100 TB
  CHECK(protocol::validate_amounts(s, "x").has_value());
  s.amounts = {{"memory", static_cast<std::int64_t>(2e14) * protocol::resource_unit}};
  CHECK_FALSE(protocol::validate_amounts(s, "x").has_value());
  s.amounts = {{"", 1}};
  CHECK_FALSE(protocol::validate_amounts(s, "x").has_value());
  s.amounts = {{std::string(129, 'r'), 1}};
  CHECK_FALSE(protocol::validate_amounts(s, "x").has_value());
  s.amounts.clear();
  for (int i = 0; i < 65; ++i) s.amounts["r" + std::to_string(i)] = 1;
  CHECK_FALSE(protocol::validate_amounts(s, "x").has_value());
}

TEST_CASE("the head refuses negative and huge amounts in requests, actors, bundles and nodes, "
          "and its view is unchanged",
          "[head][resources][security]") {
  isolation_fixture f;
  auto r = f.lease(f.j, f.j_driver);
  r.spec.resources.amounts = {{"CPU", -100 * protocol::resource_unit}};
  f.handle(r);
  CHECK(f.net.take<protocol::request_lease>().empty());  // sent to no node
  auto replies = f.net.take<protocol::lease_reply>();
  REQUIRE(replies.size() == 1);
  CHECK(replies[0].second.fail.code == error_code::invalid_argument);

  auto c = f.actor(f.j, f.j_driver);
  c.spec.resources.amounts = {{"GPU", std::numeric_limits<std::int64_t>::max()}};
  f.handle(c);
  CHECK(f.net.take<protocol::start_actor>().empty());
  auto created = f.net.take<protocol::create_actor_reply>();
  REQUIRE(created.size() == 1);
  CHECK_FALSE(created[0].second.ok);
  CHECK(created[0].second.fail.code == error_code::invalid_argument);

  protocol::create_placement_group g;
  g.reply_to = f.j_driver;
  g.id = placement_group_id::random();
  g.bundles.push_back({{}, {}});
  g.bundles[0].need.amounts = {{"CPU", -4 * protocol::resource_unit}};
  g.job = f.j;
  f.handle(g);
  CHECK(f.net.take<protocol::reserve_bundle>().empty());
  auto pg = f.net.take<protocol::placement_group_reply>();
  REQUIRE(pg.size() == 1);
  CHECK(pg[0].second.fail.code == error_code::invalid_argument);

  protocol::register_node bad;
  bad.protocol_version = protocol_version;
  bad.node = node_id::random();
  bad.node_address = address{bad.node, "tcp://10.0.0.2:7"};
  bad.total.amounts = {{"CPU", -100 * protocol::resource_unit}};
  f.handle(bad);

  f.handle(protocol::resource_query{1, f.j_driver});
  auto totals = f.net.take<protocol::resource_reply>();
  REQUIRE(totals.size() == 1);
  CHECK(totals[0].second.total.get("CPU") == 4);  // the one node, as it registered
  CHECK(totals[0].second.available.get("CPU") == 4);
}

TEST_CASE("a job's work in another job's placement group is refused, and a job lists only its "
          "own groups",
          "[head][groups][security]") {
  isolation_fixture f;
  const auto group = f.k_group();

  auto r = f.lease(f.j, f.j_driver);
  r.spec.where = in_group(group, 0);
  f.handle(r);
  CHECK(f.net.take<protocol::request_lease>().empty());
  auto replies = f.net.take<protocol::lease_reply>();
  REQUIRE(replies.size() == 1);
  CHECK(replies[0].first == f.j_driver);
  CHECK(replies[0].second.fail.code == error_code::permission_denied);

  auto c = f.actor(f.j, f.j_driver);
  c.spec.where = in_group(group, -1);
  f.handle(c);
  CHECK(f.net.take<protocol::start_actor>().empty());
  auto created = f.net.take<protocol::create_actor_reply>();
  REQUIRE(created.size() == 1);
  CHECK(created[0].second.fail.code == error_code::permission_denied);

  // K's own work goes to its bundle.
  auto mine = f.lease(f.k, f.k_driver);
  mine.spec.resources = *protocol::make_request(0, 0, 0, {{"slot", 1}});  // what the bundle holds
  mine.spec.where = in_group(group, 0);
  f.handle(mine);
  CHECK(f.net.take<protocol::request_lease>().size() == 1);

  protocol::placement_group_query q{1, f.j_driver, {}, f.j};
  f.handle(q);
  auto listed = f.net.take<protocol::placement_group_list>();
  REQUIRE(listed.size() == 1);
  CHECK(listed[0].second.groups.empty());
  f.handle(protocol::placement_group_query{2, f.j_driver, group, f.j});
  CHECK(f.net.take<protocol::placement_group_list>().at(0).second.groups.empty());
  f.handle(protocol::placement_group_query{3, f.k_driver, {}, f.k});
  CHECK(f.net.take<protocol::placement_group_list>().at(0).second.groups.size() == 1);
  f.handle(protocol::placement_group_query{4, f.k_driver, {}, {}});  // the head, a node, the CLI
  CHECK(f.net.take<protocol::placement_group_list>().at(0).second.groups.size() == 1);
}

TEST_CASE("a job's status shows its own waiting work and actors only; subscribing to or "
          "re-creating another job's actor is refused",
          "[head][security]") {
  isolation_fixture f;
  auto c = f.actor(f.k, f.k_driver, "counter");
  f.handle(c);
  REQUIRE(f.net.take<protocol::create_actor_reply>().at(0).second.ok);
  const address worker{unique_id::random(), "tcp://10.0.0.1:9#job=" + f.k.hex()};
  f.handle(protocol::actor_started{c.spec.actor, worker, {}, {}});
  (void)f.net.take<protocol::actor_update>();
  protocol::heartbeat hb;
  hb.node = f.node;
  hb.available = *protocol::make_request(3, 0, 0, {});
  hb.waiting.push_back({"k_task", protocol::task_kind::normal, f.k, {}, {}, 5, {}, 0});
  f.handle(hb);

  f.handle(protocol::status_query{1, f.j_driver, f.j});
  auto st = f.net.take<protocol::status_reply>();
  REQUIRE(st.size() == 1);
  REQUIRE(st[0].second.nodes.size() == 1);
  CHECK(st[0].second.nodes[0].total.get("CPU") == 4);  // the cluster's totals are for all
  CHECK(st[0].second.nodes[0].waiting.empty());
  CHECK(st[0].second.actors_alive == 0);
  f.handle(protocol::status_query{2, f.k_driver, f.k});
  st = f.net.take<protocol::status_reply>();
  CHECK(st[0].second.nodes[0].waiting.size() == 1);
  CHECK(st[0].second.actors_alive == 1);

  // subscribe_actor naming K's driver as the subscriber: nothing is sent to anyone.
  f.handle(protocol::subscribe_actor{c.spec.actor, f.k_driver, f.j});
  f.handle(protocol::subscribe_actor{c.spec.actor, f.j_driver, f.j});
  CHECK(f.net.take<protocol::actor_update>().empty());

  // create_actor with K's actor's id: refused, J is not subscribed, the actor unchanged.
  auto again = f.actor(f.j, f.j_driver);
  again.spec.actor = c.spec.actor;
  f.handle(again);
  auto replies = f.net.take<protocol::create_actor_reply>();
  REQUIRE(replies.size() == 1);
  CHECK_FALSE(replies[0].second.ok);
  CHECK(replies[0].second.fail.code == error_code::permission_denied);
  f.handle(protocol::kill_actor{c.spec.actor, "test"});  // the head itself
  auto told = f.net.take<protocol::actor_update>();
  REQUIRE(told.size() == 1);
  CHECK(told[0].first == f.k_driver);

  // explain_placement of K's actor, asked by J: not explained.
  protocol::explain_placement e;
  e.request_id = 9;
  e.reply_to = f.j_driver;
  e.actor = c.spec.actor;
  e.sender_job = f.j;
  f.handle(e);
  CHECK_THAT(f.net.take<protocol::placement_explained>().at(0).second.why, Contains("permission_denied"));
}

TEST_CASE("actor names live in the job's own namespace unless a shared one is named",
          "[head][actor][security]") {
  isolation_fixture f;
  auto k_actor = f.actor(f.k, f.k_driver, "ps");
  f.handle(k_actor);
  REQUIRE(f.net.take<protocol::create_actor_reply>().at(0).second.ok);
  // J takes the same name: in its own namespace, not K's.
  auto j_actor = f.actor(f.j, f.j_driver, "ps");
  f.handle(j_actor);
  REQUIRE(f.net.take<protocol::create_actor_reply>().at(0).second.ok);
  f.handle(protocol::lookup_actor{1, f.k_driver, "ps", f.k, {}});
  auto found = f.net.take<protocol::lookup_actor_reply>();
  REQUIRE(found.at(0).second.found);
  CHECK(found[0].second.actor == k_actor.spec.actor);
  f.handle(protocol::lookup_actor{2, f.j_driver, "ps", f.j, {}});
  CHECK(f.net.take<protocol::lookup_actor_reply>().at(0).second.actor == j_actor.spec.actor);

  // A shared namespace: the first job to name it there holds the name.
  auto shared = f.actor(f.k, f.k_driver, "board");
  shared.spec.name_space = "team";
  f.handle(shared);
  REQUIRE(f.net.take<protocol::create_actor_reply>().at(0).second.ok);
  auto squat = f.actor(f.j, f.j_driver, "board");
  squat.spec.name_space = "team";
  f.handle(squat);
  auto refused = f.net.take<protocol::create_actor_reply>();
  CHECK_FALSE(refused.at(0).second.ok);
  CHECK(refused[0].second.fail.code == error_code::already_exists);
  f.handle(protocol::lookup_actor{3, f.j_driver, "board", f.j, "team"});
  CHECK(f.net.take<protocol::lookup_actor_reply>().at(0).second.actor == shared.spec.actor);
  // K named "team" first: its processes that name no namespace look there too.
  f.handle(protocol::lookup_actor{4, f.k_driver, "board", f.k, {}});
  CHECK(f.net.take<protocol::lookup_actor_reply>().at(0).second.actor == shared.spec.actor);
  // K's own name is not in "team".
  f.handle(protocol::lookup_actor{5, f.j_driver, "ps", f.j, "team"});
  CHECK_FALSE(f.net.take<protocol::lookup_actor_reply>().at(0).second.found);

  // A namespace named in the call (protocol 22) is that actor's, never the job's default:
  // J's default stays "team" (its lookup 3 named it first, as CELER_NAMESPACE would).
  auto named = f.actor(f.j, f.j_driver, "svc");
  named.spec.name_space = "ops";
  named.spec.namespace_named = true;
  f.handle(named);
  REQUIRE(f.net.take<protocol::create_actor_reply>().at(0).second.ok);
  f.handle(protocol::lookup_actor{6, f.j_driver, "svc", f.j, {}});
  CHECK_FALSE(f.net.take<protocol::lookup_actor_reply>().at(0).second.found);
  f.handle(protocol::lookup_actor{7, f.j_driver, "board", f.j, {}});
  CHECK(f.net.take<protocol::lookup_actor_reply>().at(0).second.actor == shared.spec.actor);
  // Named in a lookup, by either job: found there, and K's default ("team") is unchanged.
  f.handle(protocol::lookup_actor{8, f.k_driver, "svc", f.k, "ops", true});
  CHECK(f.net.take<protocol::lookup_actor_reply>().at(0).second.actor == named.spec.actor);
  f.handle(protocol::lookup_actor{9, f.k_driver, "board", f.k, {}});
  CHECK(f.net.take<protocol::lookup_actor_reply>().at(0).second.actor == shared.spec.actor);
  // A job whose first namespace is named in the call has no default either.
  const job_id l = job_id::random();
  const address l_driver{unique_id::random(), "tcp://10.0.0.9:3#job=" + l.hex()};
  f.handle(protocol::lookup_actor{10, l_driver, "svc", l, "ops", true});
  CHECK(f.net.take<protocol::lookup_actor_reply>().at(0).second.found);
  f.handle(protocol::lookup_actor{11, l_driver, "svc", l, {}});
  CHECK_FALSE(f.net.take<protocol::lookup_actor_reply>().at(0).second.found);
}

TEST_CASE("a job's node-death subscriptions are bounded and go when the job ends", "[head][security]") {
  fakes::recording_transport net;
  std::chrono::steady_clock::time_point now{};
  head h{net, std::chrono::milliseconds(1000), 0.5, [&] { return now; }};
  auto handle = [&](protocol::message m) { h.handle(m); };
  const job_id j = job_id::random(), k = job_id::random();
  auto join = [&](const node_id& n) {
    protocol::register_node r;
    r.protocol_version = protocol_version;
    r.node = n;
    r.node_address = address{n, "tcp://10.0.0.1:" + std::to_string(n.lo % 60000)};
    r.total = *protocol::make_request(1, 0, 0, {});
    handle(r);
  };
  const node_id live = node_id::random(), first = node_id::random(), second = node_id::random();
  join(live);
  join(first);
  join(second);
  const std::size_t cap = head::max_cluster_subscriptions_per_job;
  auto j_process = [&](std::size_t i) {
    return address{unique_id::random(), "tcp://10.0.0.9:" + std::to_string(i) + "#job=" + j.hex()};
  };
  for (std::size_t i = 0; i < cap + 100; ++i) handle(protocol::subscribe_cluster{j_process(i), j});
  const address k_driver{unique_id::random(), "tcp://10.0.0.8:1#job=" + k.hex()};
  handle(protocol::subscribe_cluster{k_driver, k});
  handle(protocol::subscribe_cluster{k_driver, k});  // a resend: kept once
  handle(protocol::subscribe_cluster{address{unique_id::random(), "tcp://10.0.0.8:2#" + std::string(600, 'x')}, k});

  // A node dies: each kept subscriber hears of it once, and the other live nodes.
  auto deaths_told = [&](const node_id& dying) {
    now += std::chrono::milliseconds(1500);
    protocol::heartbeat b;
    b.node = live;
    b.available = *protocol::make_request(1, 0, 0, {});
    handle(b);
    if (dying != second) {
      b.node = second;
      handle(b);
    }
    handle(protocol::tick{});
    std::size_t to_j = 0, to_k = 0;
    for (const auto& [to, m] : net.take<protocol::node_died>()) {
      if (m.node != dying) continue;
      to_j += to.endpoint.find("#job=" + j.hex()) != std::string::npos;
      to_k += to == k_driver;
    }
    return std::pair{to_j, to_k};
  };
  const auto [j_told, k_told] = deaths_told(first);
  CHECK(j_told == cap);  // the rest were refused
  CHECK(k_told == 1);

  // J ends: its subscriptions go; K's stays.
  handle(protocol::job_finished{j});
  const auto [j_after, k_after] = deaths_told(second);
  CHECK(j_after == 0);
  CHECK(k_after == 1);
}

TEST_CASE("what a job reports in its heartbeat is capped as it arrives", "[head][security]") {
  isolation_fixture f;
  auto board = std::make_shared<head_snapshot_board>();
  f.h.publish_to(board);
  protocol::job_heartbeat hb;
  hb.job = f.j;
  hb.tasks.latency.assign(1000, 1);
  for (int i = 0; i < 3; ++i) {
    protocol::task_event e;
    e.task = task_id::random();
    e.function = std::string(1 << 20, 'f');
    e.detail = std::string(1 << 20, 'd');
    e.state = protocol::task_state::failed;
    hb.tasks.changes.push_back(std::move(e));
  }
  f.handle(hb);
  f.handle(protocol::tick{});
  const auto snap = board->latest();
  REQUIRE(snap);
  const auto page = snap->task_list->list({});
  REQUIRE(page.rows.size() == 3);
  for (const auto& row : page.rows) {
    CHECK(row.function.size() <= 256);
    CHECK(row.error.size() <= 1024);
    CHECK_THAT(row.function, Contains("[truncated]"));
    CHECK_THAT(row.error, Contains("[truncated]"));
  }
}

TEST_CASE("a job cannot kill another job's actor, with or without a restart; its own kill that "
          "lets it restart goes to its node and marks nothing",
          "[head][actor][security]") {
  isolation_fixture f;
  auto c = f.actor(f.k, f.k_driver);
  c.spec.max_restarts = 1;
  f.handle(c);
  REQUIRE(f.net.take<protocol::create_actor_reply>().at(0).second.ok);
  REQUIRE(f.net.take<protocol::start_actor>().size() == 1);
  const address worker{unique_id::random(), "tcp://10.0.0.1:9#job=" + f.k.hex()};
  f.handle(protocol::actor_started{c.spec.actor, worker, {}, {}});
  REQUIRE(f.net.take<protocol::actor_update>().size() == 1);

  for (const bool no_restart : {false, true}) {
    protocol::kill_actor forged{c.spec.actor, "mine now", f.j};
    forged.no_restart = no_restart;
    f.handle(forged);
  }
  CHECK(f.net.take<protocol::kill_actor>().empty());
  CHECK(f.net.take<protocol::actor_update>().empty());

  protocol::kill_actor own{c.spec.actor, "killed by celer::kill", f.k};
  own.no_restart = false;
  f.handle(own);
  auto sent = f.net.take<protocol::kill_actor>();
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].first == f.node_addr);
  CHECK_FALSE(sent[0].second.no_restart);
  CHECK(f.net.take<protocol::actor_update>().empty());  // alive until its node says it died

  // The node's word that it died: it restarts (its one restart).
  f.handle(protocol::actor_failed{c.spec.actor,
                                  protocol::failure_info::make(detail::failure_kind::actor_died,
                                                               error_code::unavailable, "killed, restarting")});
  auto told = f.net.take<protocol::actor_update>();
  REQUIRE(told.size() == 1);
  CHECK(told[0].second.state == protocol::actor_state::restarting);
  REQUIRE(f.net.take<protocol::start_actor>().size() == 1);
  f.handle(protocol::actor_started{c.spec.actor, worker, {}, {}});
  (void)f.net.take<protocol::actor_update>();

  // No restart left: the same kill is final, and says why.
  f.handle(own);
  told = f.net.take<protocol::actor_update>();
  REQUIRE(told.size() == 1);
  CHECK(told[0].second.state == protocol::actor_state::dead);
  CHECK_THAT(told[0].second.fail.message, Contains("no restarts left"));
  sent = f.net.take<protocol::kill_actor>();
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].second.no_restart);
}
