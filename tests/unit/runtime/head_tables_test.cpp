// The head's tables on disk: each table round-trips through RocksDB, and a head started
// again on the tables of one that was destroyed (as a SIGKILLed head is) knows its nodes,
// actors, jobs, named actors and durable objects, and gives its nodes a fresh grace.
#include "fakes/memory_table_db.hpp"
#include "fakes/recording_transport.hpp"
#include "head/head.hpp"
#include "head/head_tables.hpp"
#include "unit/runtime/temp_dir.hpp"

#include <celer/store/table_db.hpp>
#include <celer/version.hpp>

#include <catch2/catch.hpp>

#include <filesystem>

using namespace celer;
using namespace std::chrono_literals;

namespace {

using celer_test::temp_dir;

std::unique_ptr<head_tables> open_tables(const temp_dir& d) {
  auto db = store::open_table_db(d.path.string());
  REQUIRE(db);
  return std::make_unique<head_tables>(std::move(*db));
}

protocol::register_node registration(const node_id& n) {
  protocol::register_node r;
  r.protocol_version = protocol_version;
  r.node = n;
  r.node_address = address{n, "tcp://10.0.0.1:" + std::to_string(n.lo % 60000)};
  r.total = *protocol::make_request(2, 0, 0, {});
  r.labels = {{"zone", "a"}};
  return r;
}

/// A head on `tables` with a fake clock, fed message by message.
struct head_on_tables {
  fakes::recording_transport net;
  std::chrono::steady_clock::time_point& now;
  head h;
  head_on_tables(std::chrono::steady_clock::time_point& clock, std::unique_ptr<head_tables> t)
    : now(clock),
      h(net, 1000ms, 0.5, [this] { return now; }, std::move(t)) {}
  void handle(protocol::message m) { h.handle(m); }
};

const address driver{unique_id{7, 7}, "tcp://10.0.0.9:1"};

protocol::create_actor named_actor(const actor_id& id, const job_id& job, const std::string& name) {
  protocol::create_actor c;
  c.request_id = 11;
  c.reply_to = driver;
  c.spec.id = task_id::random();
  c.spec.kind = protocol::task_kind::actor_creation;
  c.spec.function = "make_counter";
  c.spec.class_type = "counter";
  c.spec.actor = id;
  c.spec.actor_name = name;
  c.spec.job = job;
  c.spec.owner = driver;
  c.spec.resources = *protocol::make_request(1, 0, 0, {});
  return c;
}

} // namespace

