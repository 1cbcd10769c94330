// The head's liveness timing (head/head_liveness.hpp) on its own, with a made-up clock: a
// tick that comes later than two periods says how long the head was away (the time that
// counts against no node's or driver's heartbeats); ticks on time, the first tick, and a
// head told no period say none; a zero node timeout declares no one dead.
#include "head/head_liveness.hpp"

#include <catch2/catch.hpp>

using namespace celer;
using namespace std::chrono_literals;

namespace {

struct timing {
  std::chrono::steady_clock::time_point now{};
  head_liveness liveness{1000ms, [this] { return now; }};
};

} // namespace

TEST_CASE("a tick later than two periods says how long the head was stalled", "[head][liveness]") {
  timing t;
  t.liveness.expect_ticks_every(100ms);
  CHECK(t.liveness.tick().away == 0ms);  // the first tick: nothing to compare with
  t.now += 150ms;
  const auto on_time = t.liveness.tick();
  CHECK(on_time.now == t.now);
  CHECK(on_time.away == 0ms);
  t.now += 200ms;  // exactly two periods: still on time
  CHECK(t.liveness.tick().away == 0ms);
  t.now += 5100ms;  // the head's process stalled: one period of that was due anyway
  const auto late = t.liveness.tick();
  CHECK(late.now == t.now);
  CHECK(late.away == 5000ms);
  t.now += 100ms;  // and after it, on time again
  CHECK(t.liveness.tick().away == 0ms);
}

TEST_CASE("a head told no tick period notices no stall", "[head][liveness]") {
  timing t;
  CHECK(t.liveness.tick().away == 0ms);
  t.now += 1h;
  CHECK(t.liveness.tick().away == 0ms);
}

TEST_CASE("the head's clock is the one it was given, and a zero timeout declares no one dead",
          "[head][liveness]") {
  timing t;
  t.now += 42s;
  CHECK(t.liveness.now()() == t.now);
  CHECK(t.liveness.declares_dead());
  CHECK(t.liveness.node_timeout() == 1000ms);
  head_liveness embedded{0ms, {}};
  CHECK_FALSE(embedded.declares_dead());
  const auto before = std::chrono::steady_clock::now();
  CHECK(embedded.now()() >= before);  // steady_clock's when none given
}
