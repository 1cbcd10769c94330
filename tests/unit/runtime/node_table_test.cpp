// The head's node table (head/node_table.hpp) on its own, on the recording transport with a
// made-up clock: registrations join, are recognised when resent, and a node declared dead
// stays dead (and is told so); heartbeats keep a node's report; silent nodes are named
// with how long they were silent; the head's own stall counts against no node; marking a
// node dead writes its row and hands back its processes' endpoints; rows come back.
#include "fakes/memory_table_db.hpp"
#include "fakes/recording_transport.hpp"
#include "head/node_table.hpp"

#include <celer/version.hpp>

#include <catch2/catch.hpp>

#include <algorithm>

using namespace celer;
using namespace std::chrono_literals;

namespace {

struct table {
  fakes::recording_transport net;
  std::shared_ptr<fakes::memory_table_db::rows> rows = std::make_shared<fakes::memory_table_db::rows>();
  head_tables tables{std::make_shared<fakes::memory_table_db>(rows)};
  std::chrono::steady_clock::time_point now{};
  node_table nodes{net, &tables, [this] { return now; }};
};

protocol::register_node registration(const node_id& id, std::string endpoint, double cpus = 2) {
  protocol::register_node m;
  m.protocol_version = protocol_version;
  m.node = id;
  m.node_address = address{unique_id::random(), std::move(endpoint)};
  m.total.amounts["CPU"] = cpus;
  m.labels["zone"] = "a";
  return m;
}

protocol::heartbeat heartbeat_of(const node_id& id, std::uint32_t workers, std::vector<std::string> endpoints = {}) {
  protocol::heartbeat m;
  m.node = id;
  m.workers = workers;
  m.worker_endpoints = std::move(endpoints);
  return m;
}

} // namespace

TEST_CASE("a node joins once; resent as it is it is recognised, changed it joins again", "[head][nodes]") {
  table t;
  const node_id a = node_id::random();
  auto reg = registration(a, "tcp://10.0.0.1:7000");
  CHECK(t.nodes.registered(reg) == node_table::registration::joined);
  CHECK(t.nodes.any_alive());
  REQUIRE(t.nodes.live_address(a));
  CHECK(t.nodes.live_address(a)->endpoint == "tcp://10.0.0.1:7000");
  auto state = t.tables.load();
  REQUIRE(state);
  REQUIRE(state->nodes.size() == 1);  // its row
  CHECK(state->nodes[0].registration.node == a);
  CHECK(state->nodes[0].alive);

  t.now += 500ms;
  CHECK(t.nodes.registered(reg) == node_table::registration::resent);
  CHECK(t.nodes.find(a)->second.last_seen == t.now);  // a resend counts as heard
  auto more = registration(a, "tcp://10.0.0.1:7000", 4);
  more.node_address = reg.node_address;
  CHECK(t.nodes.registered(more) == node_table::registration::joined);  // its resources changed
  CHECK(t.nodes.find(a)->second.registration.total.amounts.at("CPU") == 4);
  CHECK(t.nodes.find(node_id::random()) == nullptr);
  CHECK(!t.nodes.live_address(node_id::random()));
}

TEST_CASE("a heartbeat keeps a live node's report; an unknown node's is ignored", "[head][nodes]") {
  table t;
  const node_id a = node_id::random();
  (void)t.nodes.registered(registration(a, "tcp://10.0.0.1:7000"));
  t.now += 300ms;
  auto hb = heartbeat_of(a, 3, {"tcp://10.0.0.1:7101", "tcp://10.0.0.1:7102"});
  CHECK(t.nodes.heard(hb));
  const auto& n = t.nodes.find(a)->second;
  CHECK(n.workers == 3);
  CHECK(n.worker_endpoints.size() == 2);
  CHECK(n.last_seen == t.now);
  auto stranger = heartbeat_of(node_id::random(), 1);
  CHECK(!t.nodes.heard(stranger));
  CHECK(t.net.sent.empty());  // an unknown node is not answered
}

