// Watching the head: probes on ticks, one line when it goes silent and one when it is back,
// and giving up after the bound, driven with a made-up clock.
#include "protocol/head_watch.hpp"

#include <catch2/catch.hpp>

#include <chrono>

using namespace celer;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

head_watch::config watch_config() {
  head_watch::config c;
  c.head = "tcp://10.0.0.1:6380";
  c.probe_every = 1s;
  c.missing_after = 5s;
  c.give_up_after = 15s;
  c.give_up_knob = "head_timeout_ms";
  return c;
}

protocol::message answer(std::uint64_t request) {
  protocol::lookup_actor_reply r;
  r.request_id = request;
  return r;
}

} // namespace

TEST_CASE("a silent head is reported once, then given up on after the bound", "[head_watch][fault]") {
  const auto t0 = head_watch::clock::time_point{} + 1h;
  head_watch w(watch_config(), t0);
  auto first = w.tick(t0);
  CHECK(first.probe);
  CHECK(first.say.empty());
  CHECK_FALSE(first.give_up);
  // Probes at most once per probe_every.
  CHECK_FALSE(w.tick(t0 + 500ms).probe);
  CHECK(w.tick(t0 + 1s).probe);
  // Silent for 5 s: said once, with the bound to come.
  auto missing = w.tick(t0 + 5s);
  CHECK_THAT(missing.say, Contains("cannot reach the head at tcp://10.0.0.1:6380") &&
                            Contains("5000 ms") && Contains("head_timeout_ms"));
  CHECK_FALSE(missing.give_up);
  for (auto t = t0 + 5200ms; t < t0 + 15s; t += 200ms) {
    const auto s = w.tick(t);
    CHECK(s.say.empty());
    CHECK_FALSE(s.give_up);
  }
  auto gone = w.tick(t0 + 15s);
  CHECK(gone.give_up);
  CHECK_THAT(gone.why, Contains("tcp://10.0.0.1:6380") && Contains("15000 ms") &&
                         Contains("head_timeout_ms is 15000"));
  CHECK(w.gave_up());
  // Once: later ticks do nothing, and no more probes go out.
  const auto after = w.tick(t0 + 16s);
  CHECK_FALSE(after.give_up);
  CHECK_FALSE(after.probe);
}

TEST_CASE("a head that answers again is reported back and the bound starts over",
          "[head_watch][fault]") {
  const auto t0 = head_watch::clock::time_point{} + 1h;
  head_watch w(watch_config(), t0);
  (void)w.tick(t0);
  CHECK_FALSE(w.tick(t0 + 6s).say.empty());
  w.heard(t0 + 7s);
  CHECK_THAT(w.tick(t0 + 7200ms).say, Contains("answers again"));
  CHECK(w.silent_for(t0 + 8s) == 1000ms);
  // 15 s from the answer, not from the start.
  CHECK_FALSE(w.tick(t0 + 21s).give_up);
  CHECK(w.tick(t0 + 22s).give_up);
}

TEST_CASE("answers that arrive late do not move the last answer back", "[head_watch]") {
  const auto t0 = head_watch::clock::time_point{} + 1h;
  head_watch w(watch_config(), t0);
  w.heard(t0 + 3s);
  w.heard(t0 + 2s);
  CHECK(w.silent_for(t0 + 4s) == 1000ms);
  CHECK(w.silent_for(t0 + 1s) == 0ms);
}

TEST_CASE("only the reply to the probe counts as the head answering", "[head_watch]") {
  const address self{unique_id::random(), "tcp://127.0.0.1:5000"};
  auto probe = head_watch::probe(self);
  auto* q = std::get_if<protocol::lookup_actor>(&probe);
  REQUIRE(q != nullptr);
  CHECK(q->name.empty());  // no actor is named "": the head answers not found
  CHECK(q->reply_to == self);
  CHECK(head_watch::answers_probe(answer(q->request_id)));
  CHECK_FALSE(head_watch::answers_probe(answer(7)));
  CHECK_FALSE(head_watch::answers_probe(protocol::message{protocol::tick{}}));
}

TEST_CASE("a watch with no bound never gives up", "[head_watch]") {
  auto c = watch_config();
  c.give_up_after = 0ms;
  const auto t0 = head_watch::clock::time_point{} + 1h;
  head_watch w(c, t0);
  CHECK_THAT(w.tick(t0 + 6s).say, !Contains("giving up"));
  CHECK_FALSE(w.tick(t0 + 24h).give_up);
}
