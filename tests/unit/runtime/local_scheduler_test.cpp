// The node's local scheduler (node/local_scheduler.hpp) on its own, over a real worker pool,
// on the recording transport with a made-up clock: waiting work started by priority when
// room comes back, requests sent on to the head and resent when it restarts, resends of
// what the node holds dropped, actors preempted and stopped when their grace ends, bundles
// given back, actors killed before and after they start, what waits reported.
#include "fakes/recording_transport.hpp"
#include "node/local_scheduler.hpp"

#include <catch2/catch.hpp>

using namespace celer;
using namespace std::chrono_literals;

namespace {

struct scheduler_parts {
  fakes::recording_transport net;
  fakes::fake_launcher launcher;
  address head{unique_id::random(), "tcp://10.0.0.1:6380"};
  node_id node = node_id::random();
  std::chrono::steady_clock::time_point now{std::chrono::hours(1)};
  node_room room;
  package_fetcher packages{net, head, node, {}};
  node_guard guard;
  worker_pool pool;
  local_scheduler scheduler;

  explicit scheduler_parts(double cpus, bool cluster = false)
    : room(*protocol::make_request(cpus, 0, 0, {}), {}),
      pool(net, launcher, room, packages, guard,
           {node, address{node, {}}, head, 4, cluster, 0ms, [this] { return now; }}),
      scheduler(net, pool, room, guard,
                {node, head, *protocol::make_request(cpus, 0, 0, {}), {}, cluster, 30s, [this] { return now; }}) {}

  static protocol::task_spec task(double cpus = 1, std::int32_t priority = 0) {
    protocol::task_spec s;
    s.id = task_id::random();
    s.function = "f";
    s.job = job_id::random();
    s.owner = address{unique_id::random(), "tcp://10.0.0.9:1"};
    s.resources = *protocol::make_request(cpus, 0, 0, {});
    s.priority = priority;
    return s;
  }
  static protocol::task_spec actor(double cpus = 1, std::int32_t priority = 0, bool preemptible = false) {
    auto s = task(cpus, priority);
    s.kind = protocol::task_kind::actor_creation;
    s.actor = actor_id::random();
    s.function = "make_actor";
    s.preemptible = preemptible;
    return s;
  }
  void request(const protocol::task_spec& s, bool from_head = false) {
    protocol::request_lease m{s, from_head};
    scheduler.on(m);
  }
  void start(const protocol::task_spec& s) {
    protocol::start_actor m{s};
    scheduler.on(m);
  }
  double free_cpus() const { return room.available().get(protocol::cpu); }
};

} // namespace

TEST_CASE("waiting work starts highest priority first when a worker gives its room back",
          "[node][scheduler]") {
  scheduler_parts p(1);
  const auto a = p.task();
  p.request(a);
  auto grants = p.net.take<protocol::lease_reply>();
  REQUIRE(grants.size() == 1);
  const auto low = p.task(1, 0);
  const auto high = p.task(1, 5);
  p.request(low);
  p.request(high);
  CHECK(p.net.take<protocol::lease_reply>().empty());
  CHECK(p.scheduler.queued() == 2);

  protocol::return_lease back{grants[0].second.worker, a.id};
  p.pool.on(back);  // the pool says room came back: the scheduler dispatches
  grants = p.net.take<protocol::lease_reply>();
  REQUIRE(grants.size() == 1);
  CHECK(grants[0].second.request == high.id);
  CHECK(grants[0].first == high.owner);
  CHECK(p.scheduler.queued() == 1);
  CHECK(p.free_cpus() == 0);
}

TEST_CASE("the heartbeat's report says what waits, for how long by the node's clock", "[node][scheduler]") {
  scheduler_parts p(1);
  p.request(p.task());
  const auto waiting = p.task(1, 2);
  p.request(waiting);
  p.now += 1500ms;
  protocol::heartbeat h;
  p.scheduler.report(h, p.now);
  CHECK(h.queued == 1);
  REQUIRE(h.waiting.size() == 1);
  CHECK(h.waiting[0].job == waiting.job);
  CHECK(h.waiting[0].waiting_ms == 1500);
  CHECK(h.waiting[0].priority == 2);
  CHECK(h.preempting.empty());
}

