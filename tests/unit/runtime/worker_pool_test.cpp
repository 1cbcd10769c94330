// The node's worker pool (node/worker_pool.hpp) on its own, on the recording transport with
// a made-up clock: workers lent and taken back into the pool or retired, processes that
// start late or never, CPUs lent while a worker is blocked in get, deaths reported to whom
// they concern, the endpoints of gone processes forgotten, and what the local scheduler is
// told when resources come back.
#include "fakes/recording_transport.hpp"
#include "node/worker_pool.hpp"

#include <catch2/catch.hpp>

using namespace celer;
using namespace std::chrono_literals;

namespace {

struct pool_parts {
  fakes::recording_transport net;
  fakes::fake_launcher launcher;
  address head{unique_id::random(), "tcp://10.0.0.1:6380"};
  node_id node = node_id::random();
  node_room room{*protocol::make_request(2, 0, 0, {}), {}};
  package_fetcher packages{net, head, node, {}};
  node_guard guard;
  std::chrono::steady_clock::time_point now{std::chrono::hours(1)};
  /// How often the pool said that resources came back.
  int freed = 0;
  worker_pool pool;

  explicit pool_parts(int max_idle = 4, bool cluster = false, std::chrono::milliseconds start_timeout = 0ms)
    : pool(net, launcher, room, packages, guard,
           {node, address{node, {}}, head, max_idle, cluster, start_timeout, [this] { return now; }}) {
    pool.when_room_frees([this] { ++freed; });
  }
  protocol::task_spec task(const job_id& job, double cpus = 1) {
    protocol::task_spec s;
    s.id = task_id::random();
    s.function = "f";
    s.job = job;
    s.owner = address{unique_id::random(), "tcp://10.0.0.9:1"};
    s.resources = *protocol::make_request(cpus, 0, 0, {});
    return s;
  }
  protocol::task_spec actor(const job_id& job) {
    auto s = task(job);
    s.kind = protocol::task_kind::actor_creation;
    s.actor = actor_id::random();
    return s;
  }
  /// Lends a worker for `s` as the local scheduler does: its resources taken from the room.
  worker_id lend(const protocol::task_spec& s) {
    room.available().subtract(s.resources);
    return pool.lend(s, {}, {}, 0ms);
  }
  double free_cpus() const { return room.available().get(protocol::cpu); }
};

} // namespace

TEST_CASE("a returned lease puts its worker back in the pool, lent again to the same job only",
          "[node][workers]") {
  pool_parts p;
  const job_id job = job_id::random();
  const auto first = p.task(job);
  const worker_id w = p.lend(first);
  auto grants = p.net.take<protocol::lease_reply>();
  REQUIRE(grants.size() == 1);
  CHECK(grants[0].first == first.owner);
  CHECK(grants[0].second.ok);
  CHECK(grants[0].second.worker == w);
  CHECK(grants[0].second.node == p.node);
  CHECK(p.free_cpus() == 1);

  protocol::return_lease back{w, first.id};
  p.pool.on(back);
  CHECK(p.free_cpus() == 2);
  CHECK(p.freed == 1);
  REQUIRE(p.pool.find(w) != nullptr);
  CHECK_FALSE(p.pool.find(w)->busy);

  // Another job's work gets a worker of its own; the same job's gets the idle one.
  const worker_id other = p.lend(p.task(job_id::random()));
  CHECK(other != w);
  CHECK(p.lend(p.task(job)) == w);
  CHECK(p.launcher.launched_ids.size() == 2);
  CHECK(p.pool.size() == 2);
}

TEST_CASE("a stale or another job's return of a lease takes nothing back", "[node][workers][security]") {
  pool_parts p;
  const job_id job = job_id::random();
  const auto s = p.task(job);
  const worker_id w = p.lend(s);
  protocol::return_lease stale{w, task_id::random()};
  p.pool.on(stale);
  protocol::return_lease forged{w, s.id, job_id::random()};
  p.pool.on(forged);
  CHECK(p.free_cpus() == 1);
  CHECK(p.freed == 0);
  protocol::return_lease own{w, s.id, job};
  p.pool.on(own);
  CHECK(p.free_cpus() == 2);
}

