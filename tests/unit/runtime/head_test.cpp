// The head's failure detection, driven message by message with a fake clock.
#include "fakes/recording_transport.hpp"
#include "head/head.hpp"

#include <celer/version.hpp>

#include <catch2/catch.hpp>

#include <algorithm>

using namespace celer;
using namespace std::chrono_literals;

namespace {

struct head_fixture {
  fakes::recording_transport net;
  std::chrono::steady_clock::time_point now{};
  head h{net, 1000ms, 0.5, [this] { return now; }};

  void handle(protocol::message m) { h.handle(m); }
  address join(const node_id& n) {
    const address a{n, "tcp://10.0.0.1:" + std::to_string(n.lo % 60000)};
    protocol::register_node r;
    r.protocol_version = protocol_version;
    r.node = n;
    r.node_address = a;
    r.total = *protocol::make_request(2, 0, 0, {});
    handle(r);
    return a;
  }
  void heartbeat(const node_id& n) {
    protocol::heartbeat b;
    b.node = n;
    b.available = *protocol::make_request(2, 0, 0, {});
    handle(b);
  }
};

} // namespace

TEST_CASE("a silent node is declared dead once, everyone is told, and it is told when it "
          "comes back",
          "[head][fault]") {
  head_fixture f;
  const node_id quiet = node_id::random(), live = node_id::random();
  const address quiet_addr = f.join(quiet);
  const address live_addr = f.join(live);
  const address driver{unique_id::random(), "tcp://10.0.0.9:1"};
  f.handle(protocol::subscribe_cluster{driver});

  f.now += 600ms;
  f.heartbeat(live);
  f.handle(protocol::tick{});
  REQUIRE(f.net.take<protocol::node_died>().empty());  // within the timeout

  f.now += 600ms;  // quiet: 1.2 s silent; live: 0.6 s
  f.heartbeat(live);
  f.handle(protocol::tick{});
  auto died = f.net.take<protocol::node_died>();
  REQUIRE(died.size() == 2);  // the subscriber and the live node, not the dead one
  for (const auto& [to, m] : died) {
    CHECK(m.node == quiet);
    CHECK(m.reason.find("no heartbeat for 1200 ms") != std::string::npos);
    CHECK((to == driver || to == live_addr));
  }

  f.now += 5000ms;
  f.heartbeat(live);
  f.handle(protocol::tick{});
  REQUIRE(f.net.take<protocol::node_died>().empty());  // declared once

  // The dead node speaks again (a partition healed): it is told, and stays dead.
  f.heartbeat(quiet);
  auto told = f.net.take<protocol::node_died>();
  REQUIRE(told.size() == 1);
  CHECK(told[0].first == quiet_addr);
  CHECK(told[0].second.node == quiet);
  CHECK(told[0].second.reason.find("declared this node dead") != std::string::npos);
  f.handle(protocol::tick{});
  REQUIRE(f.net.take<protocol::node_died>().empty());

  // Restarted, it joins as a new node, alive.
  const node_id again = node_id::random();
  f.join(again);
  f.heartbeat(again);
  f.handle(protocol::tick{});
  REQUIRE(f.net.take<protocol::node_died>().empty());
}

namespace {

protocol::create_actor make_actor(const address& driver, int max_restarts, double cpus = 1) {
  protocol::create_actor c;
  c.request_id = 7;
  c.reply_to = driver;
  c.spec.id = task_id::random();
  c.spec.kind = protocol::task_kind::actor_creation;
  c.spec.function = "make_counter";
  c.spec.actor = actor_id::random();
  c.spec.actor_name = "counter";
  c.spec.owner = driver;
  c.spec.resources = *protocol::make_request(cpus, 0, 0, {});
  c.spec.max_restarts = max_restarts;
  c.spec.max_task_retries = 2;
  c.spec.restore_method = "counter::restore";
  return c;
}

protocol::failure_info process_died(const actor_id& a) {
  return protocol::failure_info::make(detail::failure_kind::actor_died, error_code::unavailable,
                                      "actor " + a.hex() + " died: its worker process was killed");
}

} // namespace

