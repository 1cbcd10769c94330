// A core's task submitter, driven message by message: the test plays the node that grants
// leases and the workers that run tasks, and moves the clock by hand.
#include "unit/runtime/submitter_fixture.hpp"

#include <catch2/catch.hpp>

using namespace celer;
using celer::testing::scoped_depth;
using celer::testing::submitter_fixture;


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
  const scoped_depth no_pipelining(1);
  submitter_fixture f;
  auto [a, ra] = f.submit("f");
  auto [b, rb] = f.submit("f");
  // Two tasks waiting: two requests; the first grant takes the first task.
  CHECK(f.tasks.lease_requests() == 2);
  const worker_id w = f.grant();
  auto sent = f.pushed();
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].second.spec.id == a);
  // With one task in flight per worker, b waits for a's worker.
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
  CHECK(v.fail.message ==
        "task f failed after 1 attempt: its worker process " + w.short_hex() +
          " died (exited with status 1)");
  CHECK(f.tasks.leases() == 0);
  CHECK(f.tasks.running() == 0);
}

// ---- retries

namespace {

/// The result of `task`'s attempt `attempt`, `raised` when its own code threw.
protocol::task_result of_attempt(protocol::task_result r, std::int32_t attempt, bool raised = false) {
  r.attempt = attempt;
  r.raised = raised;
  return r;
}

} // namespace

TEST_CASE("a task whose worker died runs again on a new lease, as its next attempt",
          "[core][task_submitter][retry]") {
  submitter_fixture f;
  f.retry = {.max_retries = 3};
  auto [id, ref] = f.submit("f");
  const worker_id w1 = f.grant();
  auto first = f.pushed();
  REQUIRE(first.size() == 1);
  CHECK(first[0].second.spec.attempt == 1);

  f.tasks.on_worker_died({w1, "killed by signal 9"});
  CHECK_FALSE(f.objects.ready(ref.id()));
  CHECK(f.tasks.retries() == 1);
  CHECK(f.tasks.queued() == 1);
  const worker_id w2 = f.grant();  // a new lease was asked for
  auto again = f.pushed();
  REQUIRE(again.size() == 1);
  CHECK(again[0].first.id == w2);
  CHECK(again[0].second.spec.id == id);
  CHECK(again[0].second.spec.attempt == 2);
  CHECK(again[0].second.spec.function == "f");

  auto r = of_attempt(testing::core_pieces::result(id, "ok"), 2);
  CHECK(f.tasks.on_result(r));
  CHECK(f.value_of(ref).payload == "ok");
}

TEST_CASE("with max_retries 0 a task whose worker died fails at once, naming its one attempt",
          "[core][task_submitter][retry]") {
  submitter_fixture f;
  f.retry = {.max_retries = 0};
  auto [id, ref] = f.submit("f");
  const worker_id w = f.grant();
  f.pushed();
  f.tasks.on_worker_died({w, "exited with status 1"});
  const auto v = f.value_of(ref);
  CHECK_FALSE(v.ok);
  CHECK(v.fail.kind == detail::failure_kind::worker_died);
  CHECK(v.fail.message.find("failed after 1 attempt: ") != std::string::npos);
  CHECK(f.tasks.retries() == 0);
  CHECK(f.net.take<protocol::request_lease>().empty());
}

TEST_CASE("with max_retries -1 a task runs again however often its worker dies",
          "[core][task_submitter][retry]") {
  submitter_fixture f;
  f.retry = {.max_retries = -1};
  auto [id, ref] = f.submit("f");
  for (int i = 1; i <= 20; ++i) {
    const worker_id w = f.grant();
    auto sent = f.pushed();
    REQUIRE(sent.size() == 1);
    CHECK(sent[0].second.spec.attempt == i);
    f.tasks.on_worker_died({w, "killed"});
  }
  CHECK_FALSE(f.objects.ready(ref.id()));
  CHECK(f.tasks.retries() == 20);
  f.grant();
  f.pushed();
  auto r = of_attempt(testing::core_pieces::result(id, "at last"), 21);
  REQUIRE(f.tasks.on_result(r));
  CHECK(f.value_of(ref).payload == "at last");
}