TEST_CASE("a request the node can never run goes to the head, resent when the head restarts until withdrawn",
          "[node][scheduler][fault]") {
  scheduler_parts p(1, /*cluster=*/true);
  const auto big = p.task(4);
  p.request(big);
  auto to_head = p.net.take<protocol::request_lease>();
  REQUIRE(to_head.size() == 1);
  CHECK(to_head[0].first == p.head);
  CHECK(p.scheduler.spilled() == 1);
  p.scheduler.resend_spilled();
  to_head = p.net.take<protocol::request_lease>();
  REQUIRE(to_head.size() == 1);
  CHECK(to_head[0].second.spec.id == big.id);

  // Withdrawn (its owner went): forgotten, but not counted as found here.
  const std::size_t found = p.scheduler.withdraw_leases(
    [&](const address& owner, const task_id&, const job_id&) { return owner == big.owner; });
  CHECK(found == 0);
  p.scheduler.resend_spilled();
  CHECK(p.net.take<protocol::request_lease>().empty());

  // One not held here, cancelled: the head is asked to cancel it everywhere.
  protocol::cancel_lease_requests cancel{big.owner, {big.id}, false, {}};
  p.scheduler.on(cancel);
  CHECK(p.net.take<protocol::cancel_lease_requests>().size() == 1);

  // Spilled requests are forgotten after a while, at a tick.
  p.request(p.task(4));
  (void)p.net.take<protocol::request_lease>();
  p.scheduler.tick(p.now + spilled_requests::memory + 1s);
  CHECK(p.scheduler.spilled() == 0);
}

TEST_CASE("a request the head placed on a node with no room goes back to the head once, after "
          "respill_after by the node's clock", "[node][scheduler]") {
  scheduler_parts p(1, /*cluster=*/true);
  const auto running = p.task();
  p.request(running, /*from_head=*/true);
  REQUIRE(p.net.take<protocol::lease_reply>().size() == 1);
  // The head's view was stale: it placed a second one here, where the first holds the CPU.
  const auto second = p.task();
  p.request(second, /*from_head=*/true);
  CHECK(p.scheduler.queued() == 1);
  p.scheduler.tick(p.now + 500ms);
  CHECK(p.net.take<protocol::request_lease>().empty());  // not yet
  p.scheduler.tick(p.now + 1001ms);
  auto back = p.net.take<protocol::request_lease>();
  REQUIRE(back.size() == 1);
  CHECK(back[0].first == p.head);
  CHECK(back[0].second.spec.id == second.id);
  CHECK_FALSE(back[0].second.from_head);
  CHECK(p.scheduler.queued() == 0);
  CHECK(p.scheduler.spilled() == 1);
  p.scheduler.tick(p.now + 1500ms);  // on its way: not forgotten
  // The head, knowing no better node, places it here again: it stays, and is granted when
  // room comes back.
  p.request(second, /*from_head=*/true);
  CHECK(p.scheduler.queued() == 1);
  p.now += 10s;
  p.scheduler.tick(p.now + 10s);
  CHECK(p.net.take<protocol::request_lease>().empty());
  CHECK(p.scheduler.queued() == 1);
  // A request that fits is never sent back, however long the tick is late.
  scheduler_parts q(2, /*cluster=*/true);
  q.request(q.task(), /*from_head=*/true);
  q.scheduler.tick(q.now + 1h);
  CHECK(q.net.take<protocol::request_lease>().empty());
}