TEST_CASE("an actor whose process dies is started again until its restarts run out",
          "[head][fault]") {
  head_fixture f;
  const node_id n = node_id::random();
  const address node_addr = f.join(n);
  const address driver{unique_id::random(), "tcp://10.0.0.9:1"};
  auto create = make_actor(driver, 2);
  const actor_id id = create.spec.actor;
  f.handle(create);
  auto starts = f.net.take<protocol::start_actor>();
  REQUIRE(starts.size() == 1);
  CHECK(starts[0].first == node_addr);
  CHECK(starts[0].second.spec.restarts == 0);
  const address w1{unique_id::random(), "tcp://10.0.0.1:7001"};
  f.handle(protocol::actor_started{id, w1, {}, {}});
  f.net.sent.clear();

  for (std::uint32_t restart = 1; restart <= 2; ++restart) {
    f.handle(protocol::actor_failed{id, process_died(id), {}});
    auto updates = f.net.take<protocol::actor_update>();
    REQUIRE(updates.size() == 1);
    CHECK(updates[0].first == driver);
    CHECK(updates[0].second.state == protocol::actor_state::restarting);
    CHECK(updates[0].second.restarts == restart);
    CHECK(updates[0].second.max_task_retries == 2);
    CHECK(updates[0].second.fail.message.find("worker process was killed") != std::string::npos);
    starts = f.net.take<protocol::start_actor>();
    REQUIRE(starts.size() == 1);  // placed again, with the count the worker tells the actor
    CHECK(starts[0].second.spec.restarts == restart);
    CHECK(starts[0].second.spec.restore_method == "counter::restore");

    // Found by name while it restarts, and alive again at its new address.
    f.handle(protocol::lookup_actor{1, driver, "counter"});
    auto found = f.net.take<protocol::lookup_actor_reply>();
    REQUIRE(found.size() == 1);
    CHECK(found[0].second.found);
    const address w{unique_id::random(), "tcp://10.0.0.1:" + std::to_string(7001 + restart)};
    f.handle(protocol::actor_started{id, w, {}, {}});
    updates = f.net.take<protocol::actor_update>();
    REQUIRE(updates.size() == 1);
    CHECK(updates[0].second.state == protocol::actor_state::alive);
    CHECK(updates[0].second.worker == w);
    CHECK(updates[0].second.fail.message.empty());
  }

  // The third death is one too many.
  f.handle(protocol::actor_failed{id, process_died(id), {}});
  auto updates = f.net.take<protocol::actor_update>();
  REQUIRE(updates.size() == 1);
  CHECK(updates[0].second.state == protocol::actor_state::dead);
  CHECK(f.net.take<protocol::start_actor>().empty());
  f.handle(protocol::lookup_actor{2, driver, "counter"});
  auto found = f.net.take<protocol::lookup_actor_reply>();
  REQUIRE(found.size() == 1);
  CHECK_FALSE(found[0].second.found);
}

TEST_CASE("only a system failure restarts an actor, and a job cannot ask for one",
          "[head][fault]") {
  head_fixture f;
  f.join(node_id::random());
  const address driver{unique_id::random(), "tcp://10.0.0.9:1"};

  SECTION("a constructor that threw") {
    auto create = make_actor(driver, -1);
    f.handle(create);
    f.net.sent.clear();
    f.handle(protocol::actor_failed{
      create.spec.actor,
      protocol::failure_info::make(detail::failure_kind::actor_died, error_code::internal,
                                   "the actor's constructor threw"),
      {}});
    auto updates = f.net.take<protocol::actor_update>();
    REQUIRE(updates.size() == 1);
    CHECK(updates[0].second.state == protocol::actor_state::dead);
    CHECK(f.net.take<protocol::start_actor>().empty());
  }
  SECTION("a death reported by a job's own process") {
    auto create = make_actor(driver, -1);
    create.spec.job = job_id::random();
    f.handle(create);
    f.net.sent.clear();
    f.handle(protocol::actor_failed{create.spec.actor, process_died(create.spec.actor),
                                    create.spec.job});
    auto updates = f.net.take<protocol::actor_update>();
    REQUIRE(updates.size() == 1);
    CHECK(updates[0].second.state == protocol::actor_state::dead);
  }
  SECTION("a kill") {
    auto create = make_actor(driver, -1);
    f.handle(create);
    f.handle(protocol::kill_actor{create.spec.actor, "killed by its owner"});
    f.net.sent.clear();
    f.handle(protocol::actor_failed{create.spec.actor, process_died(create.spec.actor), {}});
    CHECK(f.net.take<protocol::actor_update>().empty());  // already dead
    CHECK(f.net.take<protocol::start_actor>().empty());
  }
  SECTION("max_restarts 0") {
    auto create = make_actor(driver, 0);
    f.handle(create);
    f.net.sent.clear();
    f.handle(protocol::actor_failed{create.spec.actor, process_died(create.spec.actor), {}});
    auto updates = f.net.take<protocol::actor_update>();
    REQUIRE(updates.size() == 1);
    CHECK(updates[0].second.state == protocol::actor_state::dead);
  }
}