TEST_CASE("a task that finally fails says how each attempt failed, and keeps the last kind",
          "[core][task_submitter][retry]") {
  submitter_fixture f;
  f.retry = {.max_retries = 2};
  auto [id, ref] = f.submit("f");
  std::vector<worker_id> workers;
  for (int i = 0; i < 3; ++i) {
    workers.push_back(f.grant());
    f.pushed();
    if (i < 2) {
      f.tasks.on_worker_died({workers.back(), "exited with status 1"});
    } else {
      f.tasks.on_node_died({f.this_node, "missed heartbeats"});
    }
  }
  const auto v = f.value_of(ref);
  CHECK_FALSE(v.ok);
  CHECK(v.fail.kind == detail::failure_kind::node_died);
  CHECK(v.fail.code == error_code::unavailable);
  CHECK(v.fail.worker == workers[2].short_hex());
  const std::string node = f.this_node.short_hex();
  CHECK(v.fail.message ==
        "task f failed after 3 attempts: attempt 1: its worker process " +
          workers[0].short_hex() + " died (exited with status 1); attempt 2: its worker process " +
          workers[1].short_hex() + " died (exited with status 1); attempt 3: its node " + node +
          " died (missed heartbeats)");
}

TEST_CASE("an exception is retried only with retry_exceptions, against the same max_retries",
          "[core][task_submitter][retry]") {
  SECTION("without retry_exceptions it reaches the caller at once") {
    submitter_fixture f;
    f.retry = {.max_retries = 3};
    auto [id, ref] = f.submit("f");
    f.grant();
    f.pushed();
    auto r = of_attempt(
      testing::core_pieces::failed(id, detail::failure_kind::task_error, "boom"), 1, true);
    REQUIRE(f.tasks.on_result(r));
    const auto v = f.value_of(ref);
    CHECK_FALSE(v.ok);
    CHECK(v.fail.kind == detail::failure_kind::task_error);
    CHECK(v.fail.message == "boom");  // one attempt: the task's own message, untouched
    CHECK(f.tasks.retries() == 0);
  }
  SECTION("with it the task runs again, and fails with every attempt's exception at the end") {
    submitter_fixture f;
    f.retry = {.max_retries = 1, .retry_exceptions = true};
    auto [id, ref] = f.submit("f");
    f.grant();
    f.pushed();
    auto r1 = of_attempt(
      testing::core_pieces::failed(id, detail::failure_kind::task_error, "boom 1"), 1, true);
    REQUIRE(f.tasks.on_result(r1));
    CHECK_FALSE(f.objects.ready(ref.id()));
    CHECK(f.tasks.retries() == 1);
    CHECK(f.tasks.queued() == 0);
    CHECK(f.tasks.leases() == 1);
    CHECK(f.tasks.running() == 1);
    auto again = f.pushed();  // on the same worker, which is fine
    REQUIRE(again.size() == 1);
    CHECK(again[0].second.spec.attempt == 2);
    auto r2 = of_attempt(
      testing::core_pieces::failed(id, detail::failure_kind::task_error, "boom 2"), 2, true);
    REQUIRE(f.tasks.on_result(r2));
    const auto v = f.value_of(ref);
    CHECK_FALSE(v.ok);
    CHECK(v.fail.kind == detail::failure_kind::task_error);
    CHECK(v.fail.message ==
          "task f failed after 2 attempts: attempt 1: it threw: boom 1; attempt 2: it threw: boom 2");
  }
  SECTION("with a list of types, only an exception of a listed type runs it again") {
    submitter_fixture f;
    f.retry = {.max_retries = 3, .retry_exceptions = {"app::flaky"}};
    auto [id, ref] = f.submit("f");
    f.grant();
    f.pushed();
    auto flaky = of_attempt(
      testing::core_pieces::failed(id, detail::failure_kind::task_error, "flaked"), 1, true);
    flaky.returns.front().fail.exception_type = "app::flaky";
    REQUIRE(f.tasks.on_result(flaky));
    CHECK(f.tasks.retries() == 1);
    CHECK_FALSE(f.objects.ready(ref.id()));
    f.pushed();
    auto broken = of_attempt(
      testing::core_pieces::failed(id, detail::failure_kind::task_error, "broke"), 2, true);
    broken.returns.front().fail.exception_type = "std::logic_error";
    REQUIRE(f.tasks.on_result(broken));
    const auto v = f.value_of(ref);
    CHECK_FALSE(v.ok);
    CHECK(f.tasks.retries() == 1);  // not again: std::logic_error is not listed
    CHECK(v.fail.message == "task f failed after 2 attempts: attempt 1: it threw app::flaky: flaked; "
                            "attempt 2: it threw std::logic_error: broke");
  }
  SECTION("a failed argument is not the task's exception: never retried") {
    submitter_fixture f;
    f.retry = {.max_retries = -1, .retry_exceptions = true};
    auto [id, ref] = f.submit("f");
    f.grant();
    f.pushed();
    auto r = of_attempt(
      testing::core_pieces::failed(id, detail::failure_kind::task_error, "its argument threw"), 1);
    REQUIRE(f.tasks.on_result(r));
    CHECK_FALSE(f.value_of(ref).ok);
    CHECK(f.tasks.retries() == 0);
  }
}

