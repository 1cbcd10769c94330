// The task submitter's pipelining, message by message: which functions queue tasks behind a
// running one, what a worker that blocks gives back and where that runs, and how an idle
// lease takes work back from a busy one.
#include "unit/runtime/submitter_fixture.hpp"

#include <catch2/catch.hpp>

using namespace celer;
using celer::testing::scoped_depth;
using celer::testing::submitter_fixture;

TEST_CASE("a function not known to be short runs one task per worker; once one came back "
          "quickly, its tasks queue behind the running one (pipelining)",
          "[core][task_submitter][pipelining]") {
  submitter_fixture f;
  auto [x, rx] = f.submit("f");
  auto [y, ry] = f.submit("f");
  const worker_id first = f.grant();
  REQUIRE(f.pushed().size() == 1);  // y waits: f might be long
  CHECK(f.tasks.queued() == 1);
  f.now += std::chrono::milliseconds(50);  // x took 50 ms: not short
  auto rxv = testing::core_pieces::result(x, "x");
  REQUIRE(f.tasks.on_result(rxv));
  REQUIRE(f.pushed().size() == 1);  // y, alone on the freed worker
  auto ryv = testing::core_pieces::result(y, "y");
  REQUIRE(f.tasks.on_result(ryv));  // y came back at once, alone: f is short
  (void)first;

  auto [a, ra] = f.submit("f");
  auto [b, rb] = f.submit("f");
  const worker_id w = first;
  auto sent = f.pushed();
  REQUIRE(sent.size() == 2);
  CHECK(sent[0].first.id == w);
  CHECK(sent[1].first.id == w);
  CHECK(sent[0].second.spec.id == a);
  CHECK(sent[1].second.spec.id == b);
  CHECK(f.tasks.running() == 2);
}

TEST_CASE("tasks a worker gives back because its call blocked run on another lease, and the "
          "blocking function is not queued behind again",
          "[core][task_submitter][pipelining]") {
  submitter_fixture f;
  const worker_id w = f.warm("f");
  auto [a, ra] = f.submit("f");
  auto [b, rb] = f.submit("f");
  REQUIRE(f.pushed().size() == 2);  // both on w

  // a blocked in get on w: b comes back whole, not run.
  protocol::tasks_returned back;
  back.worker = w;
  back.blocked_function = "f";
  auto bspec = f.task("f");
  bspec.id = b;
  back.tasks.push_back(bspec);
  f.tasks.on_returned(back);
  CHECK(f.tasks.running() == 1);
  CHECK(f.tasks.queued() == 1);
  CHECK(f.pushed().empty());  // nothing more goes behind the blocked call
  CHECK(f.tasks.lease_requests() == 1);

  const worker_id w2 = f.grant();
  auto sent = f.pushed();
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].first.id == w2);
  CHECK(sent[0].second.spec.id == b);
  CHECK(sent[0].second.spec.attempt == 1);  // not counted as a retry: it never ran
  auto rbv = testing::core_pieces::result(b, "2");
  REQUIRE(f.tasks.on_result(rbv));
  CHECK(f.value_of(rb).payload == "2");

  // f is known to block now: a new task of f waits rather than queue behind a running one.
  auto [c, rc] = f.submit("f");
  sent = f.pushed();
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].first.id == w2);  // the idle lease
  auto [d, rd] = f.submit("f");
  CHECK(f.pushed().empty());
  CHECK(f.tasks.queued() == 1);
  auto rav = testing::core_pieces::result(a, "1");
  REQUIRE(f.tasks.on_result(rav));
  CHECK(f.value_of(ra).payload == "1");
  sent = f.pushed();
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].first.id == w);
  CHECK(sent[0].second.spec.id == d);
  (void)c;
  (void)rc;
  (void)rd;
}