TEST_CASE("the actors of a dead node restart on another node; a preempted one comes back",
          "[head][fault]") {
  head_fixture f;
  const node_id first = node_id::random(), second = node_id::random();
  const address first_addr = f.join(first);
  const address driver{unique_id::random(), "tcp://10.0.0.9:1"};
  auto create = make_actor(driver, -1, 2);  // takes a whole node
  create.spec.actor_name.clear();
  const actor_id id = create.spec.actor;
  f.handle(create);
  auto starts = f.net.take<protocol::start_actor>();
  REQUIRE(starts.size() == 1);
  CHECK(starts[0].first == first_addr);
  f.handle(protocol::actor_started{id, address{unique_id::random(), "tcp://10.0.0.1:7001"}, {}, {}});
  const address second_addr = f.join(second);
  f.net.sent.clear();

  f.now += 600ms;
  f.heartbeat(second);
  f.now += 600ms;  // the first node is silent for 1.2 s
  f.heartbeat(second);
  f.handle(protocol::tick{});
  starts = f.net.take<protocol::start_actor>();
  REQUIRE(starts.size() == 1);
  CHECK(starts[0].first == second_addr);
  CHECK(starts[0].second.spec.restarts == 1);
  auto updates = f.net.take<protocol::actor_update>();
  REQUIRE(updates.size() == 1);
  CHECK(updates[0].second.state == protocol::actor_state::restarting);
  CHECK(updates[0].second.fail.message.find("its node") != std::string::npos);

  // Preempted: it goes back into a queue and starts when room frees, without limit (-1).
  f.handle(protocol::actor_started{id, address{unique_id::random(), "tcp://10.0.0.2:7001"}, {}, {}});
  f.net.sent.clear();
  f.handle(protocol::actor_failed{
    id,
    protocol::failure_info::make(detail::failure_kind::actor_preempted, error_code::unavailable,
                                 "preempted for a task of priority 10"),
    {}});
  starts = f.net.take<protocol::start_actor>();
  REQUIRE(starts.size() == 1);
  CHECK(starts[0].second.spec.restarts == 2);
}

TEST_CASE("with no live node, lease requests and actors wait for one rather than fail",
          "[head][fault]") {
  head_fixture f;
  const node_id only = node_id::random();
  f.join(only);
  const address driver{unique_id::random(), "tcp://10.0.0.9:1"};
  auto create = make_actor(driver, -1, 2);
  create.spec.actor_name.clear();
  const actor_id id = create.spec.actor;
  f.handle(create);
  f.handle(protocol::actor_started{id, address{unique_id::random(), "tcp://10.0.0.1:7001"}, {}, {}});
  f.net.sent.clear();

  // Its only node misses its heartbeats (an overloaded machine, or every node killed).
  f.now += 1200ms;
  f.handle(protocol::tick{});
  auto updates = f.net.take<protocol::actor_update>();
  REQUIRE(updates.size() == 1);
  CHECK(updates[0].second.state == protocol::actor_state::restarting);  // not dead
  CHECK(f.net.take<protocol::start_actor>().empty());
  protocol::request_lease lease;
  lease.spec.id = task_id::random();
  lease.spec.function = "tree_sum";
  lease.spec.owner = driver;
  lease.spec.resources = *protocol::make_request(1, 0, 0, {});
  f.handle(lease);
  CHECK(f.net.take<protocol::lease_reply>().empty());  // no "the cluster has no live nodes"
  protocol::request_lease cancelled = lease;
  cancelled.spec.id = task_id::random();
  f.handle(cancelled);
  f.handle(protocol::cancel_lease_requests{driver, {cancelled.spec.id}, false, {}});

  // A node joins (the old one restarted under a new id): both go to it; the cancelled one
  // does not.
  const address back = f.join(node_id::random());
  auto starts = f.net.take<protocol::start_actor>();
  REQUIRE(starts.size() == 1);
  CHECK(starts[0].first == back);
  CHECK(starts[0].second.spec.actor == id);
  auto leases = f.net.take<protocol::request_lease>();
  REQUIRE(leases.size() == 1);
  CHECK(leases[0].first == back);
  CHECK(leases[0].second.spec.id == lease.spec.id);
  CHECK(f.net.take<protocol::lease_reply>().empty());
}

