// celer::cancel's pieces on their own: the task submitter (a task taken out of its queue,
// one pushed to a worker, force that kills a worker only after what was queued behind the
// cancelled task came back), the worker's inbox and running calls, and the children table.
#include "core/task_children.hpp"
#include "unit/runtime/submitter_fixture.hpp"
#include "worker/running_calls.hpp"
#include "worker/task_inbox.hpp"

#include <catch2/catch.hpp>

using namespace celer;
using celer::testing::scoped_depth;
using celer::testing::submitter_fixture;

namespace {

protocol::failure_info cancelled_by(const std::string& who) {
  return protocol::failure_info::make(detail::failure_kind::cancelled, error_code::cancelled,
                                      "was cancelled by " + who);
}

} // namespace

TEST_CASE("cancel takes a task that waits for a lease out: its result fails as cancelled and "
          "its lease request is withdrawn", "[core][task_submitter][cancel]") {
  submitter_fixture f;
  auto [id, ref] = f.submit("f");
  REQUIRE(f.tasks.lease_requests() == 1);
  const auto found = f.tasks.cancel(id, false, cancelled_by("the test"));
  CHECK(found.found == task_submitter::cancelled::state::queued);
  const auto v = f.value_of(ref);
  CHECK_FALSE(v.ok);
  CHECK(v.fail.kind == detail::failure_kind::cancelled);
  CHECK(v.fail.code == error_code::cancelled);
  CHECK(v.fail.message == "task f was cancelled by the test");
  CHECK(f.tasks.queued() == 0);
  CHECK(f.tasks.lease_requests() == 0);
  CHECK(f.net.take<protocol::cancel_lease_requests>().size() == 1);
  // A second cancel finds nothing.
  CHECK(f.tasks.cancel(id, false, cancelled_by("the test")).found ==
        task_submitter::cancelled::state::unknown);
}

TEST_CASE("a task cancelled on its worker fails now; what the worker sends back is dropped, "
          "and its worker's death never runs it again", "[core][task_submitter][cancel]") {
  submitter_fixture f;
  f.retry.max_retries = 3;
  auto [id, ref] = f.submit("f");
  const worker_id w = f.grant();
  REQUIRE(f.pushed().size() == 1);
  const auto found = f.tasks.cancel(id, false, cancelled_by("the test"));
  CHECK(found.found == task_submitter::cancelled::state::pushed);
  CHECK(found.worker.id == w);
  CHECK_FALSE(found.kill);
  CHECK(f.value_of(ref).fail.kind == detail::failure_kind::cancelled);

  SECTION("its late result is dropped and the worker takes the next task") {
    auto late = testing::core_pieces::result(id, "99");
    CHECK(f.tasks.on_result(late));
    CHECK(f.value_of(ref).fail.kind == detail::failure_kind::cancelled);
    CHECK(f.tasks.running() == 0);
    auto [next, next_ref] = f.submit("f");
    CHECK(f.pushed().size() == 1);  // on the same lease, with no new request
    CHECK(f.tasks.leases() == 1);
  }
  SECTION("its worker dies: nothing runs again") {
    f.tasks.on_worker_died(protocol::worker_died{w, "killed"});
    CHECK(f.tasks.queued() == 0);
    CHECK(f.tasks.retries() == 0);
    CHECK(f.net.take<protocol::request_lease>().empty());
    CHECK(f.value_of(ref).fail.kind == detail::failure_kind::cancelled);
  }
}

TEST_CASE("force on a task running alone on its worker drops the lease and has the node kill "
          "the worker", "[core][task_submitter][cancel]") {
  submitter_fixture f;
  auto [id, ref] = f.submit("f");
  const worker_id w = f.grant();
  f.pushed();
  const auto found = f.tasks.cancel(id, true, cancelled_by("the test"));
  CHECK(found.found == task_submitter::cancelled::state::pushed);
  REQUIRE(found.kill);
  CHECK(found.kill->worker == w);
  CHECK(found.kill->kill);
  CHECK(found.node == f.node);
  CHECK(f.tasks.leases() == 0);
  CHECK(f.tasks.running() == 0);
  // The node's word that it died changes nothing.
  f.tasks.on_worker_died(protocol::worker_died{w, "was killed"});
  CHECK(f.value_of(ref).fail.kind == detail::failure_kind::cancelled);
  CHECK(f.net.take<protocol::request_lease>().empty());
}