TEST_CASE("a late result of an attempt given up for dead is ignored, queued or running again",
          "[core][task_submitter][retry]") {
  submitter_fixture f;
  f.retry = {.max_retries = 3};
  auto [id, ref] = f.submit("f");
  const worker_id w1 = f.grant();
  f.pushed();
  f.tasks.on_worker_died({w1, "missed heartbeats"});
  // Waiting for a new lease: attempt 1's result arrives after all.
  auto late = of_attempt(testing::core_pieces::result(id, "late"), 1);
  CHECK(f.tasks.on_result(late));
  CHECK_FALSE(f.objects.ready(ref.id()));
  f.grant();
  f.pushed();
  // Attempt 2 runs: attempt 1's result again changes nothing.
  auto late2 = of_attempt(testing::core_pieces::result(id, "late"), 1);
  CHECK(f.tasks.on_result(late2));
  CHECK_FALSE(f.objects.ready(ref.id()));
  CHECK(f.tasks.running() == 1);
  auto r = of_attempt(testing::core_pieces::result(id, "second"), 2);
  CHECK(f.tasks.on_result(r));
  CHECK(f.value_of(ref).payload == "second");
  // And once done, a duplicate is not the submitter's: the table ignores a second fill.
  auto dup = of_attempt(testing::core_pieces::result(id, "dup"), 2);
  CHECK_FALSE(f.tasks.on_result(dup));
  f.objects.finish_task(id, dup.returns);
  CHECK(f.value_of(ref).payload == "second");
}

TEST_CASE("a retried task holds its arguments until it is finally done, and releases them once",
          "[core][task_submitter][retry]") {
  submitter_fixture f;
  f.retry = {.max_retries = 0};
  auto [producer, pref] = f.submit("producer");
  f.retry = {.max_retries = 2};
  auto [consumer, cref] = f.submit("consumer", {testing::core_pieces::by_ref(pref)});
  const object_id arg = pref.id();
  pref = {};
  const worker_id w = f.grant();
  f.pushed();
  auto r = testing::core_pieces::result(producer, "1");
  REQUIRE(f.tasks.on_result(r));
  f.pushed();  // the consumer, on the same worker
  f.tasks.on_worker_died({w, "killed"});
  CHECK(f.objects.tasks_holding_args() == 1);
  CHECK(f.objects.ready(arg));  // still held by the consumer's next attempt
  f.grant();
  auto sent = f.pushed();
  REQUIRE(sent.size() == 1);
  REQUIRE(sent[0].second.spec.args.size() == 1);
  CHECK(sent[0].second.spec.args[0].ref == arg);
  auto done = of_attempt(testing::core_pieces::result(consumer, "2"), 2);
  REQUIRE(f.tasks.on_result(done));
  CHECK(f.objects.tasks_holding_args() == 0);
  CHECK_FALSE(f.objects.ready(arg));  // freed: nothing holds it any more
  CHECK(f.objects.owned_objects() == 1);
}