TEST_CASE("each of the head's tables round-trips through RocksDB", "[head][tables]") {
  temp_dir dir;
  const node_id n1 = node_id::random(), n2 = node_id::random();
  const actor_id kept = actor_id::random(), dropped = actor_id::random();
  const job_id job = job_id::random(), ended = job_id::random();
  const placement_group_id group = placement_group_id::random(), gone = placement_group_id::random();
  const object_id obj = object_id::random();
  {
    auto t = open_tables(dir);
    t->save_node({registration(n1), true, ""});
    t->save_node({registration(n2), false, "no heartbeat for 5000 ms"});
    actor_row a;
    a.spec = named_actor(kept, job, "ps").spec;
    a.state = protocol::actor_state::alive;
    a.worker = address{unique_id::random(), "tcp://10.0.0.1:7000"};
    a.node = n1;
    a.subscribers = {driver};
    a.started = 3;
    a.restarts = 2;
    t->save_actor(a);
    a.spec.actor = dropped;
    t->save_actor(a);
    t->drop_actor(dropped);
    t->save_job(job);
    t->save_job(ended);
    t->drop_job(ended);
    protocol::placement_group_info g;
    g.id = group;
    g.name = "trainers";
    g.state = protocol::group_state::created;
    g.job = job;
    g.bundles = {protocol::bundle_spec{*protocol::make_request(1, 0, 0, {}), {}}};
    g.nodes = {n1};
    t->save_group(g);
    g.id = gone;
    t->save_group(g);
    t->drop_group(gone);
    t->save_durable(n1, {obj});
    CHECK(t->failed_writes() == 0);
  }
  auto t = open_tables(dir);  // the first is closed, as after a crash
  auto s = t->load();
  REQUIRE(s);
  CHECK(s->unreadable == 0);
  REQUIRE(s->nodes.size() == 2);
  for (const auto& n : s->nodes) {
    CHECK(n.registration.total.amounts == registration(n1).total.amounts);
    CHECK(n.registration.labels.at("zone") == "a");
    if (n.registration.node == n1) {
      CHECK(n.alive);
      CHECK(n.registration.node_address == registration(n1).node_address);
    } else {
      CHECK(n.registration.node == n2);
      CHECK_FALSE(n.alive);
      CHECK(n.dead_reason == "no heartbeat for 5000 ms");
    }
  }
  REQUIRE(s->actors.size() == 1);
  const auto& a = s->actors[0];
  CHECK(a.spec.actor == kept);
  CHECK(a.spec.actor_name == "ps");
  CHECK(a.spec.class_type == "counter");
  CHECK(a.state == protocol::actor_state::alive);
  CHECK(a.node == n1);
  CHECK(a.worker.endpoint == "tcp://10.0.0.1:7000");
  CHECK(a.subscribers == std::vector<address>{driver});
  CHECK(a.started == 3);
  CHECK(a.restarts == 2);
  CHECK(s->jobs == std::vector<job_id>{job});
  REQUIRE(s->groups.size() == 1);
  CHECK(s->groups[0].id == group);
  CHECK(s->groups[0].name == "trainers");
  CHECK(s->groups[0].state == protocol::group_state::created);
  CHECK(s->groups[0].nodes == std::vector<node_id>{n1});
  REQUIRE(s->durable.size() == 1);
  CHECK(s->durable[0].object == obj);
  CHECK(s->durable[0].node == n1);
}