TEST_CASE("idle workers past max_idle_workers, and those of a finished job, retire when taken back",
          "[node][workers]") {
  pool_parts p(/*max_idle=*/1);
  const job_id job = job_id::random();
  const auto a = p.task(job);
  const auto b = p.task(job);
  const worker_id wa = p.lend(a);
  const worker_id wb = p.lend(b);
  (void)p.net.take<protocol::lease_reply>();
  protocol::return_lease ra{wa, a.id};
  p.pool.on(ra);
  protocol::return_lease rb{wb, b.id};
  p.pool.on(rb);
  auto stops = p.net.take<protocol::shutdown_component>();
  REQUIRE(stops.size() == 1);
  CHECK(stops[0].first.id == wb);
  CHECK(stops[0].second.reason == "too many idle workers");
  CHECK(p.pool.size() == 1);

  // The job finishes with a worker lent: taken back, it retires; the idle one retires too.
  const auto c = p.task(job);
  const worker_id wc = p.lend(c);
  CHECK(wc == wa);
  const auto d = p.task(job);
  const worker_id wd = p.lend(d);
  p.pool.job_finished(job);
  const std::size_t found = p.pool.take_back_if(
    [&](const address&, const task_id& request, const job_id&) { return request == d.id; });
  CHECK(found == 1);
  p.pool.retire_idle(job);  // none idle: wa is still lent
  stops = p.net.take<protocol::shutdown_component>();
  REQUIRE(stops.size() == 1);
  CHECK(stops[0].first.id == wd);
  CHECK(stops[0].second.reason == "its job finished");
  CHECK(p.pool.size() == 1);
  CHECK(p.free_cpus() == 1);
}

TEST_CASE("a worker process gets its work once ready, and one that never says so is killed at its start timeout",
          "[node][workers]") {
  pool_parts p(4, /*cluster=*/true, /*start_timeout=*/30s);
  p.launcher.as_processes = true;
  const auto late = p.task(job_id::random());
  const worker_id wl = p.lend(late);
  CHECK(p.net.take<protocol::lease_reply>().empty());
  const address at{wl, "tcp://127.0.0.1:4001"};
  protocol::worker_ready ready{wl, at};
  p.pool.on(ready);
  auto grants = p.net.take<protocol::lease_reply>();
  REQUIRE(grants.size() == 1);
  CHECK(grants[0].second.worker_addr == at);

  const auto never = p.task(job_id::random());
  const worker_id wn = p.lend(never);
  p.now += 30s - 1ms;
  p.pool.kill_slow_starts(p.now);
  CHECK(p.launcher.terminated.empty());
  p.now += 1ms;
  p.pool.kill_slow_starts(p.now);
  REQUIRE(p.launcher.terminated == std::vector<worker_id>{wn});
  p.pool.kill_slow_starts(p.now + 1s);  // once
  CHECK(p.launcher.terminated.size() == 1);

  // Its death fails the lease it was started for, with the node's reason.
  protocol::worker_died died{wn, "was killed by signal 9"};
  p.pool.on(died);
  grants = p.net.take<protocol::lease_reply>();
  REQUIRE(grants.size() == 1);
  CHECK(grants[0].first == never.owner);
  CHECK(grants[0].second.request == never.id);
  CHECK_FALSE(grants[0].second.ok);
  CHECK_THAT(grants[0].second.fail.message, Catch::Contains("did not start within 30000 ms"));
  CHECK(p.free_cpus() == 1);  // the ready one still holds its CPU
  CHECK(p.pool.size() == 1);
}

TEST_CASE("a worker blocked in get lends its CPUs to the room until it runs again", "[node][workers]") {
  pool_parts p;
  const job_id job = job_id::random();
  const worker_id w = p.lend(p.task(job, 2));
  CHECK(p.free_cpus() == 0);
  protocol::worker_blocked forged{w, job_id::random()};
  p.pool.on(forged);
  CHECK(p.free_cpus() == 0);
  protocol::worker_blocked blocked{w, job};
  p.pool.on(blocked);
  CHECK(p.free_cpus() == 2);
  CHECK(p.freed == 1);
  p.pool.on(blocked);  // said twice: lent once
  CHECK(p.free_cpus() == 2);
  protocol::worker_unblocked unblocked{w, job};
  p.pool.on(unblocked);
  CHECK(p.free_cpus() == 0);
  CHECK(p.freed == 1);
}