TEST_CASE("a retried task goes before tasks submitted after it", "[core][task_submitter][retry]") {
  const scoped_depth no_pipelining(1);
  submitter_fixture f;
  f.retry = {.max_retries = 1};
  auto [a, ra] = f.submit("f");
  const worker_id w = f.grant();
  f.pushed();
  auto [b, rb] = f.submit("f");
  f.tasks.on_worker_died({w, "killed"});
  f.grant();
  auto sent = f.pushed();
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].second.spec.id == a);
}

TEST_CASE("where workers cannot die (embedded threads) only retry_exceptions runs a task again",
          "[core][task_submitter][retry]") {
  testing::core_pieces f;
  task_submitter tasks{f.net, f.objects, f.ids, {f.self, f.node, f.head, f.this_node, false},
                       [&] { return f.now; }};
  auto grant = [&] {
    auto asked = f.net.take<protocol::request_lease>();
    REQUIRE(asked.size() == 1);
    protocol::lease_reply r;
    r.request = asked[0].second.spec.id;
    r.ok = true;
    r.worker = worker_id::random();
    r.worker_addr = address{r.worker, {}};
    r.node = f.this_node;
    r.node_addr = f.node;
    tasks.on_lease_reply(r);
    return r.worker;
  };
  // A worker thread that is gone (only at shutdown): its task fails, nothing is kept for it.
  auto plain = f.task("f");
  auto plain_ref = f.objects.submit(plain, {});
  tasks.submit(std::move(plain), {.max_retries = 3});
  const worker_id w = grant();
  tasks.on_worker_died({w, "gone"});
  CHECK_FALSE(f.value_of(plain_ref).ok);
  CHECK(tasks.retries() == 0);
  // An exception with retry_exceptions runs again.
  auto thrower = f.task("g");
  const task_id id = thrower.id;
  auto ref = f.objects.submit(thrower, {});
  tasks.submit(std::move(thrower), {.max_retries = 1, .retry_exceptions = true});
  grant();
  f.net.take<protocol::execute_task>();
  auto r = testing::core_pieces::failed(id, detail::failure_kind::task_error, "boom");
  r.raised = true;
  REQUIRE(tasks.on_result(r));
  CHECK(tasks.retries() == 1);
  const auto again = f.net.take<protocol::execute_task>();
  REQUIRE(again.size() == 1);
  CHECK(again[0].second.spec.attempt == 2);
  CHECK_FALSE(f.objects.ready(ref.id()));
}

TEST_CASE("a task whose stored output was lost with its node runs again as its next attempt",
          "[core][task_submitter][lineage]") {
  submitter_fixture f;
  f.retry.max_retries = 2;
  f.objects.set_rebuilder([&](std::vector<reference_table::rebuild> lost) {
    for (auto& r : lost) f.tasks.rebuild(std::move(r));
  });
  auto [id, ref] = f.submit("produce");
  f.grant();
  REQUIRE(f.pushed().size() == 1);
  const node_id there = node_id::random();
  auto r = testing::core_pieces::result(id, "");
  r.returns[0].stored = true;
  r.returns[0].node = there;
  r.returns[0].node_addr = address{unique_id::random(), "inproc://there"};
  REQUIRE(f.tasks.on_result(r));
  CHECK(f.objects.lineages() == 1);

  f.objects.on_node_died(there, "no heartbeat");
  CHECK_FALSE(f.objects.ready(ref.id()));
  CHECK(f.tasks.retries() == 1);
  const auto again = f.pushed();  // the lease is still held: it runs there at once
  REQUIRE(again.size() == 1);
  CHECK(again[0].second.spec.id == id);
  CHECK(again[0].second.spec.attempt == 2);
  auto r2 = testing::core_pieces::result(id, "");
  r2.attempt = 2;
  r2.returns[0].stored = true;
  r2.returns[0].node = f.this_node;
  r2.returns[0].node_addr = f.node;
  REQUIRE(f.tasks.on_result(r2));
  CHECK(f.objects.ready(ref.id()));
  CHECK(f.objects.lineages() == 1);  // kept again, with one retry left

  // Lost again with its last retry spent: the next loss is final, and says why.
  f.objects.on_node_died(f.this_node, "killed");
  REQUIRE(f.pushed().size() == 1);
  auto r3 = testing::core_pieces::result(id, "");
  r3.attempt = 3;
  r3.returns[0].stored = true;
  r3.returns[0].node = there;
  r3.returns[0].node_addr = address{unique_id::random(), "inproc://there"};
  REQUIRE(f.tasks.on_result(r3));
  CHECK(f.objects.lineages() == 0);
  f.objects.on_node_died(there, "killed again");
  CHECK(f.pushed().empty());
  const auto v = f.value_of(ref);
  REQUIRE_FALSE(v.ok);
  CHECK(v.fail.kind == detail::failure_kind::object_lost);
  CHECK(v.fail.message.find("no retries left") != std::string::npos);
}