TEST_CASE("a head started again on the tables of a destroyed one knows its nodes, actors, "
          "jobs, named actors and durable objects",
          "[head][tables][fault]") {
  temp_dir dir;
  std::chrono::steady_clock::time_point now{};
  const node_id node = node_id::random();
  const job_id job = job_id::random();
  const actor_id actor = actor_id::random();
  const address worker{unique_id::random(), "tcp://10.0.0.1:7001"};
  const object_id durable = object_id::random();
  {
    head_on_tables first(now, open_tables(dir));
    first.handle(registration(node));
    first.handle(protocol::job_heartbeat{job});
    first.handle(named_actor(actor, job, "ps"));
    REQUIRE(first.net.take<protocol::start_actor>().size() == 1);
    first.handle(protocol::actor_started{actor, worker, {}, {}});
    first.handle(protocol::durable_objects{node, {durable}});
    first.handle(protocol::subscribe_cluster{driver});
    const address gone_worker{unique_id{9, 9}, "tcp://10.0.0.9:3"};
    first.handle(protocol::subscribe_cluster{gone_worker});
    first.handle(protocol::unsubscribe_cluster{gone_worker.endpoint});
  }  // destroyed without a word, as a SIGKILLed head

  now += 30s;  // the restart took a while; the node was silent meanwhile
  head_on_tables second(now, open_tables(dir));
  CHECK(second.h.jobs() == std::vector<job_id>{job});

  second.handle(protocol::lookup_actor{5, driver, "ps", job});
  auto found = second.net.take<protocol::lookup_actor_reply>();
  REQUIRE(found.size() == 1);
  CHECK(found[0].second.found);
  CHECK(found[0].second.actor == actor);
  CHECK(found[0].second.class_type == "counter");

  const address other{unique_id{8, 8}, "tcp://10.0.0.9:2"};
  second.handle(protocol::subscribe_actor{actor, other});
  auto state = second.net.take<protocol::actor_update>();
  REQUIRE(state.size() == 1);
  CHECK(state[0].second.state == protocol::actor_state::alive);
  CHECK(state[0].second.worker == worker);

  second.handle(protocol::status_query{6, driver});
  auto status = second.net.take<protocol::status_reply>();
  REQUIRE(status.size() == 1);
  REQUIRE(status[0].second.nodes.size() == 1);
  CHECK(status[0].second.nodes[0].node == node);
  CHECK(status[0].second.nodes[0].alive);
  CHECK(status[0].second.nodes[0].labels.at("zone") == "a");
  CHECK(status[0].second.actors_alive == 1);

  second.handle(protocol::locate_object{7, driver, durable});
  auto where = second.net.take<protocol::object_location>();
  REQUIRE(where.size() == 1);
  CHECK(where[0].second.found);
  CHECK(where[0].second.node == node);

  // A retried create_actor (its reply was lost with the old head) is the same actor.
  second.handle(named_actor(actor, job, "ps"));
  auto replies = second.net.take<protocol::create_actor_reply>();
  REQUIRE(replies.size() == 1);
  CHECK(replies[0].second.ok);
  CHECK(second.net.take<protocol::start_actor>().empty());

  // The loaded node has node_timeout from the head's start to heartbeat, after the longest
  // reconnect, not less.
  now += reconnect_interval_max + 900ms;
  second.handle(protocol::tick{});
  CHECK(second.net.take<protocol::node_died>().empty());
  CHECK(second.net.take<protocol::actor_update>().empty());
  now += 200ms;
  second.handle(protocol::tick{});
  // The driver subscribed before the restart still hears of the node's death; the worker
  // that unsubscribed does not.
  auto node_deaths = second.net.take<protocol::node_died>();
  REQUIRE(node_deaths.size() == 1);
  CHECK(node_deaths[0].first == driver);
  CHECK(node_deaths[0].second.node == node);
  auto died = second.net.take<protocol::actor_update>();
  REQUIRE(died.size() == 2);  // both subscribers: the creator and `other`
  CHECK(died[0].second.state == protocol::actor_state::dead);
  second.handle(protocol::lookup_actor{8, driver, "ps", job});
  auto gone = second.net.take<protocol::lookup_actor_reply>();
  REQUIRE(gone.size() == 1);
  CHECK_FALSE(gone[0].second.found);
}

TEST_CASE("an actor being started when the head died is started again by the next one, once",
          "[head][tables][fault][idempotent]") {
  temp_dir dir;
  std::chrono::steady_clock::time_point now{};
  const node_id node = node_id::random();
  const job_id job = job_id::random();
  const actor_id actor = actor_id::random();
  const address worker{unique_id::random(), "tcp://10.0.0.1:7001"};
  {
    head_on_tables first(now, open_tables(dir));
    first.handle(registration(node));
    first.handle(protocol::job_heartbeat{job});
    first.handle(named_actor(actor, job, "ps"));
    REQUIRE(first.net.take<protocol::start_actor>().size() == 1);
  }  // gone before the node (or the actor's worker) answered

  head_on_tables second(now, open_tables(dir));
  // Its start may have been lost with the old head: the node is asked again (and ignores a
  // copy; node_head_restart_test).
  auto again = second.net.take<protocol::start_actor>();
  REQUIRE(again.size() == 1);
  CHECK(again[0].first == registration(node).node_address);
  CHECK(again[0].second.spec.actor == actor);

  second.handle(protocol::actor_started{actor, worker, {}, {}});
  // Said twice (once for each head): the second is no news, and stops nothing.
  second.handle(protocol::actor_started{actor, worker, {}, {}});
  CHECK(second.net.take<protocol::kill_actor>().empty());
  second.handle(protocol::subscribe_actor{actor, driver});
  auto state = second.net.take<protocol::actor_update>();
  REQUIRE_FALSE(state.empty());
  CHECK(state.back().second.state == protocol::actor_state::alive);
  CHECK(state.back().second.worker == worker);
}

