// The node agent's lease dispatch and resource accounting, driven message by message.
#include "fakes/recording_transport.hpp"
#include "node/node_agent.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <thread>

using namespace celer;

namespace {

struct node_fixture {
  fakes::recording_transport net;
  fakes::fake_launcher launcher;
  address head{unique_id::random(), {}};
  node_agent node;
  address self;

  explicit node_fixture(double cpus, double gpus = 0)
    : node(net, launcher, make_config(cpus, gpus, head)) {
    node.start();
    self = net.take<protocol::register_node>().at(0).second.node_address;
  }
  static node_agent::config make_config(double cpus, double gpus, const address& head) {
    node_agent::config c;
    c.id = node_id::random();
    c.self = address{c.id, {}};
    c.head = head;
    c.total = *protocol::make_request(cpus, gpus, 0, {});
    c.max_idle_workers = 8;
    return c;
  }
  [[nodiscard]] const address& node_address() const { return self; }
  protocol::task_spec task(double cpus, double gpus = 0) {
    protocol::task_spec s;
    s.id = task_id::random();
    s.function = "f";
    s.resources = *protocol::make_request(cpus, gpus, 0, {});
    return s;
  }
  /// Asks for a lease for tasks shaped like `s` (s.id names the request).
  void submit(const protocol::task_spec& s) {
    protocol::message m = protocol::request_lease{s, false};
    node.handle(m);
  }
  /// The owner returns the lease it holds on `w`.
  void done(const worker_id& w) {
    protocol::message m = protocol::return_lease{w, lent_for.at(w)};
    node.handle(m);
  }
  /// Leases granted since the last call: (owner, reply).
  std::vector<std::pair<address, protocol::lease_reply>> granted() {
    auto g = net.take<protocol::lease_reply>();
    for (const auto& [to, r] : g) lent_for[r.worker] = r.request;
    return g;
  }
  /// Leases one worker for a task of `cpus` CPUs of a fresh job: the task (its job set) and
  /// the worker lent.
  std::pair<protocol::task_spec, worker_id> lease_for_new_job(double cpus) {
    auto s = task(cpus);
    s.job = job_id::random();
    submit(s);
    const auto g = granted();
    REQUIRE(g.size() == 1);
    return {s, g[0].second.worker};
  }
  std::map<worker_id, task_id> lent_for;
  /// Work sent to workers (actor creation).
  std::vector<std::pair<address, protocol::execute_task>> started() {
    return net.take<protocol::execute_task>();
  }
};

} // namespace

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
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  node.handle(tick);
  CHECK(launcher.terminated.size() == 2);
  failed = net.take<protocol::actor_failed>();
  REQUIRE(failed.size() == 1);
  CHECK(failed[0].second.actor == v100.actor);
}

namespace {

/// A node agent in cluster mode whose head probes are timed by a clock the test moves.
struct watched_node {
  fakes::recording_transport net;
  fakes::fake_launcher launcher;
  address head{unique_id::random(), "tcp://10.0.0.1:6380"};
  std::chrono::steady_clock::time_point now{std::chrono::hours(1)};
  std::vector<std::string> lost;
  node_agent node;

  watched_node() : node(net, launcher, make_config()) {
    node.start();
    (void)net.take<protocol::register_node>();
  }
  node_agent::config make_config() {
    auto c = node_fixture::make_config(2, 0, head);
    c.spill_to_head = true;
    c.head_missing_after = std::chrono::seconds(5);
    c.head_timeout = std::chrono::seconds(60);
    c.head_lost = [this](const std::string& why) { lost.push_back(why); };
    c.now = [this] { return now; };
    return c;
  }
  void tick_at(std::chrono::milliseconds since_start) {
    now = std::chrono::steady_clock::time_point{} + std::chrono::hours(1) + since_start;
    protocol::message m = protocol::tick{};
    node.handle(m);
  }
  /// The head answers the probes sent so far; returns how many there were.
  std::size_t answer_probes() {
    auto probes = net.take<protocol::lookup_actor>();
    for (const auto& [to, q] : probes) {
      REQUIRE(to == head);
      protocol::message reply = protocol::lookup_actor_reply{q.request_id, false, {}, {}};
      node.handle(reply);
    }
    return probes.size();
  }
};

} // namespace

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
