// A core's requests awaiting replies, driven message by message: ids, replies, the
// timeout by a made-up clock, an unreachable peer, and the stop.
#include "config/knobs.hpp"
#include "core/request_table.hpp"
#include "fakes/recording_transport.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <future>

using namespace celer;

namespace {

struct table_fixture {
  fakes::recording_transport net;
  address self{unique_id::random(), {}};
  address peer{unique_id::random(), {}};
  /// The table's clock, and how far it moves each time it is read (zero: it stands still;
  /// a whole request_timeout_ms: every wait is over as soon as it starts).
  std::chrono::steady_clock::time_point now{std::chrono::hours(1)};
  std::chrono::steady_clock::duration step{};
  request_table requests{net, self, [this] { return now += step; }};

  static protocol::message reply(std::uint64_t id) {
    protocol::status_reply r;
    r.request_id = id;
    r.actors_alive = 7;
    return r;
  }
  /// Sends a status query, as `ask` does, and returns its id and the reply to come.
  std::pair<std::uint64_t, std::future<protocol::message>> send() {
    protocol::status_query q;
    q.request_id = requests.next_id();
    q.reply_to = self;
    const auto id = q.request_id;
    return {id, requests.send_request(peer, q, id)};
  }
};

} // namespace

TEST_CASE("a request goes to its peer and the reply with its id completes it", "[core][requests]") {
  table_fixture f;
  auto [id, reply] = f.send();
  const auto sent = f.net.take<protocol::status_query>();
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].first == f.peer);
  CHECK(sent[0].second.request_id == id);
  CHECK(f.requests.pending() == 1);

  auto m = table_fixture::reply(id);
  CHECK(f.requests.complete(m));
  CHECK(f.requests.pending() == 0);
  const auto got = f.requests.await_reply(reply, id, "status_query");
  CHECK(std::get<protocol::status_reply>(got).actors_alive == 7);
}

TEST_CASE("each request gets a fresh id, and ask fills in the id and where to reply",
          "[core][requests]") {
  table_fixture f;
  std::vector<protocol::status_query> seen;
  f.net.answer = [&](const address&, const protocol::message& m) {
    const auto& q = std::get<protocol::status_query>(m);
    seen.push_back(q);
    auto r = table_fixture::reply(q.request_id);
    f.requests.complete(r);
  };
  (void)f.requests.ask<protocol::status_reply>(f.peer, protocol::status_query{});
  (void)f.requests.ask<protocol::status_reply>(f.peer, protocol::status_query{});
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].request_id != 0);
  CHECK(seen[0].request_id != seen[1].request_id);
  CHECK(seen[0].reply_to == f.self);
  CHECK(f.requests.pending() == 0);
}

TEST_CASE("a reply nobody waits for is taken and dropped; other messages are not replies",
          "[core][requests]") {
  table_fixture f;
  auto [id, reply] = f.send();
  auto stray = table_fixture::reply(id + 1000);
  CHECK(f.requests.complete(stray));
  CHECK(f.requests.pending() == 1);
  CHECK(reply.wait_for(std::chrono::seconds(0)) == std::future_status::timeout);

  protocol::message other = protocol::status_query{id, f.self};
  CHECK_FALSE(f.requests.complete(other));
  CHECK(f.requests.pending() == 1);
}

TEST_CASE("a request with no reply within request_timeout_ms fails as deadline_exceeded, and its "
          "late reply is dropped",
          "[core][requests]") {
  table_fixture f;
  auto [id, reply] = f.send();
  f.step = std::chrono::milliseconds(knobs().request_timeout_ms);
  try {
    (void)f.requests.await_reply(reply, id, "status_query");
    FAIL("no timeout");
  } catch (const exception& e) {
    CHECK(e.code() == error_code::deadline_exceeded);
    CHECK_THAT(e.what(), Catch::Contains("status_query: no reply within"));
  }
  CHECK(f.requests.pending() == 0);
  auto late = table_fixture::reply(id);
  CHECK(f.requests.complete(late));
}

TEST_CASE("a request to an unreachable peer fails as unavailable and is forgotten",
          "[core][requests]") {
  table_fixture f;
  f.net.unreachable.push_back(f.peer);
  try {
    (void)f.requests.ask<protocol::status_reply>(f.peer, protocol::status_query{});
    FAIL("sent");
  } catch (const exception& e) {
    CHECK(e.code() == error_code::unavailable);
    CHECK_THAT(e.what(), Catch::Contains("status_query: the peer is unreachable"));
  }
  CHECK(f.requests.pending() == 0);
}

TEST_CASE("a stop fails the requests waiting as cancelled and later ones as failed_precondition",
          "[core][requests]") {
  table_fixture f;
  auto [id, reply] = f.send();
  f.requests.stop("bye");
  CHECK(f.requests.pending() == 0);
  try {
    (void)f.requests.await_reply(reply, id, "status_query");
    FAIL("no failure");
  } catch (const exception& e) {
    CHECK(e.code() == error_code::cancelled);
    CHECK_THAT(e.what(), Catch::Contains("celer is shutting down: bye"));
  }
  f.requests.stop("again");  // the first reason stands
  try {
    (void)f.send();
    FAIL("sent after the stop");
  } catch (const exception& e) {
    CHECK(e.code() == error_code::failed_precondition);
    CHECK_THAT(e.what(), Catch::Contains("celer is shutting down: bye"));
  }
  CHECK(f.net.take<protocol::status_query>().size() == 1);  // only the first
}

TEST_CASE("a stop with a code fails waiting and later requests with that code",
          "[core][requests]") {
  table_fixture f;
  auto [id, reply] = f.send();
  f.requests.stop("the cluster is gone", error_code::unavailable);
  for (int i = 0; i < 2; ++i) {
    try {
      if (i == 0) {
        (void)f.requests.await_reply(reply, id, "status_query");
      } else {
        (void)f.send();
      }
      FAIL("no failure");
    } catch (const exception& e) {
      CHECK(e.code() == error_code::unavailable);
      CHECK(std::string(e.what()) == "the cluster is gone");
    }
  }
}

TEST_CASE("requests to a peer known to be gone fail at once; those to others wait on",
          "[core][requests]") {
  table_fixture f;
  auto [to_peer, peer_reply] = f.send();
  const address other{unique_id::random(), {}};
  protocol::status_query q;
  q.request_id = f.requests.next_id();
  q.reply_to = f.self;
  const auto to_other = q.request_id;
  auto other_reply = f.requests.send_request(other, q, to_other);
  f.requests.fail_sent_to(f.peer, error_code::unavailable, "its node died");
  CHECK(f.requests.pending() == 1);
  try {
    (void)f.requests.await_reply(peer_reply, to_peer, "status_query");
    FAIL("no failure");
  } catch (const exception& e) {
    CHECK(e.code() == error_code::unavailable);
    CHECK_THAT(e.what(), Catch::Contains("its node died"));
  }
  auto m = table_fixture::reply(to_other);
  CHECK(f.requests.complete(m));
  CHECK(std::get<protocol::status_reply>(f.requests.await_reply(other_reply, to_other, "q"))
          .actors_alive == 7);
}