TEST_CASE("a loaded node that heartbeats in time stays alive and its report rebuilds the "
          "scheduler's view",
          "[head][tables][fault]") {
  auto rows = std::make_shared<fakes::memory_table_db::rows>();
  std::chrono::steady_clock::time_point now{};
  const node_id node = node_id::random();
  {
    head_on_tables first(now, std::make_unique<head_tables>(std::make_unique<fakes::memory_table_db>(rows)));
    first.handle(registration(node));
  }
  head_on_tables second(now, std::make_unique<head_tables>(std::make_unique<fakes::memory_table_db>(rows)));
  for (int i = 0; i < 5; ++i) {
    now += 600ms;
    protocol::heartbeat b;
    b.node = node;
    b.available = *protocol::make_request(0.5, 0, 0, {});
    second.handle(b);
    second.handle(protocol::tick{});
  }
  CHECK(second.net.take<protocol::node_died>().empty());
  second.handle(protocol::resource_query{1, driver});
  auto r = second.net.take<protocol::resource_reply>();
  REQUIRE(r.size() == 1);
  CHECK(r[0].second.total.get(protocol::cpu) == 2);
  CHECK(r[0].second.available.get(protocol::cpu) == 0.5);  // as reported, not as registered
}

TEST_CASE("a head whose tables cannot be written (a full disk) goes on serving from memory",
          "[head][tables][fault]") {
  auto rows = std::make_shared<fakes::memory_table_db::rows>();
  rows->fail_writes = true;
  std::chrono::steady_clock::time_point now{};
  head_on_tables h(now, std::make_unique<head_tables>(std::make_unique<fakes::memory_table_db>(rows)));
  const node_id node = node_id::random();
  const actor_id actor = actor_id::random();
  h.handle(registration(node));
  const job_id job = job_id::random();
  h.handle(named_actor(actor, job, "ps"));
  auto replies = h.net.take<protocol::create_actor_reply>();
  REQUIRE(replies.size() == 1);
  CHECK(replies[0].second.ok);
  CHECK(h.net.take<protocol::start_actor>().size() == 1);
  h.handle(protocol::lookup_actor{5, driver, "ps", job});
  auto found = h.net.take<protocol::lookup_actor_reply>();
  REQUIRE(found.size() == 1);
  CHECK(found[0].second.found);
  CHECK(rows->writes == 0);
  CHECK(rows->tables.empty());

  rows->fail_writes = false;  // room again: the next change is written
  h.handle(protocol::actor_started{actor, address{unique_id::random(), "tcp://10.0.0.1:7002"}, {}, {}});
  CHECK(rows->writes == 1);
  CHECK(rows->tables["actors"].size() == 1);
}

TEST_CASE("a job that ends with many actors changes their rows in one write of the tables",
          "[head][tables]") {
  // One sync per row held the head for seconds at 1,000 actors (docs/benchmarks.md, "A
  // simulated cluster of 1,000 nodes"): every heartbeat waited behind it.
  auto rows = std::make_shared<fakes::memory_table_db::rows>();
  std::chrono::steady_clock::time_point now{};
  head_on_tables h(now, std::make_unique<head_tables>(std::make_unique<fakes::memory_table_db>(rows)));
  const node_id node = node_id::random();
  const job_id job = job_id::random();
  h.handle(registration(node));
  constexpr int actors = 50;
  for (int i = 0; i < actors; ++i) {
    const actor_id a = actor_id::random();
    h.handle(named_actor(a, job, "a" + std::to_string(i)));
    h.handle(protocol::actor_started{a, address{unique_id::random(), "tcp://10.0.0.1:7002"}, {}, {}});
  }
  REQUIRE(rows->tables["actors"].size() == actors);
  const auto before = rows->writes;
  h.handle(protocol::job_finished{job});
  CHECK(rows->writes == before + 1);
  CHECK(rows->tables["actors"].empty());
  CHECK(h.net.take<protocol::kill_actor>().size() == actors);
  // The head goes on writing row by row afterwards.
  h.handle(named_actor(actor_id::random(), job_id::random(), "after"));
  CHECK(rows->writes == before + 2);
}
