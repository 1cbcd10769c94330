// Control requests may be sent again: after a lost reply, or to a head started again after
// a crash (docs/fault-tolerance.md, "Control requests"). Each resend has the outcome of the
// first, and nothing is reserved, started, killed or given back twice.
#include "fakes/recording_transport.hpp"
#include "head/head.hpp"

#include <celer/version.hpp>

#include <catch2/catch.hpp>

using namespace celer;
using namespace std::chrono_literals;

namespace {

const address driver{unique_id{7, 7}, "tcp://10.0.0.9:1"};

struct head_fixture {
  fakes::recording_transport net;
  std::chrono::steady_clock::time_point now{};
  head h{net, 1000ms, 0.5, [this] { return now; }};

  void handle(protocol::message m) { h.handle(m); }
  static protocol::register_node registration(const node_id& n) {
    protocol::register_node r;
    r.protocol_version = protocol_version;
    r.node = n;
    r.node_address = address{n, "tcp://10.0.0.1:" + std::to_string(n.lo % 60000)};
    r.total = *protocol::make_request(2, 0, 0, {});
    return r;
  }
  address join(const node_id& n) {
    handle(registration(n));
    return registration(n).node_address;
  }
  protocol::create_actor actor(const actor_id& id, const job_id& job) {
    protocol::create_actor c;
    c.request_id = 1;
    c.reply_to = driver;
    c.spec.id = task_id::random();
    c.spec.kind = protocol::task_kind::actor_creation;
    c.spec.function = "make_counter";
    c.spec.actor = id;
    c.spec.job = job;
    c.spec.owner = driver;
    c.spec.resources = *protocol::make_request(1, 0, 0, {});
    return c;
  }
  protocol::create_placement_group group(const placement_group_id& id, const job_id& job) {
    protocol::create_placement_group g;
    g.request_id = 2;
    g.reply_to = driver;
    g.id = id;
    g.job = job;
    g.bundles = {protocol::bundle_spec{*protocol::make_request(1, 0, 0, {}), {}},
                 protocol::bundle_spec{*protocol::make_request(1, 0, 0, {}), {}}};
    return g;
  }
  double available_cpus() {
    handle(protocol::resource_query{9, driver});
    auto r = net.take<protocol::resource_reply>();
    REQUIRE(r.size() == 1);
    return r[0].second.available.get(protocol::cpu);
  }
};

} // namespace

TEST_CASE("create_actor sent twice registers, places and starts the actor once",
          "[head][idempotent]") {
  head_fixture f;
  f.join(node_id::random());
  const auto c = f.actor(actor_id::random(), job_id::random());
  f.handle(c);
  f.handle(c);
  auto replies = f.net.take<protocol::create_actor_reply>();
  REQUIRE(replies.size() == 2);
  CHECK(replies[0].second.ok);
  CHECK(replies[1].second.ok);
  CHECK(f.net.take<protocol::start_actor>().size() == 1);
  f.handle(protocol::actor_started{c.spec.actor, address{unique_id::random(), "tcp://10.0.0.1:9"}, {}, {}});
  CHECK(f.net.take<protocol::actor_update>().size() == 1);  // its creator, told once
}

TEST_CASE("create_placement_group sent twice reserves its bundles once", "[head][idempotent]") {
  head_fixture f;
  const node_id n = node_id::random();
  f.join(n);
  const auto g = f.group(placement_group_id::random(), job_id::random());
  f.handle(g);
  auto reserve = f.net.take<protocol::reserve_bundle>();
  REQUIRE(reserve.size() == 2);
  f.handle(g);  // while it is being reserved
  CHECK(f.net.take<protocol::reserve_bundle>().empty());
  for (const auto& [to, r] : reserve) f.handle(protocol::bundle_reserved{r.group, r.index, n, true, {}});
  f.handle(g);  // once it is created
  CHECK(f.net.take<protocol::reserve_bundle>().empty());
  auto replies = f.net.take<protocol::placement_group_reply>();
  REQUIRE(replies.size() == 3);
  for (const auto& [to, r] : replies) CHECK(r.ok);
  f.handle(protocol::placement_group_query{3, driver, g.id});
  auto list = f.net.take<protocol::placement_group_list>();
  REQUIRE(list.size() == 1);
  REQUIRE(list[0].second.groups.size() == 1);
  CHECK(list[0].second.groups[0].state == protocol::group_state::created);
}

