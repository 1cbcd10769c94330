// A worker's inbox: messages in order, the worker woken only when idle, and the plain tasks
// queued behind a call that blocks in get given back (never both given back and run).
#include "worker/task_inbox.hpp"

#include <catch2/catch.hpp>

using namespace celer;

namespace {

protocol::message plain(const task_id& id) {
  protocol::task_spec s;
  s.id = id;
  s.kind = protocol::task_kind::normal;
  s.function = "f";
  return protocol::execute_task{std::move(s)};
}

protocol::message actor_call(const task_id& id) {
  protocol::task_spec s;
  s.id = id;
  s.kind = protocol::task_kind::actor_call;
  s.function = "m";
  return protocol::execute_task{std::move(s)};
}

task_id id_of(const protocol::message& m) { return std::get<protocol::execute_task>(m).spec.id; }

} // namespace

TEST_CASE("the inbox wakes an idle worker once and hands it every message in order",
          "[worker][inbox]") {
  task_inbox inbox;
  const auto a = task_id::random(), b = task_id::random(), c = task_id::random();
  auto ma = plain(a), mb = plain(b), mc = plain(c);
  CHECK(inbox.deliver(ma) == task_inbox::after::wake);
  CHECK(inbox.deliver(mb) == task_inbox::after::nothing);  // a wake is on its way
  auto first = inbox.next();
  REQUIRE(first);
  CHECK(id_of(*first) == a);
  CHECK(inbox.deliver(mc) == task_inbox::after::nothing);  // still draining
  CHECK(id_of(*inbox.next()) == b);
  CHECK(id_of(*inbox.next()) == c);
  CHECK_FALSE(inbox.next());  // idle now
  auto md = plain(task_id::random());
  CHECK(inbox.deliver(md) == task_inbox::after::wake);
}

TEST_CASE("a call that blocks takes out the plain tasks queued behind it, and gives back "
          "those that arrive until it resumes",
          "[worker][inbox]") {
  task_inbox inbox;
  const auto running = task_id::random(), b = task_id::random(), call = task_id::random(),
             c = task_id::random(), late = task_id::random(), after = task_id::random();
  for (auto m : {plain(running), plain(b), actor_call(call), plain(c)}) (void)inbox.deliver(m);
  REQUIRE(id_of(*inbox.next()) == running);  // the call that will block

  auto back = inbox.block();
  REQUIRE(back.size() == 2);
  CHECK(back[0].id == b);
  CHECK(back[1].id == c);
  CHECK(inbox.queued() == 1);  // an actor's call stays: it must run here, in order

  auto ml = plain(late);
  CHECK(inbox.deliver(ml) == task_inbox::after::give_back);
  CHECK(id_of(ml) == late);  // left whole, for the caller to return
  auto mcall = actor_call(task_id::random());
  CHECK(inbox.deliver(mcall) == task_inbox::after::nothing);

  inbox.unblock();
  auto ma = plain(after);
  CHECK(inbox.deliver(ma) == task_inbox::after::nothing);
  CHECK(id_of(*inbox.next()) == call);
  inbox.next();
  CHECK(id_of(*inbox.next()) == after);
  CHECK_FALSE(inbox.next());
}

TEST_CASE("calls blocked on several threads give back until the last resumes", "[worker][inbox]") {
  task_inbox inbox;
  (void)inbox.block();
  (void)inbox.block();
  inbox.unblock();
  auto m = plain(task_id::random());
  CHECK(inbox.deliver(m) == task_inbox::after::give_back);
  inbox.unblock();
  CHECK(inbox.deliver(m) == task_inbox::after::wake);
}

TEST_CASE("an owner withdraws only the tasks still queued; a started one stays started",
          "[worker][inbox]") {
  task_inbox inbox;
  const auto a = task_id::random(), b = task_id::random(), c = task_id::random();
  for (auto m : {plain(a), plain(b), plain(c)}) (void)inbox.deliver(m);
  REQUIRE(id_of(*inbox.next()) == a);  // a started
  auto back = inbox.withdraw({a, c, task_id::random()});
  REQUIRE(back.size() == 1);
  CHECK(back[0].id == c);
  CHECK(id_of(*inbox.next()) == b);
  CHECK_FALSE(inbox.next());
  CHECK(inbox.withdraw({b}).empty());  // b started too: never both given back and run
}