TEST_CASE("a process that is gone is dropped from the actors it subscribed to, and so are a "
          "dead node's actor workers",
          "[head][fault]") {
  head_fixture f;
  const node_id n = node_id::random(), other = node_id::random();
  f.join(n);
  const address driver{unique_id::random(), "tcp://10.0.0.9:1"};
  auto a = make_actor(driver, -1, 2);  // fills n
  a.spec.actor_name.clear();
  f.handle(a);
  const address a_worker{unique_id::random(), "tcp://10.0.0.1:7001"};
  f.handle(protocol::actor_started{a.spec.actor, a_worker, {}, {}});
  f.join(other);
  auto b = make_actor(driver, -1, 2);  // fills the other node
  b.spec.actor_name.clear();
  f.handle(b);
  const address b_worker{unique_id::random(), "tcp://10.0.0.2:7001"};
  f.handle(protocol::actor_started{b.spec.actor, b_worker, {}, {}});
  // A task worker and a's worker subscribe to b.
  const address task_worker{unique_id::random(), "tcp://10.0.0.2:7002"};
  f.handle(protocol::subscribe_actor{b.spec.actor, task_worker});
  f.handle(protocol::subscribe_actor{b.spec.actor, a_worker});
  f.net.sent.clear();

  // The task worker exits: its node says so; b's updates no longer go to it.
  f.handle(protocol::unsubscribe_cluster{task_worker.endpoint});
  f.handle(protocol::actor_failed{b.spec.actor, process_died(b.spec.actor), {}});
  auto updates = f.net.take<protocol::actor_update>();
  std::vector<address> told;
  for (const auto& [to, u] : updates) told.push_back(to);
  CHECK(told == std::vector<address>{driver, a_worker});

  // a's node dies, and a's worker with it: b's next update goes to the driver alone.
  f.handle(protocol::actor_started{b.spec.actor, address{unique_id::random(), "tcp://10.0.0.2:7003"}, {}, {}});
  f.net.sent.clear();
  f.now += 1200ms;
  f.heartbeat(other);
  f.handle(protocol::tick{});
  f.net.sent.clear();
  f.handle(protocol::actor_failed{b.spec.actor, process_died(b.spec.actor), {}});
  updates = f.net.take<protocol::actor_update>();
  REQUIRE(updates.size() == 1);
  CHECK(updates[0].first == driver);
}

TEST_CASE("a dead node's worker processes, as its last heartbeat listed them, hear nothing more",
          "[head][fault]") {
  head_fixture f;
  const node_id dying = node_id::random(), live = node_id::random();
  const address dying_addr = f.join(dying);
  const address live_addr = f.join(live);
  const address driver{unique_id::random(), "tcp://10.0.0.9:1"};
  const address task_worker{unique_id::random(), "tcp://10.0.0.1:7002"};
  f.handle(protocol::subscribe_cluster{driver});
  f.handle(protocol::subscribe_cluster{task_worker});
  protocol::heartbeat b;
  b.node = dying;
  b.available = *protocol::make_request(2, 0, 0, {});
  b.worker_endpoints = {task_worker.endpoint};
  f.handle(b);
  f.net.sent.clear();

  f.now += 1200ms;
  f.heartbeat(live);
  f.handle(protocol::tick{});
  auto died = f.net.take<protocol::node_died>();
  std::vector<address> told;
  for (const auto& [to, m] : died) told.push_back(to);
  CHECK(told == std::vector<address>{driver, live_addr});  // not the worker that died with it
  // Its connections to them, and to the node itself, are closed.
  const auto& closed = f.net.forgotten;
  CHECK(std::find(closed.begin(), closed.end(), task_worker.endpoint) != closed.end());
  CHECK(std::find(closed.begin(), closed.end(), dying_addr.endpoint) != closed.end());
  CHECK(std::find(closed.begin(), closed.end(), live_addr.endpoint) == closed.end());
}