TEST_CASE("remove_placement_group sent twice gives the bundles back once", "[head][idempotent]") {
  head_fixture f;
  const node_id n = node_id::random();
  f.join(n);
  const auto g = f.group(placement_group_id::random(), job_id::random());
  f.handle(g);
  for (const auto& [to, r] : f.net.take<protocol::reserve_bundle>()) {
    f.handle(protocol::bundle_reserved{r.group, r.index, n, true, {}});
  }
  f.handle(protocol::remove_placement_group{g.id, {}});
  f.handle(protocol::remove_placement_group{g.id, {}});
  auto back = f.net.take<protocol::return_bundles>();
  REQUIRE(back.size() == 1);
  CHECK(back[0].second.indices.size() == 2);
}

TEST_CASE("kill_actor sent twice stops the actor once", "[head][idempotent]") {
  head_fixture f;
  f.join(node_id::random());
  const auto c = f.actor(actor_id::random(), job_id::random());
  f.handle(c);
  f.handle(protocol::actor_started{c.spec.actor, address{unique_id::random(), "tcp://10.0.0.1:9"}, {}, {}});
  (void)f.net.take<protocol::actor_update>();
  f.handle(protocol::kill_actor{c.spec.actor, "killed", {}});
  f.handle(protocol::kill_actor{c.spec.actor, "killed", {}});
  CHECK(f.net.take<protocol::kill_actor>().size() == 1);
  auto updates = f.net.take<protocol::actor_update>();
  REQUIRE(updates.size() == 1);
  CHECK(updates[0].second.state == protocol::actor_state::dead);
}

TEST_CASE("register_node sent again keeps what the node's heartbeats said, and a node declared "
          "dead stays dead",
          "[head][idempotent][fault]") {
  head_fixture f;
  const node_id n = node_id::random();
  const address addr = f.join(n);
  protocol::heartbeat b;
  b.node = n;
  b.available = *protocol::make_request(0.5, 0, 0, {});
  f.handle(b);
  REQUIRE(f.available_cpus() == 0.5);
  f.handle(head_fixture::registration(n));  // resent: the view is not reset to its total
  CHECK(f.available_cpus() == 0.5);
  f.handle(protocol::status_query{4, driver});
  auto st = f.net.take<protocol::status_reply>();
  REQUIRE(st.size() == 1);
  CHECK(st[0].second.nodes.size() == 1);

  f.now += 1500ms;
  f.handle(protocol::tick{});
  REQUIRE(f.net.take<protocol::node_died>().empty());  // no one else to tell
  f.handle(head_fixture::registration(n));  // a stale resend of the dead node
  auto told = f.net.take<protocol::node_died>();
  REQUIRE(told.size() == 1);
  CHECK(told[0].first == addr);
  CHECK(f.available_cpus() == 0);  // still dead
}

TEST_CASE("job_finished sent twice stops the job's actors once", "[head][idempotent]") {
  head_fixture f;
  const address node = f.join(node_id::random());
  const job_id job = job_id::random();
  f.handle(protocol::job_heartbeat{job});
  const auto c = f.actor(actor_id::random(), job);
  f.handle(c);
  f.handle(protocol::actor_started{c.spec.actor, address{unique_id::random(), "tcp://10.0.0.1:9"}, {}, {}});
  f.handle(protocol::job_finished{job});
  f.handle(protocol::job_finished{job});
  auto kills = f.net.take<protocol::kill_actor>();
  REQUIRE(kills.size() == 1);
  CHECK(kills[0].first == node);
  CHECK(f.h.jobs().empty());
}

TEST_CASE("request_lease spilled twice goes to a node each time; the node keeps one",
          "[head][idempotent]") {
  // The head keeps no state per lease request: each copy is placed like the first (the
  // same node while the view is unchanged), and the node drops a copy of a request it
  // holds (tests/unit/runtime/node_head_restart_test.cpp).
  head_fixture f;
  const address node = f.join(node_id::random());
  protocol::request_lease r;
  r.spec.id = task_id::random();
  r.spec.function = "f";
  r.spec.owner = driver;
  r.spec.resources = *protocol::make_request(1, 0, 0, {});
  f.handle(r);
  f.handle(r);
  auto sent = f.net.take<protocol::request_lease>();
  REQUIRE(sent.size() == 2);
  for (const auto& [to, m] : sent) {
    CHECK(to == node);
    CHECK(m.from_head);
    CHECK(m.spec.id == r.spec.id);
  }
}