TEST_CASE("a worker that died while it started for a lease fails no task that may run again: "
          "another lease is asked for",
          "[core][task_submitter][retry]") {
  submitter_fixture f;
  f.retry = {.max_retries = 1};
  auto [id, ref] = f.submit("f");
  const auto lost_lease = [&] {
    const auto asked = f.net.take<protocol::request_lease>();
    REQUIRE(asked.size() == 1);
    protocol::lease_reply r;
    r.request = asked[0].second.spec.id;
    r.fail = protocol::failure_info::make(
      detail::failure_kind::worker_died, error_code::unavailable,
      "its worker process was killed by signal 9 (SIGKILL)", {}, "5d22efb2", "6aa9592a");
    f.tasks.on_lease_reply(r);
  };
  lost_lease();
  CHECK_FALSE(f.objects.ready(ref.id()));
  CHECK(f.tasks.queued() == 1);
  CHECK(f.tasks.retries() == 1);
  lost_lease();  // a second time: its one retry is spent
  const auto v = f.value_of(ref);
  CHECK_FALSE(v.ok);
  CHECK(v.fail.kind == detail::failure_kind::worker_died);
  CHECK_THAT(v.fail.message, Catch::Contains("task f failed after 2 attempts: attempt 1: its "
                                             "worker process was killed by signal 9 (SIGKILL), "
                                             "while it started for a lease (node 5d22efb2"));
  CHECK(f.net.take<protocol::request_lease>().empty());
}

TEST_CASE("the connections to a dead worker, and to its dead node, are closed",
          "[core][task_submitter][retry]") {
  submitter_fixture f;
  f.retry = {.max_retries = 1};
  f.submit("f");
  const auto lend = [&](const std::string& worker_at, const std::string& node_at) {
    const auto asked = f.net.take<protocol::request_lease>();
    REQUIRE_FALSE(asked.empty());
    protocol::lease_reply r;
    r.request = asked.back().second.spec.id;
    r.ok = true;
    r.worker = worker_id::random();
    r.worker_addr = address{r.worker, worker_at};
    r.node = node_id::random();
    r.node_addr = address{unique_id::random(), node_at};
    f.tasks.on_lease_reply(r);
    return r;
  };
  const auto first = lend("tcp://10.0.0.2:7001", "tcp://10.0.0.2:7000");
  f.tasks.on_worker_died({first.worker, "killed by signal 9"});
  CHECK(f.net.forgotten == std::vector<std::string>{"tcp://10.0.0.2:7001"});
  const auto second = lend("tcp://10.0.0.3:7001", "tcp://10.0.0.3:7000");
  f.tasks.on_node_died({second.node, "no heartbeat"});
  CHECK(f.net.forgotten == std::vector<std::string>{"tcp://10.0.0.2:7001", "tcp://10.0.0.3:7001",
                                                    "tcp://10.0.0.3:7000"});
}