TEST_CASE("silent nodes are named with how long they were silent; the head's stall is credited", "[head][nodes]") {
  table t;
  const node_id a = node_id::random(), b = node_id::random();
  (void)t.nodes.registered(registration(a, "tcp://10.0.0.1:7000"));
  (void)t.nodes.registered(registration(b, "tcp://10.0.0.2:7000"));
  t.now += 700ms;
  auto hb = heartbeat_of(b, 0);
  CHECK(t.nodes.heard(hb));
  t.now += 600ms;  // a: 1.3 s silent, b: 0.6 s
  auto silent = t.nodes.silent(t.now, 1000ms);
  REQUIRE(silent.size() == 1);
  CHECK(silent[0].first == a);
  CHECK(silent[0].second == "no heartbeat for 1300 ms");
  // The head was away 1 s (a late tick): nobody is silent for it.
  t.nodes.credit(1000ms, t.now);
  CHECK(t.nodes.silent(t.now, 1000ms).empty());
  CHECK(t.nodes.find(b)->second.last_seen == t.now);  // credited up to now, not past it
}

TEST_CASE("a node marked dead stays dead: its row says why, and it is told on each try", "[head][nodes]") {
  table t;
  const node_id a = node_id::random(), b = node_id::random();
  auto reg = registration(a, "tcp://10.0.0.1:7000");
  (void)t.nodes.registered(reg);
  (void)t.nodes.registered(registration(b, "tcp://10.0.0.2:7000"));
  auto hb = heartbeat_of(a, 2, {"tcp://10.0.0.1:7101"});
  CHECK(t.nodes.heard(hb));
  auto gone = t.nodes.mark_dead(a, "no heartbeat for 2000 ms");
  // Its worker processes' endpoints and its own: what they subscribed to is forgotten.
  std::sort(gone.begin(), gone.end());
  CHECK(gone == std::vector<std::string>{"tcp://10.0.0.1:7000", "tcp://10.0.0.1:7101"});
  CHECK(!t.nodes.live_address(a));
  CHECK(t.nodes.find(a)->second.workers == 0);
  CHECK(t.nodes.any_alive());  // b
  auto state = t.tables.load();
  REQUIRE(state);
  for (const auto& row : state->nodes) {
    if (row.registration.node == a) {
      CHECK(!row.alive);
      CHECK(row.dead_reason == "no heartbeat for 2000 ms");
    }
  }
  CHECK(t.nodes.mark_dead(node_id::random(), "x").empty());

  // Its late heartbeat and a resent registration are refused, each answered with node_died.
  auto late = heartbeat_of(a, 2);
  CHECK(!t.nodes.heard(late));
  CHECK(t.nodes.registered(reg) == node_table::registration::dead);
  auto told = t.net.take<protocol::node_died>();
  REQUIRE(told.size() == 2);
  for (const auto& [to, m] : told) {
    CHECK(to.endpoint == "tcp://10.0.0.1:7000");
    CHECK(m.node == a);
    CHECK(m.reason.find("declared this node dead earlier (no heartbeat for 2000 ms)") != std::string::npos);
  }
  CHECK(t.nodes.silent(t.now + 1h, 1000ms).size() == 1);  // only b: a dead node is never silent
}

TEST_CASE("messages go to live nodes only; a head restarted on the tables knows the nodes", "[head][nodes]") {
  table t;
  const node_id a = node_id::random(), b = node_id::random(), c = node_id::random();
  (void)t.nodes.registered(registration(a, "tcp://10.0.0.1:7000"));
  (void)t.nodes.registered(registration(b, "tcp://10.0.0.2:7000"));
  (void)t.nodes.registered(registration(c, "tcp://10.0.0.3:7000"));
  (void)t.nodes.mark_dead(c, "killed");
  t.nodes.send_to_live(protocol::head_restarted{"test"}, b);
  auto sent = t.net.take<protocol::head_restarted>();
  REQUIRE(sent.size() == 1);  // a: not b (excepted), not c (dead)
  CHECK(sent[0].first.endpoint == "tcp://10.0.0.1:7000");
  CHECK(t.nodes.send_to(b, protocol::head_restarted{"one"}));
  CHECK(!t.nodes.send_to(c, protocol::head_restarted{"dead"}));
  CHECK(t.net.take<protocol::head_restarted>().size() == 1);

  // A new head on the same tables: every node as it was, each with a fresh grace.
  auto state = t.tables.load();
  REQUIRE(state);
  table again;
  again.now = t.now + 5s;
  again.nodes.restore(std::move(state->nodes), again.now);
  REQUIRE(again.nodes.all().size() == 3);
  CHECK(again.nodes.live_address(a));
  CHECK(again.nodes.live_address(b));
  CHECK(!again.nodes.live_address(c));
  CHECK(again.nodes.find(c)->second.dead_reason == "killed");
  CHECK(again.nodes.find(a)->second.registration.labels.at("zone") == "a");
  CHECK(again.nodes.silent(again.now, 1000ms).empty());
}
