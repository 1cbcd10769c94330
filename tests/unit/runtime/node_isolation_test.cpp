// A job's messages to a node agent cannot touch another job's leases, workers, actors or
// lease requests: each is refused and the other job's work goes on (the attacker suite's
// node-side cases; head_isolation_test.cpp has the head's).
#include "node_fixture.hpp"

#include <catch2/catch.hpp>

using namespace celer;
using celer_test::node_fixture;
using celer_test::watched_node;

TEST_CASE("a job cannot return a lease that another job holds", "[node][lease][security]") {
  node_fixture f(1);
  const auto [s, w] = f.lease_for_new_job(1);
  REQUIRE(f.node.available().get(protocol::cpu) == 0);

  protocol::message forged = protocol::return_lease{w, s.id, job_id::random()};
  f.node.handle(forged);
  CHECK(f.node.available().get(protocol::cpu) == 0);  // still lent

  protocol::message own = protocol::return_lease{w, s.id, s.job};
  f.node.handle(own);
  CHECK(f.node.available().get(protocol::cpu) == 1);
}

TEST_CASE("a job cannot kill another job's actor through its node", "[node][actor][security]") {
  node_fixture f(2);
  const auto make_actor = [&] {
    auto spec = f.task(1);
    spec.kind = protocol::task_kind::actor_creation;
    spec.actor = actor_id::random();
    spec.job = job_id::random();
    return spec;
  };
  // One running, one still queued (it needs more CPUs than are left).
  const auto running = make_actor();
  protocol::message start = protocol::start_actor{running};
  f.node.handle(start);
  REQUIRE(f.started().size() == 1);
  auto waiting = make_actor();
  waiting.resources = *protocol::make_request(2, 0, 0, {});
  start = protocol::start_actor{waiting};
  f.node.handle(start);
  REQUIRE(f.node.queued() == 1);

  const job_id other = job_id::random();
  protocol::message kill = protocol::kill_actor{running.actor, "mine now", other};
  f.node.handle(kill);
  kill = protocol::kill_actor{waiting.actor, "mine now", other};
  f.node.handle(kill);
  CHECK(f.launcher.terminated.empty());
  CHECK(f.node.queued() == 1);

  kill = protocol::kill_actor{running.actor, "done", running.job};
  f.node.handle(kill);
  CHECK(f.launcher.terminated.size() == 1);
  kill = protocol::kill_actor{waiting.actor, "done", {}};  // the head (nil): trusted
  f.node.handle(kill);
  CHECK(f.node.queued() == 0);
}

TEST_CASE("a job cannot block or unblock another job's worker", "[node][resources][security]") {
  node_fixture f(1);
  const auto [s, w] = f.lease_for_new_job(1);
  const job_id other = job_id::random();

  protocol::message blocked = protocol::worker_blocked{w, other};
  f.node.handle(blocked);
  CHECK(f.node.available().get(protocol::cpu) == 0);  // its CPU is not lent out
  blocked = protocol::worker_blocked{w, s.job};
  f.node.handle(blocked);
  CHECK(f.node.available().get(protocol::cpu) == 1);

  protocol::message unblocked = protocol::worker_unblocked{w, other};
  f.node.handle(unblocked);
  CHECK(f.node.available().get(protocol::cpu) == 1);  // still lent out
  unblocked = protocol::worker_unblocked{w, s.job};
  f.node.handle(unblocked);
  CHECK(f.node.available().get(protocol::cpu) == 0);
}

TEST_CASE("a job cannot say that another job's actor exited", "[node][actor][security]") {
  node_fixture f(2);
  auto spec = f.task(1);
  spec.kind = protocol::task_kind::actor_creation;
  spec.actor = actor_id::random();
  spec.job = job_id::random();
  protocol::message start = protocol::start_actor{spec};
  f.node.handle(start);
  const auto s = f.started();
  REQUIRE(s.size() == 1);
  const worker_id w(s[0].first.id);

  protocol::message forged = protocol::actor_exited{spec.actor, w, job_id::random()};
  f.node.handle(forged);
  CHECK(f.node.workers() == 1);
  CHECK(f.node.available().get(protocol::cpu) == 1);  // still held by the actor

  protocol::message own = protocol::actor_exited{spec.actor, w, spec.job};
  f.node.handle(own);
  CHECK(f.node.workers() == 0);
  CHECK(f.node.available().get(protocol::cpu) == 2);
}

