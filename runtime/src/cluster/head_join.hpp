#pragma once
// Joining the head: a node agent's hello, tried again with backoff and jitter while the head
// does not answer, until a bound. A head busy with many nodes joining at once (each CURVE
// handshake costs it CPU on its one I/O thread) can take longer than one attempt's wait to
// answer; a node that gave up after one attempt would not join at all, and a thousand that
// retried at the same moments would keep it busy. So each pause doubles, up to a cap, and is
// drawn at random from its upper half (equal jitter), which spreads the retries out.
//
// Plain logic over the times it is given (tests drive it with a made-up clock and a made-up
// hello), as head_watch is. The daemon runs join_head() with the transport's probe; the
// simulated node agents of celer-bench-sim-cluster step head_join from their event loop.
//
//   head_join j({.head = "tcp://10.0.0.1:6380", .attempt_timeout = 10s, .give_up_after = 60s,
//                .give_up_knob = "node_head_timeout_ms"}, now, seed);
//   for (;;) {
//     auto r = hello(j.attempt_timeout(now));
//     if (r) break;                              // joined
//     auto s = j.failed(clock::now(), r.error());
//     if (s.give_up) fail(s.why);                // a refusal, or the bound passed
//     log(s.say); sleep_until(s.retry_at);
//   }
//
// Only `unavailable` (no answer, cannot reach) is retried: a refused token or protocol
// version will be refused again.

#include <celer/error.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <random>
#include <string>

namespace celer {

class head_join {
public:
  using clock = std::chrono::steady_clock;
  struct config {
    /// The head's endpoint, for messages.
    std::string head;
    /// How long one hello waits for its answer (connect_timeout_ms).
    std::chrono::milliseconds attempt_timeout{10000};
    /// The pause after the first attempt that got no answer; it doubles after each.
    std::chrono::milliseconds first_pause{250};
    /// The longest pause.
    std::chrono::milliseconds max_pause{5000};
    /// Give up once this long has passed since the first attempt (zero: never), and the
    /// knob that sets it, for messages.
    std::chrono::milliseconds give_up_after{60000};
    std::string give_up_knob;
  };
  /// What to do after an attempt failed.
  struct step {
    /// Stop trying: `why` says so.
    bool give_up = false;
    std::string why;
    /// Otherwise: try again at this time, and log `say`.
    clock::time_point retry_at{};
    std::string say;
  };

  /// The first attempt starts at `now`; `seed` draws the jitter (a process's own).
  head_join(config c, clock::time_point now, std::uint64_t seed);

  /// How long the attempt starting at `now` may wait for an answer: the attempt timeout,
  /// or less when the bound comes sooner (at least 1 ms).
  [[nodiscard]] std::chrono::milliseconds attempt_timeout(clock::time_point now) const;
  /// The attempt that was made failed with `e`, found at `now`.
  step failed(clock::time_point now, const error& e);
  /// Attempts that failed so far.
  [[nodiscard]] int failures() const noexcept { return failures_; }

private:
  config cfg_;
  clock::time_point started_;
  std::mt19937_64 rng_;
  int failures_ = 0;
};

/// Says hello until the head answers: `hello` makes one attempt with the timeout it is given;
/// between attempts `pause` waits (false: stop now, the process is being stopped) and `say`
/// logs why. Returns the last attempt's error when it gives up or is stopped.
[[nodiscard]] expected<void> join_head(head_join& join,
                                       const std::function<expected<void>(std::chrono::milliseconds)>& hello,
                                       const std::function<bool(std::chrono::milliseconds)>& pause,
                                       const std::function<head_join::clock::time_point()>& now,
                                       const std::function<void(const std::string&)>& say);

} // namespace celer