TEST_CASE("a request the head resends while the node holds it is granted once", "[node][scheduler][idempotent]") {
  scheduler_parts p(2, /*cluster=*/true);
  const auto s = p.task();
  p.request(s, /*from_head=*/true);
  REQUIRE(p.net.take<protocol::lease_reply>().size() == 1);
  p.request(s, /*from_head=*/true);
  CHECK(p.net.take<protocol::lease_reply>().empty());
  CHECK(p.launcher.launched_ids.size() == 1);
  CHECK(p.free_cpus() == 1);
}

TEST_CASE("a preemptible actor is told, then stopped when its grace ends by the node's clock, and the waiting actor starts",
          "[node][scheduler][preemption]") {
  scheduler_parts p(1);
  auto low = p.actor(1, -1, /*preemptible=*/true);
  low.preemption_grace_ms = 5'000;
  p.start(low);
  const auto started = p.net.take<protocol::execute_task>();
  REQUIRE(started.size() == 1);
  const worker_id lw(started[0].first.id);

  const auto high = p.actor(1, 3);
  p.start(high);
  CHECK(p.net.take<protocol::execute_task>().empty());
  const auto told = p.net.take<protocol::preempt_actor>();
  REQUIRE(told.size() == 1);
  CHECK(told[0].first.id == lw);
  CHECK(told[0].second.grace_ms == 5'000);
  protocol::heartbeat h;
  p.scheduler.report(h, p.now);
  REQUIRE(h.preempting.size() == 1);
  CHECK(h.preempting[0].actor == low.actor);
  CHECK(h.preempting[0].ms_left == 5'000);

  p.scheduler.tick(p.now + 4'999ms);
  CHECK(p.launcher.terminated.empty());
  p.scheduler.tick(p.now + 5'000ms);
  CHECK(p.launcher.terminated == std::vector<worker_id>{lw});
  const auto failed = p.net.take<protocol::actor_failed>();
  REQUIRE(failed.size() == 1);
  CHECK(failed[0].first == p.head);
  CHECK(failed[0].second.fail.kind == detail::failure_kind::actor_preempted);
  p.scheduler.tick(p.now + 6'000ms);  // once
  CHECK(p.launcher.terminated.size() == 1);

  protocol::actor_exited exited{low.actor, lw};
  p.pool.on(exited);
  const auto now_started = p.net.take<protocol::execute_task>();
  REQUIRE(now_started.size() == 1);
  CHECK(now_started[0].second.spec.actor == high.actor);
}

TEST_CASE("a bundle given back fails the work waiting for it and stops the work running in it",
          "[node][scheduler][groups]") {
  scheduler_parts p(4);
  const job_id job = job_id::random();
  const placement_group_id group = placement_group_id::random();
  REQUIRE(p.room.reserve(protocol::reserve_bundle{group, 0, {*protocol::make_request(2, 0, 0, {}), {}}, job}).empty());
  auto in_bundle = [&] {
    auto s = p.task();
    s.job = job;
    s.where.how = scheduling_strategy::kind::placement_group;
    s.where.group = group;
    s.where.bundle = 0;
    return s;
  };
  p.request(in_bundle(), true);
  p.request(in_bundle(), true);
  const auto waits = in_bundle();
  p.request(waits, true);
  REQUIRE(p.net.take<protocol::lease_reply>().size() == 2);
  CHECK(p.scheduler.queued() == 1);
  CHECK(p.free_cpus() == 2);

  protocol::return_bundles back{group, {}, "its group was removed"};
  p.scheduler.on(back);
  const auto refused = p.net.take<protocol::lease_reply>();
  REQUIRE(refused.size() == 1);
  CHECK(refused[0].second.request == waits.id);
  CHECK_FALSE(refused[0].second.ok);
  CHECK_THAT(refused[0].second.fail.message, Catch::Contains("given back"));
  CHECK(p.launcher.terminated.size() == 2);
  CHECK(p.scheduler.queued() == 0);
  CHECK(p.free_cpus() == 4);
  for (const auto& w : p.launcher.terminated) {
    protocol::worker_died died{w, "was killed by signal 9"};
    p.pool.on(died);
  }
  CHECK(p.free_cpus() == 4);  // what they held went back with the bundle
  CHECK(p.pool.size() == 0);
}

TEST_CASE("an actor is killed in the queue or on its worker, on its own job's word", "[node][scheduler][security]") {
  scheduler_parts p(1);
  const auto running = p.actor();
  p.start(running);
  REQUIRE(p.net.take<protocol::execute_task>().size() == 1);
  const auto queued = p.actor();
  p.start(queued);
  REQUIRE(p.scheduler.queued() == 1);

  protocol::kill_actor forged{queued.actor, "mine", job_id::random()};
  p.scheduler.on(forged);
  CHECK(p.scheduler.queued() == 1);
  protocol::kill_actor own{queued.actor, "done", queued.job};
  p.scheduler.on(own);
  CHECK(p.scheduler.queued() == 0);

  protocol::kill_actor by_head{running.actor, "done", {}};
  p.scheduler.on(by_head);
  CHECK(p.launcher.terminated.size() == 1);
}

TEST_CASE("a stopped scheduler drops what waits and takes no more", "[node][scheduler]") {
  scheduler_parts p(1);
  p.request(p.task());
  p.request(p.task());
  REQUIRE(p.net.take<protocol::lease_reply>().size() == 1);
  p.scheduler.stop();
  CHECK(p.scheduler.queued() == 0);
  p.request(p.task());
  p.start(p.actor());
  CHECK(p.scheduler.queued() == 0);
  CHECK(p.net.sent.empty());
}

TEST_CASE("a worker is reused only for work with the same env_vars, and the runtime's own "
          "variables are refused", "[node][scheduler][env_vars][security]") {
  scheduler_parts p(1);
  auto a = p.task();
  a.env_vars = {{"MODE", "fast"}};
  p.request(a);
  auto grants = p.net.take<protocol::lease_reply>();
  REQUIRE(grants.size() == 1);
  REQUIRE(grants[0].second.ok);
  protocol::return_lease back{grants[0].second.worker, a.id};
  p.pool.on(back);
  REQUIRE(p.launcher.launched_ids.size() == 1);

  // The same job with the same variables: the idle worker again.
  auto same = p.task();
  same.job = a.job;
  same.env_vars = a.env_vars;
  p.request(same);
  grants = p.net.take<protocol::lease_reply>();
  REQUIRE(grants.size() == 1);
  CHECK(grants[0].second.worker == p.launcher.launched_ids[0]);
  protocol::return_lease back2{grants[0].second.worker, same.id};
  p.pool.on(back2);

  // Other values: a new worker (a process cannot change its environment).
  auto other = p.task();
  other.job = a.job;
  other.env_vars = {{"MODE", "slow"}};
  p.request(other);
  grants = p.net.take<protocol::lease_reply>();
  REQUIRE(grants.size() == 1);
  CHECK(grants[0].second.worker != p.launcher.launched_ids[0]);
  CHECK(p.launcher.launched_ids.size() == 2);
  protocol::return_lease back3{grants[0].second.worker, other.id};
  p.pool.on(back3);

  // A job naming the runtime's own variables (its credential, its node) is refused, and no
  // worker starts.
  for (const char* name : {"CELER_JOB_CREDENTIAL", "CUDA_VISIBLE_DEVICES", "TMPDIR", "BAD-NAME"}) {
    auto sneaky = p.task();
    sneaky.env_vars = {{name, "x"}};
    p.request(sneaky);
    auto replies = p.net.take<protocol::lease_reply>();
    REQUIRE(replies.size() == 1);
    CHECK(replies[0].second.request == sneaky.id);
    CHECK_FALSE(replies[0].second.ok);
    CHECK(replies[0].second.fail.code == error_code::invalid_argument);
    CHECK_THAT(replies[0].second.fail.message, Catch::Matchers::Contains(name));
  }
  CHECK(p.launcher.launched_ids.size() == 2);
}