TEST_CASE("a job cannot cut short another job's actor's preemption", "[node][preemption][security]") {
  node_fixture f(1);
  auto actor = [&](int priority, bool preemptible) {
    auto spec = f.task(1);
    spec.kind = protocol::task_kind::actor_creation;
    spec.actor = actor_id::random();
    spec.job = job_id::random();
    spec.priority = priority;
    spec.preemptible = preemptible;
    spec.preemption_grace_ms = 60'000;
    protocol::message m = protocol::start_actor{spec};
    f.node.handle(m);
    return spec;
  };
  const auto low = actor(-1, true);
  const auto s = f.started();
  REQUIRE(s.size() == 1);
  const worker_id w(s[0].first.id);
  (void)actor(3, false);
  REQUIRE(f.net.take<protocol::preempt_actor>().size() == 1);  // it has a minute to checkpoint

  protocol::message forged = protocol::preempt_ready{low.actor, w, job_id::random()};
  f.node.handle(forged);
  CHECK(f.launcher.terminated.empty());
  CHECK(f.net.take<protocol::actor_failed>().empty());

  protocol::message own = protocol::preempt_ready{low.actor, w, low.job};
  f.node.handle(own);
  CHECK(f.launcher.terminated == std::vector<worker_id>{w});
}

TEST_CASE("only a worker's own job says it is ready, and only at its own address",
          "[node][lease][security]") {
  node_fixture f(1);
  f.launcher.as_processes = true;
  auto spec = f.task(1);
  spec.job = job_id::random();
  spec.owner = address{unique_id::random(), "tcp://127.0.0.1:1"};
  f.submit(spec);
  const worker_id w = f.launcher.launched_ids.at(0);
  const address ready_at{w, "tcp://127.0.0.1:2"};
  const job_id other = job_id::random();

  // Another job's word: the node would lend its worker at the address it names.
  protocol::message ready = protocol::worker_ready{w, ready_at, other};
  f.node.handle(ready);
  CHECK(f.granted().empty());
  // Its own job, but another worker's address.
  const address elsewhere{unique_id::random(), "tcp://127.0.0.1:3"};
  ready = protocol::worker_ready{w, elsewhere, spec.job};
  f.node.handle(ready);
  CHECK(f.granted().empty());
  // A worker this node does not know: its address (another job's worker, on another node)
  // is not told to stop.
  const address victim{unique_id::random(), "tcp://127.0.0.1:4"};
  ready = protocol::worker_ready{worker_id(victim.id), victim, other};
  f.node.handle(ready);
  CHECK(f.net.take<protocol::shutdown_component>().empty());

  ready = protocol::worker_ready{w, ready_at, spec.job};
  f.node.handle(ready);
  const auto g = f.granted();
  REQUIRE(g.size() == 1);
  CHECK(g[0].second.worker_addr == ready_at);
}

TEST_CASE("a worker forgotten while it started is told to stop on its own job's word",
          "[node][lease][security]") {
  node_fixture f(1);
  f.launcher.as_processes = true;
  auto spec = f.task(1);
  spec.job = job_id::random();
  f.submit(spec);
  const worker_id w = f.launcher.launched_ids.at(0);
  protocol::message fin = protocol::job_finished{spec.job};
  f.node.handle(fin);
  REQUIRE(f.node.workers() == 0);
  (void)f.net.take<protocol::shutdown_component>();  // sent while it has no address yet

  const address ready_at{w, "tcp://127.0.0.1:2"};
  protocol::message ready = protocol::worker_ready{w, ready_at, job_id::random()};
  f.node.handle(ready);
  CHECK(f.net.take<protocol::shutdown_component>().empty());
  ready = protocol::worker_ready{w, ready_at, spec.job};
  f.node.handle(ready);
  const auto stop = f.net.take<protocol::shutdown_component>();
  REQUIRE(stop.size() == 1);
  CHECK(stop[0].first == ready_at);
}

