// A core's actor calls, driven message by message: the test plays the head (creation,
// actor updates) and the actor's worker.
#include "core/actor_submitter.hpp"
#include "unit/runtime/core_pieces.hpp"

#include <catch2/catch.hpp>

using namespace celer;

namespace {

struct actor_fixture : testing::core_pieces {
  actor_submitter actors{net, objects, requests, {self, head}};
  actor_id actor = actor_id::random();
  address worker{unique_id::random(), {}};

  std::pair<task_id, object_ref<void>> call(const std::string& method,
                                            std::vector<detail::arg_spec> args = {}) {
    protocol::task_spec spec;
    spec.id = ids.next();
    spec.kind = protocol::task_kind::actor_call;
    spec.function = method;
    spec.owner = self;
    spec.actor = actor;
    const task_id id = spec.id;
    auto ref = objects.submit(spec, std::move(args));
    actors.call(std::move(spec));
    return {id, std::move(ref)};
  }
  void update(protocol::actor_state state, std::string why = {}) {
    protocol::actor_update u;
    u.actor = actor;
    u.state = state;
    u.worker = worker;
    u.fail = protocol::failure_info::make(detail::failure_kind::actor_died, error_code::unavailable,
                                          std::move(why));
    actors.on_update(u);
  }
};

} // namespace

TEST_CASE("calls made before the actor is placed wait, then leave in order when it is alive",
          "[core][actor_submitter]") {
  actor_fixture f;
  auto [a, ra] = f.call("m");
  auto [b, rb] = f.call("m");
  // The first call subscribes to the actor's news.
  const auto subscribed = f.net.take<protocol::subscribe_actor>();
  REQUIRE(subscribed.size() == 1);
  CHECK(subscribed[0].first == f.head);
  CHECK(subscribed[0].second.actor == f.actor);
  CHECK(f.net.take<protocol::execute_task>().empty());
  CHECK_FALSE(f.actors.placed(f.actor));

  f.update(protocol::actor_state::alive);
  CHECK(f.actors.placed(f.actor));
  auto sent = f.net.take<protocol::execute_task>();
  REQUIRE(sent.size() == 2);
  CHECK(sent[0].first == f.worker);
  CHECK(sent[0].second.spec.id == a);
  CHECK(sent[1].second.spec.id == b);
  CHECK(f.actors.in_flight() == 2);

  auto r = testing::core_pieces::result(b, "2");
  CHECK(f.actors.on_result(r));
  CHECK(f.value_of(rb).payload == "2");
  CHECK(f.actors.in_flight() == 1);
}

TEST_CASE("a result that is no call of this submitter is left to others",
          "[core][actor_submitter]") {
  actor_fixture f;
  auto r = testing::core_pieces::result(f.ids.next(), "1");
  CHECK_FALSE(f.actors.on_result(r));  // none in flight: not even looked up
  f.update(protocol::actor_state::alive);
  f.call("m");
  CHECK_FALSE(f.actors.on_result(r));
}

TEST_CASE("an actor's death fails its waiting and unanswered calls with the head's reason",
          "[core][actor_submitter]") {
  actor_fixture f;
  f.update(protocol::actor_state::alive);
  auto [a, ra] = f.call("m");
  f.update(protocol::actor_state::dead, "its node died");
  const auto v = f.value_of(ra);
  CHECK_FALSE(v.ok);
  CHECK(v.fail.kind == detail::failure_kind::actor_died);
  CHECK(v.fail.message == "its node died");
  CHECK(f.actors.in_flight() == 0);
  // Later calls fail at once; a late alive changes nothing.
  f.update(protocol::actor_state::alive);
  auto [b, rb] = f.call("m");
  CHECK_FALSE(f.value_of(rb).ok);
  CHECK(f.net.take<protocol::execute_task>().size() == 1);  // only the first call was sent
}

TEST_CASE("a killed actor's calls fail and the head is told", "[core][actor_submitter]") {
  actor_fixture f;
  auto [a, ra] = f.call("m");
  f.actors.kill(f.actor);
  const auto v = f.value_of(ra);
  CHECK_FALSE(v.ok);
  CHECK(v.fail.message == "actor " + f.actor.hex() + " was killed by celer::kill");
  const auto killed = f.net.take<protocol::kill_actor>();
  REQUIRE(killed.size() == 1);
  CHECK(killed[0].first == f.head);
}

TEST_CASE("a call whose worker is gone waits for the head's word, and fails with its reason",
          "[core][actor_submitter]") {
  actor_fixture f;
  f.update(protocol::actor_state::alive);
  f.net.unreachable.push_back(f.worker);
  auto [a, ra] = f.call("m");
  auto [b, rb] = f.call("m");
  // Neither fails with a guess: the head says what became of the actor.
  CHECK_FALSE(f.objects.ready(ra.id()));
  CHECK(f.actors.in_flight() == 0);
  // An alive that still names the gone worker was sent before the head heard.
  f.update(protocol::actor_state::alive);
  CHECK_FALSE(f.objects.ready(rb.id()));
  f.update(protocol::actor_state::dead, "actor preempted by task t (priority 4)");
  for (const auto* r : {&ra, &rb}) {
    const auto v = f.value_of(*r);
    CHECK_FALSE(v.ok);
    CHECK(v.fail.message == "actor preempted by task t (priority 4)");
  }
  CHECK(f.net.take<protocol::execute_task>().empty());
}

TEST_CASE("a call that never reached a gone worker goes to the restarted actor, in order",
          "[core][actor_submitter]") {
  actor_fixture f;  // max_task_retries 0: at most once, and these were never delivered
  f.update(protocol::actor_state::alive);
  f.net.unreachable.push_back(f.worker);
  auto [a, ra] = f.call("m");
  auto [b, rb] = f.call("m");
  f.update(protocol::actor_state::restarting, "its worker died");
  f.net.unreachable.clear();
  f.worker = address{unique_id::random(), {}};
  f.update(protocol::actor_state::alive);
  const auto sent = f.net.take<protocol::execute_task>();
  REQUIRE(sent.size() == 2);
  CHECK(sent[0].first == f.worker);
  CHECK(sent[0].second.spec.id == a);
  CHECK(sent[1].second.spec.id == b);
  CHECK(f.actors.in_flight() == 2);
}

TEST_CASE("create asks the head through the request table and throws its refusal",
          "[core][actor_submitter]") {
  actor_fixture f;
  bool refuse = false;
  f.net.answer = [&](const address& to, const protocol::message& m) {
    if (const auto* c = std::get_if<protocol::create_actor>(&m); c != nullptr && to == f.head) {
      protocol::create_actor_reply r;
      r.request_id = c->request_id;
      r.ok = !refuse;
      if (refuse) {
        r.fail = protocol::failure_info::make(detail::failure_kind::infeasible,
                                              error_code::resource_exhausted, "no node fits");
      }
      protocol::message reply = r;
      CHECK(f.requests.complete(reply));
    }
  };
  protocol::create_actor msg;
  msg.spec.actor = f.actor;
  msg.spec.kind = protocol::task_kind::actor_creation;
  CHECK(f.actors.create(msg) == f.actor);
  refuse = true;
  msg.spec.actor = actor_id::random();
  CHECK_THROWS(f.actors.create(msg));
  CHECK(f.requests.pending() == 0);
}
