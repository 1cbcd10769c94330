// A core's task submitter, driven message by message: the test plays the node that grants
// leases and the workers that run tasks, and moves the clock by hand.
#include "config/knobs.hpp"
#include "core/task_submitter.hpp"
#include "unit/runtime/core_pieces.hpp"

#include <catch2/catch.hpp>

using namespace celer;

namespace {

struct submitter_fixture : testing::core_pieces {
  task_submitter tasks{net, objects, ids, {self, node, head, this_node}, [this] { return now; }};

  /// Submits a task of `function` (with `args`); returns its id and the handle to its result.
  std::pair<task_id, object_ref<void>> submit(const std::string& function,
                                              std::vector<detail::arg_spec> args = {}) {
    auto spec = task(function);
    const task_id id = spec.id;
    auto ref = objects.submit(spec, std::move(args));
    tasks.submit(std::move(spec));
    return {id, std::move(ref)};
  }
  /// Answers the oldest lease request with a worker on `on` (this node unless given).
  worker_id grant(const node_id& on = {}) {
    auto asked = net.take<protocol::request_lease>();
    REQUIRE_FALSE(asked.empty());
    // Requests not answered here stay asked.
    for (std::size_t i = 1; i < asked.size(); ++i) net.sent.emplace_back(asked[i].first, asked[i].second);
    protocol::lease_reply r;
    r.request = asked[0].second.spec.id;
    r.ok = true;
    r.worker = worker_id::random();
    r.worker_addr = address{r.worker, {}};
    r.node = on.nil() ? this_node : on;
    r.node_addr = node;
    tasks.on_lease_reply(r);
    return r.worker;
  }
  /// The tasks pushed to workers since the last call.
  std::vector<std::pair<address, protocol::execute_task>> pushed() {
    return net.take<protocol::execute_task>();
  }
};

} // namespace

TEST_CASE("a task waits for a lease, runs on the leased worker and its result fills its object",
          "[core][task_submitter]") {
  submitter_fixture f;
  auto [id, ref] = f.submit("f");
  CHECK(f.tasks.queued() == 1);
  CHECK(f.tasks.lease_requests() == 1);
  const auto asked = f.net.take<protocol::request_lease>();
  REQUIRE(asked.size() == 1);
  CHECK(asked[0].first == f.node);
  CHECK(asked[0].second.spec.function == "f");
  f.net.sent.emplace_back(asked[0].first, asked[0].second);

  const worker_id w = f.grant();
  auto sent = f.pushed();
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].first.id == w);
  CHECK(sent[0].second.spec.id == id);
  CHECK(f.tasks.running() == 1);
  CHECK_FALSE(f.objects.ready(ref.id()));

  auto r = testing::core_pieces::result(id, "42");
  CHECK(f.tasks.on_result(r));
  const auto v = f.value_of(ref);
  CHECK(v.ok);
  CHECK(v.payload == "42");
  CHECK(f.tasks.running() == 0);
  CHECK(f.tasks.leases() == 1);  // kept for lease_idle_ms
}

TEST_CASE("an idle lease goes back to its node once lease_idle_ms has passed on the clock",
          "[core][task_submitter]") {
  submitter_fixture f;
  auto [id, ref] = f.submit("f");
  const worker_id w = f.grant();
  f.pushed();
  auto r = testing::core_pieces::result(id, "1");
  REQUIRE(f.tasks.on_result(r));
  const auto linger = std::chrono::milliseconds(knobs().lease_idle_ms);
  CHECK(f.tasks.return_idle(f.now) == f.now + linger);
  CHECK(f.net.take<protocol::return_lease>().empty());

  f.now += linger - std::chrono::milliseconds(1);
  CHECK(f.tasks.return_idle(f.now) == f.now + std::chrono::milliseconds(1));
  CHECK(f.tasks.leases() == 1);

  f.now += std::chrono::milliseconds(1);
  CHECK(f.tasks.return_idle(f.now) == task_submitter::time_point::max());
  const auto returned = f.net.take<protocol::return_lease>();
  REQUIRE(returned.size() == 1);
  CHECK(returned[0].first == f.node);
  CHECK(returned[0].second.worker == w);
  CHECK(f.tasks.leases() == 0);
}

TEST_CASE("a busy lease is not returned however long it runs", "[core][task_submitter]") {
  submitter_fixture f;
  f.submit("f");
  f.grant();
  f.now += std::chrono::hours(1);
  CHECK(f.tasks.return_idle(f.now) == task_submitter::time_point::max());
  CHECK(f.tasks.leases() == 1);
}

