// Joining the head: a node's hello tried again with growing, jittered pauses while the head
// does not answer, until node_head_timeout_ms; driven attempt by attempt with a made-up clock
// and a made-up hello.
#include "cluster/head_join.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <set>
#include <vector>

using namespace celer;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

head_join::config join_config() {
  head_join::config c;
  c.head = "tcp://10.0.0.1:6380";
  c.attempt_timeout = 10s;
  c.first_pause = 250ms;
  c.max_pause = 5s;
  c.give_up_after = 60s;
  c.give_up_knob = "node_head_timeout_ms";
  return c;
}

/// A head that answers the hello of attempt `answers_at` (1-based; 0: never) and lets every
/// earlier one wait its whole timeout; the clock is made up and moves only by what happens.
struct fake_head {
  head_join::clock::time_point now = head_join::clock::time_point{} + 1h;
  int answers_at = 0;
  error refusal{error_code::unavailable, "no celer process answered"};
  /// Each attempt: when it started and how long it was let wait.
  std::vector<std::pair<head_join::clock::time_point, std::chrono::milliseconds>> attempts;
  std::vector<std::chrono::milliseconds> pauses;
  std::vector<std::string> said;
  bool stop_in_pause = false;

  expected<void> run(head_join& j) {
    return join_head(
      j,
      [this](std::chrono::milliseconds within) -> expected<void> {
        attempts.emplace_back(now, within);
        if (static_cast<int>(attempts.size()) == answers_at) {
          now += 3ms;  // the answer takes a moment
          return {};
        }
        if (refusal.code() == error_code::unavailable) now += within;  // waited for nothing
        return refusal;
      },
      [this](std::chrono::milliseconds pause) {
        pauses.push_back(pause);
        now += pause;
        return !stop_in_pause;
      },
      [this] { return now; }, [this](const std::string& line) { said.push_back(line); });
  }
};

} // namespace

TEST_CASE("a node says hello again after growing, jittered pauses until the head answers", "[head_join][fault]") {
  fake_head h;
  h.answers_at = 5;
  head_join j(join_config(), h.now, /*seed=*/7);
  const auto t0 = h.now;
  REQUIRE(h.run(j));
  REQUIRE(h.attempts.size() == 5);
  REQUIRE(h.pauses.size() == 4);
  CHECK(j.failures() == 4);
  // Each pause is drawn from the upper half of a cap that doubles from 250 ms.
  const std::vector<std::chrono::milliseconds> caps{250ms, 500ms, 1000ms, 2000ms};
  for (std::size_t i = 0; i < caps.size(); ++i) {
    CHECK(h.pauses[i] >= caps[i] / 2);
    CHECK(h.pauses[i] <= caps[i]);
  }
  // Each attempt waits the whole attempt timeout, and starts after the previous one's pause.
  auto at = t0;
  for (std::size_t i = 0; i < h.attempts.size(); ++i) {
    CHECK(h.attempts[i].first == at);
    CHECK(h.attempts[i].second == 10s);
    if (i < h.pauses.size()) at += 10s + h.pauses[i];
  }
  // One line per failed attempt, saying what happens next.
  REQUIRE(h.said.size() == 4);
  CHECK_THAT(h.said[0], Contains("tcp://10.0.0.1:6380") && Contains("did not answer hello 1") &&
                          Contains("trying again in") && Contains("node_head_timeout_ms"));
  CHECK_THAT(h.said[3], Contains("did not answer hello 4"));
}

TEST_CASE("a node gives up joining once node_head_timeout_ms has passed, naming the knob", "[head_join][fault]") {
  fake_head h;  // never answers
  head_join j(join_config(), h.now, /*seed=*/1);
  const auto t0 = h.now;
  auto r = h.run(j);
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == error_code::unavailable);
  CHECK_THAT(r.error().message(), Contains("tcp://10.0.0.1:6380") && Contains("node_head_timeout_ms is 60000") &&
                                    Contains("no celer process answered"));
  // Every attempt starts before the bound, and none is let wait past it.
  REQUIRE(h.attempts.size() >= 2);
  for (const auto& [start, within] : h.attempts) {
    CHECK(start < t0 + 60s);
    CHECK(start + within <= t0 + 60s);
  }
  // It stopped right at the bound, not an attempt timeout later, and its last attempt was
  // not a sliver: at least the first pause's length.
  CHECK(h.now == t0 + 60s);
  CHECK(h.attempts.back().second >= 250ms);
  CHECK(j.failures() == static_cast<int>(h.attempts.size()));
  // No pause longer than the cap.
  for (auto p : h.pauses) CHECK(p <= 5s);
}

TEST_CASE("a node whose node_head_timeout_ms is 0 keeps saying hello, pausing at most the cap", "[head_join][fault]") {
  auto c = join_config();
  c.give_up_after = 0ms;
  head_join j(c, head_join::clock::time_point{}, /*seed=*/3);
  auto now = head_join::clock::time_point{} + 1s;
  const error silent{error_code::unavailable, "no answer"};
  for (int i = 0; i < 1000; ++i) {
    CHECK(j.attempt_timeout(now) == 10s);
    now += 10s;
    auto s = j.failed(now, silent);
    REQUIRE_FALSE(s.give_up);
    CHECK(s.retry_at - now <= 5s);
    if (i >= 5) CHECK(s.retry_at - now >= 2500ms);  // the cap reached: its upper half
    CHECK_THAT(s.say, Contains("until it answers (node_head_timeout_ms is 0)"));
    now = s.retry_at;
  }
}

TEST_CASE("a refused hello is not tried again", "[head_join][fault]") {
  fake_head h;
  h.refusal = error(error_code::unauthenticated, "tcp://10.0.0.1:6380 refused this process: wrong token");
  head_join j(join_config(), h.now, /*seed=*/1);
  auto r = h.run(j);
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == error_code::unauthenticated);
  CHECK_THAT(r.error().message(), Contains("wrong token"));
  CHECK(h.attempts.size() == 1);
  CHECK(h.pauses.empty());
}

TEST_CASE("a node stopped while it waits to say hello again stops joining", "[head_join][fault]") {
  fake_head h;
  h.stop_in_pause = true;
  head_join j(join_config(), h.now, /*seed=*/1);
  auto r = h.run(j);
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == error_code::cancelled);
  CHECK_THAT(r.error().message(), Contains("stopped while joining"));
  CHECK(h.attempts.size() == 1);
}

TEST_CASE("nodes that failed their hello together try again at different times", "[head_join][fault]") {
  // A thousand nodes whose first hello went unanswered at the same moment: their seeds
  // differ, and so do their retries, spread over the upper half of the first cap.
  const auto t0 = head_join::clock::time_point{} + 1h;
  const error silent{error_code::unavailable, "no answer"};
  std::set<head_join::clock::time_point> retries;
  for (std::uint64_t node = 0; node < 1000; ++node) {
    head_join j(join_config(), t0, /*seed=*/node * 0x9E3779B97F4A7C15ULL + 1);
    const auto s = j.failed(t0 + 10s, silent);
    REQUIRE_FALSE(s.give_up);
    CHECK(s.retry_at >= t0 + 10s + 125ms);
    CHECK(s.retry_at <= t0 + 10s + 250ms);
    retries.insert(s.retry_at);
  }
  // 126 possible milliseconds: a thousand draws hit nearly all of them.
  CHECK(retries.size() >= 100);
}
