// The node agent's lease dispatch and resource accounting, driven message by message.
#include "node_fixture.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <thread>

using namespace celer;
using celer_test::node_fixture;
using celer_test::watched_node;

TEST_CASE("a lease for 2 CPUs waits while only 1 is free", "[node][resources]") {
  node_fixture f(2);
  auto a = f.task(1);
  f.submit(a);
  auto first = f.granted();
  REQUIRE(first.size() == 1);
  REQUIRE(f.node.available().get(protocol::cpu) == 1);

  auto big = f.task(2);
  f.submit(big);
  REQUIRE(f.granted().empty());
  REQUIRE(f.node.queued() == 1);

  f.done(first[0].second.worker);
  auto second = f.granted();
  REQUIRE(second.size() == 1);
  REQUIRE(second[0].second.request == big.id);
  REQUIRE(f.node.available().get(protocol::cpu) == 0);
}

TEST_CASE("a waiting large task does not hold back smaller ones behind it", "[node][resources]") {
  node_fixture f(2);
  f.submit(f.task(1));
  f.granted();
  f.submit(f.task(2));  // must wait
  auto small = f.task(1);
  f.submit(small);      // fits now
  auto s = f.granted();
  REQUIRE(s.size() == 1);
  REQUIRE(s[0].second.request == small.id);
}

TEST_CASE("fractional GPUs share a device without exceeding it", "[node][resources]") {
  node_fixture f(8, 1);
  for (int i = 0; i < 4; ++i) f.submit(f.task(0, 0.3));
  REQUIRE(f.granted().size() == 3);  // 0.9 of the GPU in use; a fourth 0.3 would exceed 1
  REQUIRE(f.node.available().get(protocol::gpu) == Approx(0.1));
}

TEST_CASE("a worker blocked in get lends its CPUs to queued tasks", "[node][resources]") {
  node_fixture f(1);
  f.submit(f.task(1));
  auto parent = f.granted();
  REQUIRE(parent.size() == 1);
  f.submit(f.task(1));
  REQUIRE(f.granted().empty());
  const worker_id w = parent[0].second.worker;
  protocol::message blocked = protocol::worker_blocked{w};
  f.node.handle(blocked);
  REQUIRE(f.granted().size() == 1);  // the child runs while its parent waits
  protocol::message unblocked = protocol::worker_unblocked{w};
  f.node.handle(unblocked);
  REQUIRE(f.node.available().get(protocol::cpu) == -1);  // briefly oversubscribed
}

TEST_CASE("returned workers are leased again instead of started again", "[node]") {
  node_fixture f(1);
  auto a = f.task(1);
  f.submit(a);
  auto s = f.granted();
  f.done(s[0].second.worker);
  f.submit(f.task(1));
  auto s2 = f.granted();
  REQUIRE(s2.size() == 1);
  REQUIRE(s2[0].second.worker == s[0].second.worker);
  REQUIRE(f.launcher.launched_ids.size() == 1);
}

TEST_CASE("a task this node can never run goes to the head", "[node][resources]") {
  node_fixture f(2);
  f.submit(f.task(4));
  REQUIRE(f.granted().empty());
  auto fwd = f.net.take<protocol::request_lease>();
  REQUIRE(fwd.size() == 1);
  REQUIRE(fwd[0].first == f.head);
}

TEST_CASE("each actor gets a worker of its own and holds its resources until it exits",
          "[node][actor]") {
  node_fixture f(2);
  auto spec = f.task(1);
  spec.kind = protocol::task_kind::actor_creation;
  spec.actor = actor_id::random();
  protocol::message start = protocol::start_actor{spec};
  f.node.handle(start);
  auto s = f.started();
  REQUIRE(s.size() == 1);
  REQUIRE(f.node.available().get(protocol::cpu) == 1);
  protocol::message exited = protocol::actor_exited{spec.actor, worker_id(s[0].first.id)};
  f.node.handle(exited);
  REQUIRE(f.node.available().get(protocol::cpu) == 2);
  REQUIRE(f.node.workers() == 0);
}

TEST_CASE("a lease goes to the owner that asked, with the worker's address", "[node][lease]") {
  node_fixture f(1);
  auto spec = f.task(1);
  spec.owner = address{unique_id::random(), "tcp://127.0.0.1:1"};
  f.submit(spec);
  auto g = f.granted();
  REQUIRE(g.size() == 1);
  REQUIRE(g[0].first == spec.owner);
  REQUIRE(g[0].second.ok);
  REQUIRE(g[0].second.worker_addr.id == g[0].second.worker);
  REQUIRE(g[0].second.node_addr == f.node_address());
}