TEST_CASE("a worker whose call waits for its own arguments takes nothing more until that call "
          "finishes: what it gives back runs on another lease, and its function still pipelines",
          "[core][task_submitter][pipelining]") {
  submitter_fixture f;
  const worker_id w = f.warm("f");
  auto [a, ra] = f.submit("f");
  auto [b, rb] = f.submit("f");
  REQUIRE(f.pushed().size() == 2);  // both on w

  // a waits for its argument on w (no function named): b comes back.
  protocol::tasks_returned back;
  back.worker = w;
  back.blocked = true;
  auto bspec = f.task("f");
  bspec.id = b;
  back.tasks.push_back(bspec);
  f.tasks.on_returned(back);
  CHECK(f.pushed().empty());  // not sent back to w, where it would come back again
  CHECK(f.tasks.queued() == 1);
  CHECK(f.tasks.lease_requests() == 1);
  auto [c, rc] = f.submit("f");
  CHECK(f.pushed().empty());  // nor is new work of that class
  CHECK(f.tasks.queued() == 2);

  const worker_id w2 = f.grant();
  auto sent = f.pushed();
  REQUIRE(sent.size() == 2);  // b, then c behind it: f still pipelines
  CHECK(sent[0].first.id == w2);
  CHECK(sent[0].second.spec.id == b);
  CHECK(sent[1].first.id == w2);
  CHECK(sent[1].second.spec.id == c);

  // a finishes: w takes work again.
  auto rav = testing::core_pieces::result(a, "1");
  REQUIRE(f.tasks.on_result(rav));
  auto [d, rd] = f.submit("f");
  sent = f.pushed();
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].first.id == w);
  CHECK(sent[0].second.spec.id == d);
  (void)rb;
  (void)rc;
  (void)rd;
}

TEST_CASE("a given-back task that no longer runs on that worker at that attempt is ignored",
          "[core][task_submitter][pipelining]") {
  submitter_fixture f;
  auto [a, ra] = f.submit("f");
  const worker_id w = f.grant();
  REQUIRE(f.pushed().size() == 1);
  protocol::tasks_returned back;
  back.worker = worker_id::random();  // another worker
  auto spec = f.task("f");
  spec.id = a;
  back.tasks.push_back(spec);
  f.tasks.on_returned(back);
  CHECK(f.tasks.running() == 1);
  back.worker = w;
  back.tasks[0].attempt = 2;  // another attempt
  f.tasks.on_returned(back);
  CHECK(f.tasks.running() == 1);
  CHECK(f.tasks.queued() == 0);
  auto r = testing::core_pieces::result(a, "1");
  REQUIRE(f.tasks.on_result(r));
  CHECK(f.value_of(ra).payload == "1");
}

TEST_CASE("an idle lease takes back the later half of another lease's queue through a withdrawal",
          "[core][task_submitter][pipelining]") {
  const scoped_depth three(3);
  submitter_fixture f;
  const worker_id w1 = f.warm("f");
  std::vector<std::pair<task_id, object_ref<void>>> t;
  for (int i = 0; i < 8; ++i) t.push_back(f.submit("f"));
  REQUIRE(f.pushed().size() == 3);  // t0 t1 t2 on w1
  const worker_id w2 = f.grant();
  REQUIRE(f.pushed().size() == 3);  // t3 t4 t5
  CHECK(f.tasks.queued() == 2);
  // w2 runs through its own and what still waited (t6, t7) while w1 is on t0.
  for (int i = 3; i < 8; ++i) {
    auto done = testing::core_pieces::result(t[i].first, std::to_string(i));
    REQUIRE(f.tasks.on_result(done));
    CHECK(f.value_of(t[i].second).payload == std::to_string(i));
  }
  CHECK(f.tasks.queued() == 0);
  // w2 is idle, nothing waits, w1 holds three: it is asked for the later one back.
  auto asked = f.net.take<protocol::withdraw_tasks>();
  REQUIRE(asked.size() == 1);
  CHECK(asked[0].first.id == w1);
  CHECK(asked[0].second.owner == f.self);
  REQUIRE(asked[0].second.tasks.size() == 1);
  CHECK(asked[0].second.tasks[0] == t[2].first);
  (void)f.pushed();

  // t2 had not started: it comes back and goes to w2.
  protocol::tasks_returned back;
  back.worker = w1;
  auto spec = f.task("f");
  spec.id = t[2].first;
  back.tasks.push_back(spec);
  f.tasks.on_returned(back);
  auto sent = f.pushed();
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].first.id == w2);
  CHECK(sent[0].second.spec.id == t[2].first);
  for (int i = 0; i < 3; ++i) {
    auto done = testing::core_pieces::result(t[i].first, std::to_string(i));
    REQUIRE(f.tasks.on_result(done));
    CHECK(f.value_of(t[i].second).payload == std::to_string(i));
  }
  CHECK(f.tasks.running() == 0);
}