TEST_CASE("an actor's worker that dies is reported to the head, a leased one's to its owner",
          "[node][workers][fault]") {
  pool_parts p;
  const auto a = p.actor(job_id::random());
  const worker_id wa = p.lend(a);
  const auto started = p.net.take<protocol::execute_task>();
  REQUIRE(started.size() == 1);
  CHECK(started[0].first.id == wa);
  const auto t = p.task(job_id::random());
  const worker_id wt = p.lend(t);
  (void)p.net.take<protocol::lease_reply>();
  CHECK(p.free_cpus() == 0);

  protocol::worker_died actor_died{wa, "was killed by signal 9"};
  p.pool.on(actor_died);
  const auto failed = p.net.take<protocol::actor_failed>();
  REQUIRE(failed.size() == 1);
  CHECK(failed[0].first == p.head);
  CHECK(failed[0].second.actor == a.actor);
  CHECK(failed[0].second.fail.kind == detail::failure_kind::actor_died);

  protocol::worker_died leased_died{wt, "exited with status 1"};
  p.pool.on(leased_died);
  const auto told = p.net.take<protocol::worker_died>();
  REQUIRE(told.size() == 1);
  CHECK(told[0].first == t.owner);
  CHECK(told[0].second.reason == "exited with status 1");
  CHECK(p.free_cpus() == 2);
  CHECK(p.pool.size() == 0);
  CHECK(p.freed == 2);
}

TEST_CASE("a gone worker process's endpoint is forgotten at the head, and by the transport once it exited",
          "[node][workers]") {
  pool_parts p(4, /*cluster=*/true);
  p.launcher.as_processes = true;
  const job_id job = job_id::random();
  const auto a = p.actor(job);
  const worker_id w = p.lend(a);
  protocol::worker_ready ready{w, address{w, "tcp://127.0.0.1:4002"}, job};
  p.pool.on(ready);
  REQUIRE(p.net.take<protocol::execute_task>().size() == 1);

  protocol::actor_exited forged{a.actor, w, job_id::random()};
  p.pool.on(forged);
  CHECK(p.pool.size() == 1);
  protocol::actor_exited exited{a.actor, w, job};
  p.pool.on(exited);
  CHECK(p.pool.size() == 0);
  CHECK(p.free_cpus() == 2);
  const auto unsub = p.net.take<protocol::unsubscribe_cluster>();
  REQUIRE(unsub.size() == 1);
  CHECK(unsub[0].first == p.head);
  CHECK(unsub[0].second.endpoint == "tcp://127.0.0.1:4002");
  CHECK(p.net.forgotten.empty());  // its process may still be flushing
  protocol::worker_died died{w, "exited with status 0"};
  p.pool.on(died);
  CHECK(p.net.forgotten == std::vector<std::string>{"tcp://127.0.0.1:4002"});
}

TEST_CASE("workers stopped while they start are told to stop when they say ready, on their job's word",
          "[node][workers][security]") {
  pool_parts p;
  p.launcher.as_processes = true;
  const auto s = p.task(job_id::random());
  const worker_id w = p.lend(s);
  p.pool.stop_all(protocol::shutdown_component{"the node is stopping"});
  CHECK(p.pool.size() == 0);
  (void)p.net.take<protocol::shutdown_component>();

  const address at{w, "tcp://127.0.0.1:4003"};
  protocol::worker_ready forged{w, at, job_id::random()};
  p.pool.on(forged);
  CHECK(p.net.take<protocol::shutdown_component>().empty());
  protocol::worker_ready own{w, at, s.job};
  p.pool.on(own);
  const auto stop = p.net.take<protocol::shutdown_component>();
  REQUIRE(stop.size() == 1);
  CHECK(stop[0].first == at);
  CHECK(p.net.take<protocol::lease_reply>().empty());
}

TEST_CASE("the pool tells the scheduler what it needs of its workers", "[node][workers]") {
  pool_parts p;
  const job_id job = job_id::random();
  const auto a = p.actor(job);
  const worker_id w = p.lend(a);
  auto* host = p.pool.host_of(a.actor);
  REQUIRE(host != nullptr);
  CHECK(host->first == w);
  CHECK(p.pool.host_of(actor_id::random()) == nullptr);
  CHECK(p.pool.of_sender(w, job, "test") == p.pool.find(w));
  CHECK(p.pool.of_sender(w, job_id::random(), "test") == nullptr);
  CHECK(p.pool.any_of([&](const worker_id&, const worker_slot& s) { return s.actor == a.actor; }));
  p.pool.terminate(host->first, host->second);
  CHECK(p.launcher.terminated == std::vector<worker_id>{w});
  protocol::heartbeat h;
  p.pool.report(h);
  CHECK(h.workers == 1);
}