TEST_CASE("a lease waits for its worker process to start", "[node][lease]") {
  node_fixture f(1);
  f.launcher.as_processes = true;
  auto spec = f.task(1);
  f.submit(spec);
  REQUIRE(f.granted().empty());
  const worker_id w = f.launcher.launched_ids.at(0);
  const address ready_at{w, "tcp://127.0.0.1:2"};
  protocol::message ready = protocol::worker_ready{w, ready_at};
  f.node.handle(ready);
  auto g = f.granted();
  REQUIRE(g.size() == 1);
  REQUIRE(g[0].second.worker_addr == ready_at);
}

TEST_CASE("a leased worker that dies is reported to the lease owner", "[node][lease]") {
  node_fixture f(1);
  auto spec = f.task(1);
  spec.owner = address{unique_id::random(), {}};
  f.submit(spec);
  auto g = f.granted();
  protocol::message died = protocol::worker_died{g[0].second.worker, "was killed by signal 9"};
  f.node.handle(died);
  auto told = f.net.take<protocol::worker_died>();
  REQUIRE(told.size() == 1);
  REQUIRE(told[0].first == spec.owner);
  REQUIRE(told[0].second.reason == "was killed by signal 9");
  REQUIRE(f.node.available().get(protocol::cpu) == 1);
}

TEST_CASE("a finished job's leases come back", "[node][lease]") {
  node_fixture f(2);
  auto spec = f.task(1);
  spec.job = job_id::random();
  f.submit(spec);
  f.submit(spec);
  REQUIRE(f.granted().size() == 2);
  REQUIRE(f.node.available().get(protocol::cpu) == 0);
  protocol::message fin = protocol::job_finished{spec.job};
  f.node.handle(fin);
  REQUIRE(f.node.available().get(protocol::cpu) == 2);
  REQUIRE(f.node.workers() == 0);
}

TEST_CASE("a cancelled lease request leaves the queue, and a lent worker comes back",
          "[node][lease]") {
  node_fixture f(1);
  auto first = f.task(1);
  first.owner = address{unique_id::random(), {}};
  auto second = f.task(1);
  second.owner = first.owner;
  f.submit(first);
  f.submit(second);
  auto g = f.granted();
  REQUIRE(g.size() == 1);
  REQUIRE(f.node.queued() == 1);
  protocol::message cancel = protocol::cancel_lease_requests{first.owner, {first.id, second.id}, false};
  f.node.handle(cancel);
  REQUIRE(f.node.queued() == 0);
  REQUIRE(f.node.available().get(protocol::cpu) == 1);
  // The owner's late return of the grant it did not need is ignored.
  f.done(g[0].second.worker);
  REQUIRE(f.node.available().get(protocol::cpu) == 1);
}

TEST_CASE("a stale return does not free a worker lent to someone else since", "[node][lease]") {
  node_fixture f(1);
  auto a = f.task(1);
  f.submit(a);
  auto ga = f.granted();
  const worker_id w = ga[0].second.worker;
  f.done(w);
  auto b = f.task(1);
  f.submit(b);
  auto gb = f.granted();
  REQUIRE(gb[0].second.worker == w);  // the same worker, lent again
  protocol::message stale = protocol::return_lease{w, a.id};
  f.node.handle(stale);
  REQUIRE(f.node.available().get(protocol::cpu) == 0);
}

TEST_CASE("a gone process's leases come back and its requests are dropped", "[node][lease]") {
  node_fixture f(1);
  auto spec = f.task(1);
  spec.owner = address{unique_id::random(), "tcp://127.0.0.1:7"};
  f.submit(spec);
  auto waiting = spec;
  waiting.id = task_id::random();
  f.submit(waiting);
  REQUIRE(f.granted().size() == 1);
  REQUIRE(f.node.queued() == 1);
  protocol::message gone = protocol::unsubscribe_cluster{"tcp://127.0.0.1:7"};
  f.node.handle(gone);
  REQUIRE(f.node.queued() == 0);
  REQUIRE(f.node.available().get(protocol::cpu) == 1);
}

