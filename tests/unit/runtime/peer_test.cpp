// celer::peer: a process's mailboxes (peer_mailbox) and the public calls over them, embedded.
// The cluster wiring (worker processes, the wire, another job's bytes refused) is in
// tests/integration/peer_cluster_test.cpp.
#include "core/peer_mailbox.hpp"
#include "transport/admission.hpp"
#include "unit/runtime/fixtures.hpp"

#include <celer/celer.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <thread>

using namespace celer;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

std::string text(const bytes& b) { return std::string(b.view()); }

/// Sends `n` messages to the actor's mailbox, each once its receiver has taken the last
/// (a ping-pong through two mailboxes): a member busy in a call still receives.
struct ponger {
  std::string serve(peer::endpoint back, int n) {
    std::string seen;
    for (int i = 0; i < n; ++i) {
      auto got = peer::receive("ping", static_cast<std::uint64_t>(i), 20s);
      if (!got) return "error: " + got.error().message();
      seen += std::string(got->view());
      const std::string reply = "pong" + std::to_string(i);
      if (auto ok = peer::send(back, "pong", static_cast<std::uint64_t>(i), std::as_bytes(std::span(reply))); !ok)
        return "error: " + ok.error().message();
    }
    return seen;
  }
  peer::endpoint where() { return peer::here().value(); }
};
ponger* make_ponger() { return new ponger(); }

} // namespace

CELER_REMOTE(make_ponger, &ponger::serve, &ponger::where);

TEST_CASE("a mailbox keeps messages until they are taken, in any order, each once", "[peer]") {
  peer_mailbox m(1 << 20);
  REQUIRE(m.deposit("a", 2, "two"));
  REQUIRE(m.deposit("a", 1, "one"));
  REQUIRE(m.deposit("b", 1, "other box"));
  CHECK(m.bytes_held() == 3 + 3 + 9);
  CHECK(text(m.take("a", 1, std::nullopt).value()) == "one");
  CHECK(text(m.take("a", 2, std::nullopt).value()) == "two");
  const auto again = m.take("a", 1, peer_mailbox::clock::now() + 1ms);
  REQUIRE_FALSE(again);
  CHECK(again.error().code() == error_code::deadline_exceeded);
  CHECK_THAT(again.error().message(), Contains("mailbox a") && Contains("1"));
  m.close("b");
  CHECK(m.bytes_held() == 0);
}

TEST_CASE("a taker waiting for a message wakes when it arrives", "[peer]") {
  peer_mailbox m(1 << 20);
  std::thread later([&] {
    std::this_thread::yield();
    (void)m.deposit("x", 9, std::string(100'000, 'z'));
  });
  const auto got = m.take("x", 9, peer_mailbox::clock::now() + 30s);
  later.join();
  REQUIRE(got);
  CHECK(got->size() == 100'000);
}

TEST_CASE("a mailbox over its bound drops what arrives and its receiver is told why", "[peer]") {
  peer_mailbox m(10);
  REQUIRE(m.deposit("a", 1, "12345678"));
  CHECK_FALSE(m.deposit("a", 2, "too much"));
  const auto r = m.take("a", 2, peer_mailbox::clock::now() + 1ms);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message(), Contains("dropped") && Contains("10 bytes"));
  // Taking frees room.
  REQUIRE(m.take("a", 1, std::nullopt));
  CHECK(m.deposit("a", 2, "now fits"));
}

TEST_CASE("a stopped mailbox fails every wait with the stop's reason", "[peer]") {
  peer_mailbox m(1 << 20);
  std::thread stopper([&] { m.stop(error_code::unavailable, "the runtime stopped"); });
  const auto r = m.take("a", 1, std::nullopt);
  stopper.join();
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == error_code::unavailable);
  CHECK_FALSE(m.deposit("a", 1, "late"));
}

TEST_CASE("peer data from a job's connection is stamped with that job", "[peer][security]") {
  const job_id job = job_id::random();
  const peer_identity who{peer_role::job, job};
  protocol::peer_data d;
  d.sender_job = job_id::random();  // forged
  protocol::message m = std::move(d);
  REQUIRE(admit(who, m).has_value());
  CHECK(std::get<protocol::peer_data>(m).sender_job == job);
}

TEST_CASE("actors exchange bytes through their mailboxes while busy in a call", "[peer]") {
  celer_test::scoped_runtime rt;
  auto p = celer::actor(make_ponger).remote();
  const auto me = peer::here();
  REQUIRE(me);
  const int n = 50;
  const auto them = celer::get(p.task(&ponger::where).remote());  // embedded: the same process
  auto served = p.task(&ponger::serve).remote(*me, n);
  for (int i = 0; i < n; ++i) {
    const std::string ping = std::to_string(i % 10);
    REQUIRE(peer::send(them, "ping", static_cast<std::uint64_t>(i), std::as_bytes(std::span(ping))));
    const auto pong = peer::receive("pong", static_cast<std::uint64_t>(i), 20s);
    REQUIRE(pong);
    CHECK(text(*pong) == "pong" + std::to_string(i));
  }
  const auto seen = celer::get(served);
  CHECK(seen.size() == 50);
  CHECK(seen.substr(0, 10) == "0123456789");
}

TEST_CASE("peer calls say what is wrong: no runtime, no box name, celer's box names, a payload over max_payload, "
          "nothing arriving",
          "[peer]") {
  const auto none = peer::here();
  REQUIRE_FALSE(none);
  CHECK(none.error().code() == error_code::failed_precondition);
  celer_test::scoped_runtime rt;
  const auto me = peer::here().value();
  const std::string payload = "x";
  CHECK(peer::send(me, "", 1, std::as_bytes(std::span(payload))).error().code() == error_code::invalid_argument);
  CHECK(peer::send(me, "celer.peer.lane-ask", 1, std::as_bytes(std::span(payload))).error().code() ==
        error_code::invalid_argument);
  const std::string huge(peer::max_payload + 1, 'x');
  const auto too_big = peer::send(me, "box", 1, std::as_bytes(std::span(huge)));
  REQUIRE_FALSE(too_big);
  CHECK(too_big.error().code() == error_code::invalid_argument);
  CHECK_THAT(too_big.error().message(), Contains("max_payload"));
  const auto late = peer::receive("nobody-sends-here", 1, 5ms);
  REQUIRE_FALSE(late);
  CHECK(late.error().code() == error_code::deadline_exceeded);
  // A large message is the same bytes on arrival.
  std::string big(3 << 20, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131);
  REQUIRE(peer::send(me, "big", 0, std::as_bytes(std::span(big))));
  const auto got = peer::receive("big", 0, 10s);
  REQUIRE(got);
  CHECK(got->view() == big);
}