TEST_CASE("the head leaves a copy of its actors on its board at each tick, with restarts and why one died",
          "[head]") {
  head_fixture f;
  auto board = std::make_shared<head_snapshot_board>();
  f.h.publish_to(board);
  CHECK(board->latest() == nullptr);
  f.handle(protocol::tick{});
  REQUIRE(board->latest() != nullptr);
  CHECK(board->latest()->actors.empty());
  const node_id n = node_id::random();
  (void)f.join(n);
  const address driver{unique_id::random(), "tcp://10.0.0.9:1"};
  auto create = make_actor(driver, 1);
  const actor_id id = create.spec.actor;
  f.handle(create);
  f.handle(protocol::actor_started{id, address{unique_id::random(), "tcp://10.0.0.1:7001"}, {}, {}});
  // Not before the next tick: readers see the last copy.
  CHECK(board->latest()->actors.empty());
  f.handle(protocol::tick{});
  auto s = board->latest();
  REQUIRE(s->actors.size() == 1);
  CHECK(s->actors[0].id == id);
  CHECK(s->actors[0].state == protocol::actor_state::alive);
  CHECK(s->actors[0].name == "counter");
  CHECK(s->actors[0].class_name == "make_counter");
  CHECK(s->actors[0].node == n);
  CHECK(s->actors[0].worker == "tcp://10.0.0.1:7001");
  f.handle(protocol::actor_failed{id, process_died(id), {}});  // restarted once
  f.handle(protocol::actor_failed{id, process_died(id), {}});  // then dead
  f.handle(protocol::tick{});
  s = board->latest();
  CHECK(s->actor_restarts == 1);
  CHECK(s->actors[0].restarts == 1);
  CHECK(s->actors[0].state == protocol::actor_state::dead);
  CHECK_THAT(s->actors[0].death_reason, Catch::Contains("worker process was killed"));
}

TEST_CASE("drivers' heartbeats carry their tasks' counts; an ended job's are kept in the totals", "[head]") {
  head_fixture f;
  auto board = std::make_shared<head_snapshot_board>();
  f.h.publish_to(board);
  const job_id a = job_id::random(), b = job_id::random();
  protocol::task_counts ca;
  ca.submitted = 10;
  ca.finished = 7;
  ca.running = 2;
  ca.waiting = 1;
  ca.latency.assign(protocol::scheduling_latency_bounds.size() + 1, 0);
  ca.latency[2] = 9;
  ca.latency_sum_us = 4500;
  f.handle(protocol::job_heartbeat{a, ca});
  auto cb = ca;
  cb.failed = 1;
  f.handle(protocol::job_heartbeat{b, cb});
  f.handle(protocol::job_heartbeat{b, {}});  // the job manager's word for b: no counts, kept as they were
  f.handle(protocol::tick{});
  auto s = board->latest();
  REQUIRE(s->job_tasks.size() == 2);
  auto all = s->all_tasks();
  CHECK(all.submitted == 20);
  CHECK(all.running == 4);
  CHECK(all.failed == 1);
  CHECK(all.latency[2] == 18);
  CHECK(s->tasks_of(b)->failed == 1);
  f.handle(protocol::job_finished{a});
  f.handle(protocol::tick{});
  s = board->latest();
  CHECK(s->job_tasks.size() == 1);
  all = s->all_tasks();
  CHECK(all.submitted == 20);  // counters never go down
  CHECK(all.finished == 14);
  CHECK(all.running == 2);     // an ended job runs nothing
  CHECK(s->tasks_of(a)->finished == 7);
  CHECK(s->tasks_of(a)->running == 0);
  CHECK_FALSE(s->tasks_of(job_id::random()).has_value());
}

TEST_CASE("drivers' heartbeats carry their tasks' changes; the snapshot lists them", "[head]") {
  head_fixture f;
  auto board = std::make_shared<head_snapshot_board>();
  f.h.publish_to(board);
  const job_id job = job_id::random();
  const task_id t = task_id::random();
  protocol::task_counts c;
  c.latency.assign(protocol::scheduling_latency_bounds.size() + 1, 0);
  c.changes = {{t, "train", protocol::task_state::waiting, 1, 1000, {}}, {t, {}, protocol::task_state::running, 1, 1001, "ab12cd34"}};
  f.handle(protocol::job_heartbeat{job, c});
  c.changes = {{t, {}, protocol::task_state::finished, 1, 1500, {}}};
  f.handle(protocol::job_heartbeat{job, c});
  f.handle(protocol::job_finished{job});
  f.handle(protocol::tick{});
  auto s = board->latest();
  REQUIRE(s->task_list);
  auto page = s->task_list->list({.job = job.hex()});
  REQUIRE(page.rows.size() == 1);
  CHECK(page.rows[0].function == "train");
  CHECK(page.rows[0].state == protocol::task_state::finished);
  CHECK(page.rows[0].node == "ab12cd34");
  CHECK(page.rows[0].submitted_ms == 1000);
  CHECK(page.rows[0].updated_ms == 1500);
  CHECK(s->job_tasks.empty());  // the counts moved to the ended jobs' totals; the list stays
}