TEST_CASE("preemption stops only the actors that make room, when ready or at the deadline",
          "[node][preemption]") {
  fakes::recording_transport net;
  fakes::fake_launcher launcher;
  const address head{unique_id::random(), {}};
  node_agent::config c;
  c.id = node_id::random();
  c.self = address{c.id, {}};
  c.head = head;
  c.total = *protocol::make_request(8, 2, 0, {});
  c.gpus = *gpu::parse_declared("A100-80GB:1,V100-16GB:1");  // index 0: A100, 1: V100
  c.preemption_grace = std::chrono::milliseconds(60'000);
  // A made-up clock: a grace passes when the test moves it.
  auto now = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  c.now = [&now] { return now; };
  node_agent node(net, launcher, c);
  node.start();

  auto actor = [](double gpus, const std::string& model, int priority, bool preemptible,
                  std::int64_t grace_ms = 0) {
    protocol::task_spec s;
    s.id = task_id::random();
    s.kind = protocol::task_kind::actor_creation;
    s.actor = actor_id::random();
    s.function = "make_" + model;
    s.resources = *protocol::make_request(0, gpus, 0, {});
    s.where.accelerator_type = model;
    s.priority = priority;
    s.preemptible = preemptible;
    s.preemption_grace_ms = grace_ms;
    return s;
  };
  auto start = [&](const protocol::task_spec& s) {
    protocol::message m = protocol::start_actor{s};
    node.handle(m);
    return net.take<protocol::execute_task>();
  };
  // The V100 actor has the lowest priority, but stopping it frees no A100.
  const auto v100 = actor(1, "V100", -5, true, 1);
  const auto a100 = actor(1, "A100", -1, true, 5'000);
  auto sv = start(v100);
  auto sa = start(a100);
  REQUIRE(sv.size() == 1);
  REQUIRE(sa.size() == 1);
  REQUIRE(launcher.launched_gpus == std::vector<std::vector<int>>{{1}, {0}});
  const address a100_worker = sa[0].first;

  const auto high = actor(1, "A100", 3, false);
  REQUIRE(start(high).empty());
  auto told = net.take<protocol::preempt_actor>();
  REQUIRE(told.size() == 1);
  CHECK(told[0].first.id == a100_worker.id);
  CHECK(told[0].second.actor == a100.actor);
  CHECK(told[0].second.grace_ms == 5'000);
  CHECK_THAT(told[0].second.reason,
             Catch::Matchers::Contains("actor make_A100 of priority 3") &&
               Catch::Matchers::Contains("(priority -1)"));
  // A second look (another dispatch) tells no one again.
  protocol::message tick = protocol::tick{};
  node.handle(tick);
  CHECK(net.take<protocol::preempt_actor>().empty());
  CHECK(launcher.terminated.empty());

  // Its callback returned: the head hears why, the worker is stopped, the request starts.
  protocol::message ready = protocol::preempt_ready{a100.actor, worker_id(a100_worker.id)};
  node.handle(ready);
  auto failed = net.take<protocol::actor_failed>();
  REQUIRE(failed.size() == 1);
  CHECK(failed[0].second.actor == a100.actor);
  CHECK(failed[0].second.fail.kind == detail::failure_kind::actor_preempted);
  REQUIRE(launcher.terminated == std::vector<worker_id>{worker_id(a100_worker.id)});
  protocol::message exited = protocol::actor_exited{a100.actor, worker_id(a100_worker.id)};
  node.handle(exited);
  REQUIRE(net.take<protocol::execute_task>().size() == 1);
  CHECK(launcher.launched_gpus.back() == std::vector<int>{0});

  // The V100 actor, told with a 1 ms grace, is stopped at the first tick past it.
  REQUIRE(start(actor(1, "V100", 3, false)).empty());
  told = net.take<protocol::preempt_actor>();
  REQUIRE(told.size() == 1);
  CHECK(told[0].second.actor == v100.actor);
  CHECK(told[0].second.grace_ms == 1);
  node.handle(tick);
  CHECK(launcher.terminated.size() == 1);  // within its grace
  now += std::chrono::milliseconds(2);
  node.handle(tick);
  CHECK(launcher.terminated.size() == 2);
  failed = net.take<protocol::actor_failed>();
  REQUIRE(failed.size() == 1);
  CHECK(failed[0].second.actor == v100.actor);
}

TEST_CASE("a node agent whose head answers its probes keeps serving", "[node][fault]") {
  using namespace std::chrono_literals;
  watched_node f;
  for (auto t = 0ms; t <= 120s; t += 500ms) {
    f.tick_at(t);
    (void)f.answer_probes();
  }
  CHECK(f.lost.empty());
  CHECK_FALSE(f.net.take<protocol::heartbeat>().empty());
}

TEST_CASE("a node agent whose head is silent stops its workers after node_head_timeout_ms",
          "[node][fault]") {
  using namespace std::chrono_literals;
  watched_node f;
  protocol::task_spec s;
  s.id = task_id::random();
  s.function = "f";
  s.resources = *protocol::make_request(1, 0, 0, {});
  protocol::message lease = protocol::request_lease{s, false};
  f.node.handle(lease);
  const auto granted = f.net.take<protocol::lease_reply>();
  REQUIRE(granted.size() == 1);
  f.tick_at(0ms);
  REQUIRE(f.answer_probes() == 1);
  // The head goes away: probes (about one a second) go unanswered, heartbeats still go out
  // in case it comes back.
  for (auto t = 500ms; t < 60s; t += 500ms) f.tick_at(t);
  CHECK(f.net.take<protocol::lookup_actor>().size() >= 55);
  CHECK(f.net.take<protocol::heartbeat>().size() >= 115);
  CHECK(f.lost.empty());
  CHECK(f.net.take<protocol::shutdown_component>().empty());
  // 60 s after the last answer: its workers are told to stop and the daemon learns why.
  f.tick_at(60s);
  REQUIRE(f.lost.size() == 1);
  CHECK_THAT(f.lost[0], Catch::Contains("tcp://10.0.0.1:6380") &&
                          Catch::Contains("node_head_timeout_ms"));
  const auto stopped = f.net.take<protocol::shutdown_component>();
  REQUIRE(stopped.size() == 1);
  CHECK(stopped[0].first.id == granted[0].second.worker);
  CHECK(f.node.workers() == 0);
  // Once: later ticks send nothing.
  f.net.sent.clear();
  f.tick_at(61s);
  CHECK(f.net.sent.empty());
  CHECK(f.lost.size() == 1);
}

TEST_CASE("a node agent whose head comes back before the bound carries on", "[node][fault]") {
  using namespace std::chrono_literals;
  watched_node f;
  f.tick_at(0ms);
  (void)f.answer_probes();
  for (auto t = 500ms; t < 50s; t += 500ms) f.tick_at(t);
  (void)f.answer_probes();  // answered at last (the network healed)
  for (std::chrono::milliseconds t = 50s; t < 100s; t += 500ms) f.tick_at(t);
  CHECK(f.lost.empty());
  f.tick_at(110s);  // 60 s from that answer
  CHECK(f.lost.size() == 1);
}

TEST_CASE("a stuck pull on a quiet node expires at the node's tick", "[node][store]") {
  fakes::recording_transport net;
  fakes::fake_launcher launcher;
  std::chrono::steady_clock::time_point now{std::chrono::hours(1)};
  auto c = node_fixture::make_config(1, 0, address{unique_id::random(), {}});
  c.store_capacity = 16 << 20;
  c.now = [&now] { return now; };
  node_agent node(net, launcher, c);
  node.start();
  const address reader{unique_id::random(), {}};
  const address source{unique_id::random(), "tcp://127.0.0.1:1"};
  const job_id job = job_id::random();
  protocol::message get =
    protocol::store_get{1, reader, object_id::random(), source, 1 << 20, 0, reader, job};
  node.handle(get);
  REQUIRE(net.take<protocol::store_pull>().size() == 1);
  REQUIRE(node.objects()->stats().objects_in_memory == 1);

  // No store message comes; only ticks. One just before the timeout changes nothing.
  const auto timeout = std::chrono::milliseconds(knobs().object_pull_timeout_ms);
  REQUIRE(timeout.count() > 0);
  protocol::message tick = protocol::tick{};
  now += timeout - std::chrono::milliseconds(1);
  node.handle(tick);
  CHECK(net.take<protocol::store_reply>().empty());
  now += std::chrono::milliseconds(1);
  node.handle(tick);
  const auto replies = net.take<protocol::store_reply>();
  REQUIRE(replies.size() == 1);
  CHECK(replies[0].first == reader);
  CHECK_FALSE(replies[0].second.ok);
  CHECK(replies[0].second.fail.code == error_code::unavailable);
  CHECK(node.objects()->stats().objects_in_memory == 0);
}

TEST_CASE("a node the head declared dead stops its workers and leaves, once", "[node][fault]") {
  fakes::recording_transport net;
  fakes::fake_launcher launcher;
  const address head{unique_id::random(), {}};
  auto cfg = node_fixture::make_config(2, 0, head);
  std::vector<std::string> left;
  cfg.head_lost = [&](const std::string& why) { left.push_back(why); };
  node_agent node(net, launcher, cfg);
  node.start();
  protocol::task_spec s;
  s.id = task_id::random();
  s.function = "f";
  s.resources = *protocol::make_request(1, 0, 0, {});
  protocol::message lease = protocol::request_lease{s, false};
  node.handle(lease);
  const auto granted = net.take<protocol::lease_reply>();
  REQUIRE(granted.size() == 1);
  REQUIRE(granted[0].second.ok);

  protocol::message other = protocol::node_died{node_id::random(), "another node"};
  node.handle(other);  // another node's death: nothing of this one stops
  REQUIRE(left.empty());
  REQUIRE(net.take<protocol::shutdown_component>().empty());

  protocol::message me = protocol::node_died{cfg.id, "no heartbeat for 6000 ms"};
  node.handle(me);
  REQUIRE(left.size() == 1);
  CHECK(left[0].find("no heartbeat for 6000 ms") != std::string::npos);
  const auto stopped = net.take<protocol::shutdown_component>();
  REQUIRE(stopped.size() == 1);
  CHECK(stopped[0].first.id == granted[0].second.worker);
  node.handle(me);  // told again on its next heartbeat: it is already leaving
  CHECK(left.size() == 1);
}
