// What a core asks the head, driven message by message: the test plays the head, answering
// each query as it is sent, and moves the clock by hand.
#include "config/knobs.hpp"
#include "core/head_client.hpp"
#include "core/request_table.hpp"
#include "fakes/recording_transport.hpp"

#include <catch2/catch.hpp>

#include <chrono>

using namespace celer;

namespace {

struct head_fixture {
  fakes::recording_transport net;
  address self{unique_id::random(), {}};
  address head{unique_id::random(), {}};
  /// The clock, and how far it moves each time it is read (zero: it stands still).
  std::chrono::steady_clock::time_point now{std::chrono::hours(1)};
  std::chrono::steady_clock::duration step{};
  request_table requests{net, self, [this] { return now += step; }};
  head_client client{net, requests, head};

  /// Plays the head: answers each `Query` sent to it with what `make` returns for it.
  template <class Query, class Make>
  void answer(Make make) {
    net.answer = [this, make](const address& to, const protocol::message& m) {
      const auto* q = std::get_if<Query>(&m);
      if (q == nullptr || !(to == head)) return;
      auto reply = make(*q);
      reply.request_id = q->request_id;
      protocol::message r = std::move(reply);
      CHECK(requests.complete(r));
    };
  }
  static protocol::placement_group_info group(const placement_group_id& id,
                                              protocol::group_state state) {
    protocol::placement_group_info g;
    g.id = id;
    g.state = state;
    g.why = "removed by its job";
    return g;
  }
};

} // namespace

TEST_CASE("the head client asks the head for the cluster's status and returns its answer",
          "[core][head_client]") {
  head_fixture f;
  f.answer<protocol::status_query>([](const protocol::status_query&) {
    protocol::status_reply r;
    r.actors_alive = 3;
    r.actors_pending = 1;
    return r;
  });
  const auto st = f.client.query_status();
  CHECK(st.actors_alive == 3);
  CHECK(st.actors_pending == 1);
  const auto sent = f.net.take<protocol::status_query>();
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].first == f.head);
  CHECK(sent[0].second.reply_to == f.self);
  CHECK(f.requests.pending() == 0);
}

TEST_CASE("a query the head does not answer in time fails as deadline_exceeded",
          "[core][head_client]") {
  head_fixture f;
  f.step = std::chrono::milliseconds(knobs().request_timeout_ms);  // the wait is over at once
  try {
    (void)f.client.query_status();
    FAIL("answered");
  } catch (const exception& e) {
    CHECK(e.code() == error_code::deadline_exceeded);
  }
  CHECK(f.requests.pending() == 0);
}

TEST_CASE("a query to an unreachable head fails as unavailable", "[core][head_client]") {
  head_fixture f;
  f.net.unreachable.push_back(f.head);
  try {
    (void)f.client.query_placement_groups({});
    FAIL("answered");
  } catch (const exception& e) {
    CHECK(e.code() == error_code::unavailable);
  }
  CHECK_THROWS_AS(f.client.remove_placement_group(placement_group_id::random()), exception);
}

TEST_CASE("a query on its way when the core stops fails with the stop's reason",
          "[core][head_client]") {
  head_fixture f;
  f.net.answer = [&](const address&, const protocol::message&) {
    f.requests.stop("celer::shutdown was called");
  };
  try {
    (void)f.client.find_named_actor("ps", "parameter_server");
    FAIL("answered");
  } catch (const exception& e) {
    CHECK(e.code() == error_code::cancelled);
    CHECK_THAT(e.what(), Catch::Contains("celer::shutdown was called"));
  }
}

TEST_CASE("a named actor is found by name and checked for its type", "[core][head_client]") {
  head_fixture f;
  const actor_id ps = actor_id::random();
  f.answer<protocol::lookup_actor>([&](const protocol::lookup_actor& q) {
    protocol::lookup_actor_reply r;
    r.found = q.name == "ps";
    r.actor = ps;
    r.class_type = "parameter_server";
    return r;
  });
  CHECK(f.client.find_named_actor("ps", "parameter_server") == ps);
  try {
    (void)f.client.find_named_actor("ps", "trainer");
    FAIL("found");
  } catch (const exception& e) {
    CHECK(e.code() == error_code::invalid_argument);
  }
  try {
    (void)f.client.find_named_actor("nobody", "parameter_server");
    FAIL("found");
  } catch (const exception& e) {
    CHECK(e.code() == error_code::not_found);
    CHECK_THAT(e.what(), Catch::Contains("'nobody'"));
  }
}