TEST_CASE("the submitter counts its tasks by state and the time each waited to be sent to a worker",
          "[core][task_submitter]") {
  const scoped_depth no_pipelining(1);
  submitter_fixture f;
  auto c = f.tasks.counts();
  CHECK(c.submitted == 0);
  CHECK(c.latency.size() == protocol::scheduling_latency_bounds.size() + 1);
  auto [a, ra] = f.submit("f");
  auto [b, rb] = f.submit("f");
  c = f.tasks.counts();
  CHECK(c.submitted == 2);
  CHECK(c.waiting == 2);
  CHECK(c.running == 0);
  f.now += std::chrono::milliseconds(3);  // 3 ms waiting for the lease: the 0.005 s bucket
  (void)f.grant();
  CHECK(f.pushed().size() == 1);  // one at a time on the worker (f may block)
  c = f.tasks.counts();
  CHECK(c.waiting == 1);
  CHECK(c.running == 1);
  CHECK(c.latency[3] == 1);
  CHECK(c.latency_sum_us == 3000);
  auto ok = testing::core_pieces::result(a, "1");
  f.now += std::chrono::milliseconds(7);  // b is sent when a's result frees the worker: 10 ms
  CHECK(f.tasks.on_result(ok));
  REQUIRE(f.pushed().size() == 1);
  auto bad = testing::core_pieces::failed(b, detail::failure_kind::task_error, "boom");
  bad.raised = true;
  CHECK(f.tasks.on_result(bad));
  c = f.tasks.counts();
  CHECK(c.submitted == 2);
  CHECK(c.finished == 1);
  CHECK(c.failed == 1);  // it threw, with no retries
  CHECK(c.waiting == 0);
  CHECK(c.running == 0);
  CHECK(c.latency[3] == 1);  // 3 ms: at most 0.005 s
  CHECK(c.latency[4] == 1);  // 10 ms: at most 0.01 s
  CHECK(c.latency_sum_us == 13000);
  std::uint64_t all = 0;
  for (auto n : c.latency) all += n;
  CHECK(all == 2);

  // Each task's changes of state, in order, handed over once.
  c = f.tasks.counts(true);
  using st = protocol::task_state;
  std::vector<std::pair<task_id, st>> seen;
  for (const auto& e : c.changes) seen.emplace_back(e.task, e.state);
  CHECK(seen == std::vector<std::pair<task_id, st>>{{a, st::waiting}, {b, st::waiting}, {a, st::running},
                                                    {a, st::finished}, {b, st::running}, {b, st::failed}});
  CHECK(c.changes[0].function == "f");   // named when submitted
  CHECK(c.changes[2].function.empty());  // not again
  CHECK_FALSE(c.changes[2].detail.empty());  // the node it went to
  CHECK_THAT(c.changes[5].detail, Catch::Matchers::Contains("boom"));
  CHECK(c.changes[0].at_ms > 0);
  CHECK(c.changes_dropped == 0);
  CHECK(f.tasks.counts(true).changes.empty());
}


TEST_CASE("a queued task's record is small, and tasks of one function and options share one "
          "descriptor that makes their specs whole again",
          "[core][task_submitter][queued]") {
  // A driver may queue a million tasks (docs/benchmarks.md, "Queued tasks"): each keeps an
  // entry of at most 96 bytes here, not a task_spec (536 bytes and its heap).
  STATIC_REQUIRE(sizeof(task_submitter::task_entry) <= 96);
  STATIC_REQUIRE(sizeof(protocol::task_spec) > 4 * sizeof(task_submitter::task_entry));
  submitter_fixture f;
  std::vector<task_id> ids;
  std::vector<object_ref<void>> refs;
  for (int i = 0; i < 1000; ++i) {
    auto [id, ref] = f.submit("f");
    ids.push_back(id);
    refs.push_back(std::move(ref));
  }
  CHECK(f.tasks.queued() == 1000);
  CHECK(f.tasks.descriptors() == 1);
  auto [g_id, g_ref] = f.submit("g");
  CHECK(f.tasks.descriptors() == 2);
  f.retry.retry_exceptions = true;  // another option: another descriptor
  auto [f2_id, f2_ref] = f.submit("f");
  CHECK(f.tasks.descriptors() == 3);

  // Sent whole: the descriptor's fields with each task's own id and attempt.
  f.grant();
  const auto sent = f.pushed();
  REQUIRE(sent.size() == 1);
  const auto& spec = sent[0].second.spec;
  CHECK(spec.id == ids[0]);
  CHECK(spec.function == "f");
  CHECK(spec.owner == f.self);
  CHECK(spec.job == f.job);
  CHECK(spec.attempt == 1);
  CHECK(spec.resources == *protocol::make_request(1, 0, 0, {}));
}