TEST_CASE("force takes back the tasks queued behind the cancelled one before the worker is "
          "killed, and they run elsewhere unharmed", "[core][task_submitter][cancel]") {
  const scoped_depth depth(4);
  submitter_fixture f;
  const worker_id w = f.warm("f");
  auto [a, ra] = f.submit("f");
  auto [b, rb] = f.submit("f");
  auto [c, rc] = f.submit("f");
  auto sent = f.pushed();
  REQUIRE(sent.size() == 3);
  const auto found = f.tasks.cancel(a, true, cancelled_by("the test"));
  CHECK_FALSE(found.kill);  // not yet: b and c come back first
  auto asked = f.net.take<protocol::withdraw_tasks>();
  REQUIRE(asked.size() == 1);
  CHECK(asked[0].second.tasks == std::vector<task_id>{b, c});

  SECTION("they came back: the worker is killed and they ask for another lease") {
    protocol::tasks_returned back;
    back.worker = w;
    back.tasks = {sent[1].second.spec, sent[2].second.spec};
    f.tasks.on_returned(back);
    const auto killed = f.net.take<protocol::return_lease>();
    REQUIRE(killed.size() == 1);
    CHECK(killed[0].second.worker == w);
    CHECK(killed[0].second.kill);
    CHECK(f.tasks.leases() == 0);
    CHECK(f.tasks.queued() == 2);
    CHECK(f.tasks.retries() == 0);  // not failures of theirs
    const worker_id other = f.grant();
    CHECK(other != w);
    CHECK(f.pushed().size() == 2);
    auto rb_result = testing::core_pieces::result(b, "2");
    CHECK(f.tasks.on_result(rb_result));
    CHECK(f.value_of(rb).ok);
  }
  SECTION("the cancelled one finished and the next started first: nothing is killed") {
    auto done = testing::core_pieces::result(a, "1");
    CHECK(f.tasks.on_result(done));
    protocol::tasks_returned back;
    back.worker = w;
    back.tasks = {sent[2].second.spec};  // b started
    f.tasks.on_returned(back);
    CHECK(f.net.take<protocol::return_lease>().empty());
    CHECK(f.tasks.leases() == 1);
    CHECK(f.value_of(ra).fail.kind == detail::failure_kind::cancelled);
  }
}

TEST_CASE("force on a task queued behind another on its worker only takes it out",
          "[core][task_submitter][cancel]") {
  const scoped_depth depth(4);
  submitter_fixture f;
  f.warm("f");
  auto [a, ra] = f.submit("f");
  auto [b, rb] = f.submit("f");
  REQUIRE(f.pushed().size() == 2);
  const auto found = f.tasks.cancel(b, true, cancelled_by("the test"));
  CHECK(found.found == task_submitter::cancelled::state::pushed);
  CHECK_FALSE(found.kill);
  CHECK(f.net.take<protocol::withdraw_tasks>().empty());
  CHECK(f.tasks.leases() == 1);
}

TEST_CASE("a worker's inbox gives up a queued task or actor call to a cancel, never an actor's "
          "creation", "[worker][cancel]") {
  task_inbox inbox;
  const auto exec = [](task_id id, protocol::task_kind kind) {
    protocol::execute_task e;
    e.spec.id = id;
    e.spec.kind = kind;
    return protocol::message(std::move(e));
  };
  const task_id t1 = task_id::random(), t2 = task_id::random(), t3 = task_id::random();
  auto m1 = exec(t1, protocol::task_kind::normal);
  auto m2 = exec(t2, protocol::task_kind::actor_call);
  auto m3 = exec(t3, protocol::task_kind::actor_creation);
  inbox.deliver(m1);
  inbox.deliver(m2);
  inbox.deliver(m3);
  CHECK(inbox.take(t2)->id == t2);
  CHECK_FALSE(inbox.take(t2));
  CHECK_FALSE(inbox.take(t3));
  CHECK(inbox.take(t1)->id == t1);
  CHECK(inbox.queued() == 1);
}

TEST_CASE("running calls: a cancel sets a running call's flag, and one that came first flags "
          "the call when it starts", "[worker][cancel]") {
  running_calls calls;
  const task_id a = task_id::random(), b = task_id::random();
  auto* sa = calls.start(a);
  CHECK_FALSE(sa->cancelled.load());
  CHECK(calls.cancel(a));
  CHECK(sa->cancelled.load());
  CHECK_FALSE(calls.cancel(b));  // not started: remembered
  auto* sb = calls.start(b);
  CHECK(sb->cancelled.load());
  CHECK(calls.running() == 2);
  calls.finish(sa);
  calls.finish(sb);
  CHECK(calls.running() == 0);
  // A slot is reused clean.
  auto* again = calls.start(a);
  CHECK_FALSE(again->cancelled.load());
  calls.finish(again);
  // Cancels of calls that never come are remembered within a bound.
  for (std::size_t i = 0; i < running_calls::remembered + 10; ++i) {
    CHECK_FALSE(calls.cancel(task_id::random()));
  }
  auto* fresh = calls.start(task_id::random());
  CHECK_FALSE(fresh->cancelled.load());
  calls.finish(fresh);
}

TEST_CASE("task children: what a call submitted is taken once, and forgotten when it ends",
          "[core][cancel]") {
  task_children children;
  const task_id p = task_id::random(), q = task_id::random();
  const object_id c1 = object_id::random(), c2 = object_id::random();
  children.add(p, c1);
  children.add(p, c2);
  children.add(q, c1);
  CHECK(children.parents() == 2);
  CHECK(children.take(p) == std::vector<object_id>{c1, c2});
  CHECK(children.take(p).empty());
  children.forget(q);
  CHECK(children.parents() == 0);
}
