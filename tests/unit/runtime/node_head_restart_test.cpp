// A node agent across a restart of its head: it resends what it spilled to the head when
// the head says it restarted, and a request it already holds, resent, is granted once; an
// actor start resent by a restarted head starts nothing twice.
#include "fakes/recording_transport.hpp"
#include "node/node_agent.hpp"

#include <catch2/catch.hpp>

using namespace celer;
using namespace std::chrono_literals;

namespace {

struct spilling_node {
  fakes::recording_transport net;
  fakes::fake_launcher launcher;
  address head{unique_id::random(), "tcp://10.0.0.1:6380"};
  address owner{unique_id::random(), "tcp://10.0.0.2:1"};
  std::chrono::steady_clock::time_point now{std::chrono::hours(1)};
  node_agent node;

  spilling_node() : node(net, launcher, make_config()) {
    node.start();
    (void)net.take<protocol::register_node>();
  }
  node_agent::config make_config() {
    node_agent::config c;
    c.id = node_id::random();
    c.self = address{c.id, "tcp://10.0.0.1:7000"};
    c.head = head;
    c.total = *protocol::make_request(1, 0, 0, {});
    c.max_idle_workers = 8;
    c.spill_to_head = true;
    c.now = [this] { return now; };
    return c;
  }
  protocol::request_lease request(double cpus) {
    protocol::request_lease r;
    r.spec.id = task_id::random();
    r.spec.function = "f";
    r.spec.owner = owner;
    r.spec.job = job_id::random();
    r.spec.resources = *protocol::make_request(cpus, 0, 0, {});
    return r;
  }
  void handle(protocol::message m) { node.handle(m); }
};

} // namespace

TEST_CASE("a node resends the lease requests it spilled when its head says it restarted",
          "[node][fault][idempotent]") {
  spilling_node f;
  const auto busy = f.request(1);
  f.handle(busy);  // takes the node's only CPU
  REQUIRE(f.net.take<protocol::lease_reply>().size() == 1);
  const auto spilled = f.request(1);
  f.handle(spilled);  // busy here: the head places it
  auto to_head = f.net.take<protocol::request_lease>();
  REQUIRE(to_head.size() == 1);
  CHECK(to_head[0].first == f.head);

  f.handle(protocol::head_restarted{"test"});
  CHECK(f.net.take<protocol::register_node>().size() == 1);
  auto resent = f.net.take<protocol::request_lease>();
  REQUIRE(resent.size() == 1);
  CHECK(resent[0].first == f.head);
  CHECK(resent[0].second.spec.id == spilled.spec.id);
  CHECK_FALSE(resent[0].second.from_head);

  // Its owner cancels it: not resent again.
  f.handle(protocol::cancel_lease_requests{f.owner, {spilled.spec.id}, false, {}});
  (void)f.net.take<protocol::cancel_lease_requests>();  // forwarded to the head
  f.handle(protocol::head_restarted{"test"});
  CHECK(f.net.take<protocol::request_lease>().empty());
}

TEST_CASE("a spilled request is forgotten once the head placed it here, or after a while",
          "[node][fault]") {
  spilling_node f;
  f.handle(f.request(1));
  (void)f.net.take<protocol::lease_reply>();
  auto placed_here = f.request(1);
  f.handle(placed_here);
  auto old = f.request(1);
  f.handle(old);
  REQUIRE(f.net.take<protocol::request_lease>().size() == 2);
  placed_here.from_head = true;  // the head sent it back here: it waits in the queue
  f.handle(placed_here);
  f.now += 31s;  // past spill_memory for `old`
  f.handle(protocol::tick{});
  // `placed_here` found no room for lease_respill_ms: it went back to the head once, and
  // the head placed it here again.
  auto back = f.net.take<protocol::request_lease>();
  REQUIRE(back.size() == 1);
  CHECK(back[0].second.spec.id == placed_here.spec.id);
  f.handle(placed_here);
  f.handle(protocol::tick{});
  f.handle(protocol::head_restarted{"test"});
  CHECK(f.net.take<protocol::request_lease>().empty());
}

TEST_CASE("a lease request the node already holds, resent by the head, is granted once",
          "[node][idempotent]") {
  spilling_node f;
  auto r = f.request(1);
  r.from_head = true;
  f.handle(r);
  f.handle(r);  // granted already: a copy
  REQUIRE(f.net.take<protocol::lease_reply>().size() == 1);
  auto waiting = f.request(1);
  waiting.from_head = true;
  f.handle(waiting);
  f.handle(waiting);  // queued already: a copy
  CHECK(f.net.take<protocol::lease_reply>().empty());
  CHECK(f.node.queued() == 1);
}

TEST_CASE("an actor start resent by a restarted head starts nothing twice, and a running actor "
          "says again that it started",
          "[node][fault][idempotent]") {
  spilling_node f;
  protocol::start_actor start;
  start.spec.id = task_id::random();
  start.spec.kind = protocol::task_kind::actor_creation;
  start.spec.function = "make_counter";
  start.spec.actor = actor_id::random();
  start.spec.owner = f.owner;
  start.spec.job = job_id::random();
  start.spec.resources = *protocol::make_request(1, 0, 0, {});
  f.handle(start);
  REQUIRE(f.launcher.launched_ids.size() == 1);
  auto created = f.net.take<protocol::execute_task>();
  REQUIRE(created.size() == 1);
  const address worker = created[0].first;

  f.handle(start);  // the new head did not know whether the old one's start arrived
  CHECK(f.launcher.launched_ids.size() == 1);
  CHECK(f.net.take<protocol::execute_task>().empty());
  // Its worker is asked to say again that it started (the old head may not have heard).
  auto asked = f.net.take<protocol::head_restarted>();
  REQUIRE(asked.size() == 1);
  CHECK(asked[0].first == worker);

  // A later start (a restart after its worker died) is not a resend.
  f.handle(protocol::worker_died{f.launcher.launched_ids[0], "killed by signal 9"});
  (void)f.net.take<protocol::actor_failed>();
  start.spec.restarts = 1;
  f.handle(start);
  CHECK(f.launcher.launched_ids.size() == 2);
}