TEST_CASE("a placement group the head refuses throws the head's reason", "[core][head_client]") {
  head_fixture f;
  f.answer<protocol::create_placement_group>([](const protocol::create_placement_group& m) {
    protocol::placement_group_reply r;
    r.ok = m.name != "huge";
    r.fail.code = error_code::resource_exhausted;
    r.fail.message = "no node has 512 CPUs";
    return r;
  });
  protocol::create_placement_group m;
  m.id = placement_group_id::random();
  CHECK_NOTHROW(f.client.create_placement_group(m));
  m.name = "huge";
  try {
    f.client.create_placement_group(m);
    FAIL("created");
  } catch (const exception& e) {
    CHECK(e.code() == error_code::resource_exhausted);
    CHECK(std::string(e.what()) == "no node has 512 CPUs");
  }
  const auto sent = f.net.take<protocol::create_placement_group>();
  REQUIRE(sent.size() == 2);
  CHECK(sent[0].second.id == m.id);
}

TEST_CASE("placement_group_ready says whether the group is created by the deadline",
          "[core][head_client]") {
  head_fixture f;
  const auto id = placement_group_id::random();
  auto state = protocol::group_state::created;
  bool known = true;
  f.answer<protocol::placement_group_query>([&](const protocol::placement_group_query& q) {
    CHECK(q.id == id);
    protocol::placement_group_list r;
    if (known) r.groups.push_back(head_fixture::group(id, state));
    return r;
  });
  CHECK(f.client.placement_group_ready(id, std::chrono::milliseconds(100)));

  // Still pending when the clock has passed the deadline: false, after one question.
  state = protocol::group_state::pending;
  f.step = std::chrono::milliseconds(100);
  CHECK_FALSE(f.client.placement_group_ready(id, std::chrono::milliseconds(100)));

  state = protocol::group_state::removed;
  try {
    (void)f.client.placement_group_ready(id, std::chrono::milliseconds(100));
    FAIL("ready");
  } catch (const exception& e) {
    CHECK(e.code() == error_code::failed_precondition);
    CHECK_THAT(e.what(), Catch::Contains("removed by its job"));
  }
  known = false;
  try {
    (void)f.client.placement_group_ready(id, std::chrono::milliseconds(100));
    FAIL("ready");
  } catch (const exception& e) {
    CHECK(e.code() == error_code::not_found);
  }
}

TEST_CASE("removing a placement group tells the head", "[core][head_client]") {
  head_fixture f;
  const auto id = placement_group_id::random();
  f.client.remove_placement_group(id);
  const auto sent = f.net.take<protocol::remove_placement_group>();
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].first == f.head);
  CHECK(sent[0].second.id == id);
}

TEST_CASE("the head explains why work waits and says where a durable object lives",
          "[core][head_client]") {
  head_fixture f;
  const auto a = actor_id::random();
  f.answer<protocol::explain_placement>([&](const protocol::explain_placement& q) {
    protocol::placement_explained r;
    r.why = q.actor == a ? "no node has a GPU" : "";
    return r;
  });
  protocol::explain_placement q;
  q.actor = a;
  CHECK(f.client.explain_placement(q) == "no node has a GPU");
  CHECK(f.client.explain_placement({}).empty());

  const auto obj = object_id::random();
  const auto node = node_id::random();
  f.answer<protocol::locate_object>([&](const protocol::locate_object& l) {
    protocol::object_location r;
    r.found = l.id == obj;
    r.node = node;
    return r;
  });
  const auto at = f.client.locate_object(obj);
  CHECK(at.found);
  CHECK(at.node == node);
  CHECK_FALSE(f.client.locate_object(object_id::random()).found);
}