TEST_CASE("the next task of a shape goes to the lease the last one freed, with no new request",
          "[core][task_submitter]") {
  submitter_fixture f;
  auto [a, ra] = f.submit("f");
  auto [b, rb] = f.submit("f");
  // Two tasks waiting: two requests; the first grant takes the first task.
  CHECK(f.tasks.lease_requests() == 2);
  const worker_id w = f.grant();
  auto sent = f.pushed();
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].second.spec.id == a);
  // With one worker per task in flight (the default), b waits for a's worker.
  auto r = testing::core_pieces::result(a, "1");
  REQUIRE(f.tasks.on_result(r));
  sent = f.pushed();
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].first.id == w);
  CHECK(sent[0].second.spec.id == b);
  // Nothing waits any more: the outstanding request is withdrawn.
  CHECK(f.tasks.lease_requests() == 0);
  const auto cancelled = f.net.take<protocol::cancel_lease_requests>();
  REQUIRE(cancelled.size() == 1);
  CHECK(cancelled[0].second.requests.size() == 1);
}

TEST_CASE("a lease the node refuses fails every task waiting for that shape with the reason",
          "[core][task_submitter]") {
  submitter_fixture f;
  auto [id, ref] = f.submit("f");
  const auto asked = f.net.take<protocol::request_lease>();
  REQUIRE(asked.size() == 1);
  protocol::lease_reply r;
  r.request = asked[0].second.spec.id;
  r.fail = protocol::failure_info::make(detail::failure_kind::infeasible,
                                        error_code::resource_exhausted, "no node has 1 CPU");
  f.tasks.on_lease_reply(r);
  const auto v = f.value_of(ref);
  CHECK_FALSE(v.ok);
  CHECK(v.fail.kind == detail::failure_kind::infeasible);
  CHECK(v.fail.message == "task f can never run: no node has 1 CPU");
  CHECK(f.tasks.queued() == 0);
}

TEST_CASE("an unreachable local node fails the waiting tasks at once", "[core][task_submitter]") {
  submitter_fixture f;
  f.net.unreachable.push_back(f.node);
  auto [id, ref] = f.submit("f");
  const auto v = f.value_of(ref);
  CHECK_FALSE(v.ok);
  CHECK(v.fail.code == error_code::unavailable);
  CHECK(f.tasks.lease_requests() == 0);
}

TEST_CASE("once the local node died, lease requests go to the head", "[core][task_submitter]") {
  submitter_fixture f;
  f.submit("f");
  CHECK(f.net.take<protocol::request_lease>().size() == 1);
  f.tasks.on_node_died({f.this_node, "missed heartbeats"});
  const auto asked = f.net.take<protocol::request_lease>();
  REQUIRE(asked.size() == 1);
  CHECK(asked[0].first == f.head);
}

TEST_CASE("a task's by-ref arguments are held until its result arrives",
          "[core][task_submitter]") {
  submitter_fixture f;
  // An argument not ready yet (a pending task's result) is held by the task that takes it.
  auto [producer, pref] = f.submit("producer");
  auto [consumer, cref] = f.submit("consumer", {testing::core_pieces::by_ref(pref)});
  CHECK(f.objects.tasks_holding_args() == 1);
  const object_id held = pref.id();
  pref = {};  // the user lets go: the pending consumer still holds it
  CHECK(f.objects.owned_objects() == 2);
  f.grant();
  f.pushed();
  auto r = testing::core_pieces::result(producer, "1");
  REQUIRE(f.tasks.on_result(r));
  CHECK(f.objects.ready(held));
  f.pushed();  // the consumer, on the producer's worker
  auto rc = testing::core_pieces::result(consumer, "2");
  REQUIRE(f.tasks.on_result(rc));
  CHECK(f.objects.tasks_holding_args() == 0);
  CHECK(f.objects.owned_objects() == 1);  // only the consumer's result, still held by cref
}

TEST_CASE("pending_reason's question names the waiting task's shape, and none once it runs",
          "[core][task_submitter]") {
  submitter_fixture f;
  auto [id, ref] = f.submit("f");
  auto q = f.tasks.waiting(ref.id());
  REQUIRE(q);
  CHECK(q->need.amounts == protocol::make_request(1, 0, 0, {})->amounts);
  f.grant();
  CHECK_FALSE(f.tasks.waiting(ref.id()));
}

TEST_CASE("stop returns every lease and withdraws every request", "[core][task_submitter]") {
  submitter_fixture f;
  f.submit("f");
  f.submit("f");
  f.grant();
  f.tasks.stop("the core is destroyed");
  CHECK(f.tasks.leases() == 0);
  CHECK(f.tasks.lease_requests() == 0);
  CHECK(f.net.take<protocol::return_lease>().size() == 1);
  CHECK(f.net.take<protocol::cancel_lease_requests>().size() == 1);
}

TEST_CASE("a worker's death fails the tasks running on it, naming the worker and the cause",
          "[core][task_submitter]") {
  submitter_fixture f;
  auto [id, ref] = f.submit("f");
  const worker_id w = f.grant();
  f.pushed();
  f.tasks.on_worker_died({w, "exited with status 1"});
  const auto v = f.value_of(ref);
  CHECK_FALSE(v.ok);
  CHECK(v.fail.kind == detail::failure_kind::worker_died);
  CHECK(v.fail.worker == w.short_hex());
  CHECK(v.fail.message == "task f failed: its worker process exited with status 1");
  CHECK(f.tasks.leases() == 0);
  CHECK(f.tasks.running() == 0);
}