TEST_CASE("a driver the head ended for its silence is told why when it speaks again, and its "
          "job stays ended",
          "[head][fault]") {
  head_fixture f;
  const node_id n = node_id::random();
  const address node = f.join(n);
  const job_id job = job_id::random();
  const address driver{unique_id::random(), "tcp://10.0.0.9:2"};
  f.handle(protocol::job_heartbeat{job, {}, driver});
  f.now += 600ms;
  f.heartbeat(n);
  f.handle(protocol::tick{});
  REQUIRE(f.h.jobs() == std::vector<job_id>{job});

  f.now += 600ms;  // the driver: 1.2 s silent (its machine stalled)
  f.heartbeat(n);
  f.handle(protocol::tick{});
  CHECK(f.h.jobs().empty());
  REQUIRE(f.net.take<protocol::job_ended>().empty());  // nobody asked yet
  auto finished = f.net.take<protocol::job_finished>();
  REQUIRE(finished.size() == 1);  // the node stops the job's workers
  CHECK(finished[0].first == node);

  // The driver wakes and heartbeats: it is told, and the job is not taken back.
  f.handle(protocol::job_heartbeat{job, {}, driver});
  auto told = f.net.take<protocol::job_ended>();
  REQUIRE(told.size() == 1);
  CHECK(told[0].first == driver);
  CHECK(told[0].second.job == job);
  CHECK(told[0].second.reason.find("sent no heartbeat for 1200 ms") != std::string::npos);
  CHECK(told[0].second.reason.find("node_timeout_ms is 1000 ms") != std::string::npos);
  CHECK(f.h.jobs().empty());
  f.heartbeat(n);
  f.handle(protocol::tick{});
  CHECK(f.net.take<protocol::job_finished>().empty());  // ended once

  // A heartbeat on the driver's behalf (no address) is not answered, and takes nothing back.
  f.handle(protocol::job_heartbeat{job});
  CHECK(f.net.take<protocol::job_ended>().empty());
  CHECK(f.h.jobs().empty());

  // Another job is untouched.
  const job_id other = job_id::random();
  f.handle(protocol::job_heartbeat{other, {}, driver});
  CHECK(f.net.take<protocol::job_ended>().empty());
  CHECK(f.h.jobs() == std::vector<job_id>{other});
}

TEST_CASE("a head whose own tick comes late blames no node or driver for the time it was "
          "away",
          "[head][fault]") {
  head_fixture f;  // node_timeout 1 s
  f.h.expect_ticks_every(100ms);
  const node_id n = node_id::random();
  f.join(n);
  const job_id job = job_id::random();
  f.handle(protocol::job_heartbeat{job, {}, address{unique_id::random(), "tcp://10.0.0.9:3"}});
  f.heartbeat(n);
  f.handle(protocol::tick{});

  // The head stalls for 3 s; the heartbeats sent meanwhile wait unread behind its tick.
  f.now += 3000ms;
  f.handle(protocol::tick{});
  CHECK(f.net.take<protocol::node_died>().empty());
  CHECK(f.net.take<protocol::job_finished>().empty());
  CHECK(f.h.jobs() == std::vector<job_id>{job});

  // Ticking on time again, the silence counts from the stall's end: 100 ms were not
  // credited (a tick's own period), so 1 s of silence is passed after 1,000 ms more.
  for (int i = 0; i < 9; ++i) {
    f.now += 100ms;
    f.handle(protocol::tick{});
  }
  CHECK(f.net.take<protocol::node_died>().empty());
  f.now += 100ms;
  f.handle(protocol::tick{});  // 1,000 ms after the stall's end: 1,100 ms of silence
  CHECK(f.net.take<protocol::job_finished>().size() == 1);
  CHECK(f.h.jobs().empty());
  f.heartbeat(n);  // dead already: it is told
  auto died = f.net.take<protocol::node_died>();
  REQUIRE(!died.empty());
  CHECK(std::all_of(died.begin(), died.end(), [&](const auto& d) { return d.second.node == n; }));
}

TEST_CASE("without a tick period, a late tick still declares the silent dead", "[head][fault]") {
  head_fixture f;  // as before expect_ticks_every: what the other cases here rely on
  const node_id n = node_id::random();
  f.join(n);
  f.handle(protocol::tick{});
  f.now += 3000ms;
  f.handle(protocol::tick{});
  auto died = f.net.take<protocol::node_died>();
  CHECK(died.empty());  // nobody subscribed; the node itself is not told on death
  f.heartbeat(n);
  CHECK(f.net.take<protocol::node_died>().size() == 1);
}