TEST_CASE("a job reports the usage of only the GPUs its workers on the node see",
          "[node][gpu][security]") {
  node_fixture f(2, 2);
  auto s = f.task(1, 1);
  s.job = job_id::random();
  f.submit(s);
  REQUIRE(f.granted().size() == 1);
  REQUIRE(f.launcher.launched_gpus.at(0).size() == 1);
  const int mine = f.launcher.launched_gpus.at(0).at(0);
  const int not_mine = 1 - mine;

  for (protocol::message m : {protocol::message{protocol::gpu_usage{{not_mine}, 0.9, 9, s.job}},
                              protocol::message{protocol::gpu_usage{{mine}, 0.9, 9, job_id::random()}},
                              protocol::message{protocol::gpu_usage{{mine, not_mine}, 0.9, 9, s.job}},
                              protocol::message{protocol::gpu_usage{{mine}, 0.5, 7, s.job}}}) {
    f.node.handle(m);
  }
  protocol::message tick = protocol::tick{};
  f.node.handle(tick);
  const auto hb = f.net.take<protocol::heartbeat>();
  REQUIRE(hb.size() == 1);
  const auto& samples = hb[0].second.gpu_samples;
  REQUIRE(samples.size() == 2);
  for (const auto& sample : samples) {
    INFO("GPU " << sample.index);
    CHECK(sample.utilisation == Approx(sample.index == mine ? 0.5 : 0.0));
    CHECK(sample.memory_used_bytes == (sample.index == mine ? 7u : 0u));
  }
}

TEST_CASE("a job cannot cancel another job's lease requests", "[node][lease][security]") {
  node_fixture f(1);
  auto first = f.task(1);
  first.job = job_id::random();
  first.owner = address{unique_id::random(), {}};
  auto second = first;
  second.id = task_id::random();
  f.submit(first);
  f.submit(second);
  REQUIRE(f.granted().size() == 1);
  REQUIRE(f.node.queued() == 1);
  const job_id other = job_id::random();

  protocol::message cancel =
    protocol::cancel_lease_requests{first.owner, {first.id, second.id}, false, other};
  f.node.handle(cancel);
  CHECK(f.node.queued() == 1);
  CHECK(f.node.available().get(protocol::cpu) == 0);

  cancel = protocol::cancel_lease_requests{first.owner, {first.id, second.id}, false, first.job};
  f.node.handle(cancel);
  CHECK(f.node.queued() == 0);
  CHECK(f.node.available().get(protocol::cpu) == 1);

  // A node that does not hold them asks the head (which asks every node) in the sender's
  // name, so that each node checks it.
  watched_node cluster;
  cancel = protocol::cancel_lease_requests{first.owner, {first.id}, false, other};
  cluster.node.handle(cancel);
  const auto fwd = cluster.net.take<protocol::cancel_lease_requests>();
  REQUIRE(fwd.size() == 1);
  CHECK(fwd[0].first == cluster.head);
  CHECK(fwd[0].second.sender_job == other);
}

TEST_CASE("a node runs a job's work only in its own job's bundles, and refuses invalid amounts",
          "[node][groups][security]") {
  node_fixture f(4);
  const job_id k = job_id::random(), j = job_id::random();
  const placement_group_id group = placement_group_id::random();
  protocol::message reserve =
    protocol::reserve_bundle{group, 0, {*protocol::make_request(2, 0, 0, {}), {}}, k};
  f.node.handle(reserve);
  REQUIRE(f.net.take<protocol::bundle_reserved>().at(0).second.ok);
  REQUIRE(f.node.available().get(protocol::cpu) == 2);

  auto in_bundle = [&](const job_id& job) {
    auto s = f.task(1);
    s.job = job;
    s.owner = address{unique_id::random(), "tcp://10.0.0.9:1"};
    s.where.how = scheduling_strategy::kind::placement_group;
    s.where.group = group;
    s.where.bundle = 0;
    return s;
  };
  const auto theirs = in_bundle(j);
  f.submit(theirs);
  auto g = f.granted();
  REQUIRE(g.size() == 1);
  CHECK_FALSE(g[0].second.ok);
  CHECK(g[0].second.fail.code == error_code::permission_denied);
  CHECK(f.node.workers() == 0);
  // K's own, as the head routes it (work in a group comes through the head).
  protocol::message routed = protocol::request_lease{in_bundle(k), true};
  f.node.handle(routed);
  g = f.granted();
  REQUIRE(g.size() == 1);
  CHECK(g[0].second.ok);

  // -100 CPUs would add capacity: refused, nothing changes.
  auto negative = f.task(1);
  negative.job = j;
  negative.resources.amounts = {{"CPU", -100 * protocol::resource_unit}};
  f.submit(negative);
  g = f.granted();
  REQUIRE(g.size() == 1);
  CHECK(g[0].second.fail.code == error_code::invalid_argument);
  CHECK(f.node.available().get(protocol::cpu) == 2);
  CHECK(f.node.queued() == 0);
}

TEST_CASE("a job cannot restart another job's actor with a kill that lets it restart, nor end it",
          "[node][actor][security]") {
  node_fixture f(2);
  auto spec = f.task(1);
  spec.kind = protocol::task_kind::actor_creation;
  spec.actor = actor_id::random();
  spec.job = job_id::random();
  spec.max_restarts = 1;
  protocol::message start = protocol::start_actor{spec};
  f.node.handle(start);
  const auto s = f.started();
  REQUIRE(s.size() == 1);
  const worker_id w(s[0].first.id);
  const job_id other = job_id::random();

  protocol::kill_actor forged{spec.actor, "mine now", other};
  forged.no_restart = false;
  protocol::message m = forged;
  f.node.handle(m);
  m = protocol::actor_exited{spec.actor, w, other, "celer::exit_actor() was called in x"};
  f.node.handle(m);
  CHECK(f.launcher.terminated.empty());
  CHECK(f.node.workers() == 1);
  CHECK(f.net.take<protocol::actor_failed>().empty());

  // Its own job: the worker is stopped, and once it is gone the head hears of a death (so
  // that the actor restarts), not of an end.
  protocol::kill_actor own{spec.actor, "killed by celer::kill", spec.job};
  own.no_restart = false;
  m = own;
  f.node.handle(m);
  CHECK(f.launcher.terminated.size() == 1);
  m = protocol::actor_exited{spec.actor, w, spec.job};
  f.node.handle(m);
  auto told = f.net.take<protocol::actor_failed>();
  REQUIRE(told.size() == 1);
  CHECK(told[0].second.actor == spec.actor);
  CHECK(told[0].second.fail.code == error_code::unavailable);
  CHECK(told[0].second.fail.message.find("no_restart = false") != std::string::npos);
  CHECK(f.node.workers() == 0);
}

TEST_CASE("an actor that ended itself is reported dead for good, with why, by its node", "[node][actor]") {
  node_fixture f(2);
  auto spec = f.task(1);
  spec.kind = protocol::task_kind::actor_creation;
  spec.actor = actor_id::random();
  spec.job = job_id::random();
  protocol::message start = protocol::start_actor{spec};
  f.node.handle(start);
  const auto s = f.started();
  REQUIRE(s.size() == 1);
  const worker_id w(s[0].first.id);
  protocol::message m = protocol::actor_exited{spec.actor, w, spec.job, std::string(5000, 'x')};
  f.node.handle(m);
  auto told = f.net.take<protocol::actor_failed>();
  REQUIRE(told.size() == 1);
  CHECK(told[0].second.fail.kind == detail::failure_kind::actor_died);
  CHECK(told[0].second.fail.code == error_code::failed_precondition);  // never restarted
  // The worker's 5,000 'x's are quoted after "exited: ", cut short below.
  CHECK(told[0].second.fail.message.find("exited: xxx") != std::string::npos);
  CHECK(told[0].second.fail.message.size() < 700);  // the worker's words are capped
  CHECK(f.node.workers() == 0);
  CHECK(f.node.available().get(protocol::cpu) == 2);
}
