#pragma once
// Whether the head still answers, for the cluster-mode processes that depend on it: a
// driver fails its waits with `unavailable` once the head has been silent too long, and a
// node agent says so in its log and then stops with its workers. Plain logic over the
// times it is given (tests drive it with a made-up clock); its owner sends the probe it
// asks for on its ticks and reports the answers.
//
//   head_watch w({.head = "tcp://10.0.0.1:6380", .give_up_after = 15s, ...}, now);
//   on each tick:      auto s = w.tick(now);
//                      if (s.probe) net.send(head, head_watch::probe(self));
//                      if (!s.say.empty()) log(s.say);
//                      if (s.give_up) fail_everything(s.why);
//   on each message:   if (head_watch::answers_probe(m)) w.heard(now);
//
// The probe is a name lookup for the empty name, which no actor has: an existing request
// the head answers at once from one hash lookup, wherever the process's other traffic
// goes. (A dedicated ping message would say it better, once messages may change.)

#include "protocol/messages.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace celer {

class head_watch {
public:
  using clock = std::chrono::steady_clock;
  struct config {
    /// The head's endpoint, for messages.
    std::string head;
    /// How often to probe (at most once per tick).
    std::chrono::milliseconds probe_every{1000};
    /// Silent this long: say so once (zero: never).
    std::chrono::milliseconds missing_after{5000};
    /// Silent this long: give up (zero: never), and the knob that sets it, for messages.
    std::chrono::milliseconds give_up_after{0};
    std::string give_up_knob;
  };
  /// What the owner should do on this tick.
  struct step {
    bool probe = false;
    /// A line to log (once when the head goes silent, once when it answers again).
    std::string say;
    /// True once, when the head has been silent for give_up_after; `why` says so.
    bool give_up = false;
    std::string why;
  };

  /// The head counts as heard at `now` (the owner has just reached it).
  head_watch(config c, clock::time_point now);

  /// The head answered a probe. Any thread.
  void heard(clock::time_point now) noexcept;
  /// One thread (the owner's ticks).
  step tick(clock::time_point now);
  [[nodiscard]] bool gave_up() const noexcept { return gave_up_; }
  [[nodiscard]] std::chrono::milliseconds silent_for(clock::time_point now) const noexcept;

  /// The request a probe carries (no core's or node's own requests reach this number).
  static constexpr std::uint64_t probe_request = 0xCE1E'4EAD'CE1E'4EADULL;
  [[nodiscard]] static protocol::message probe(const address& reply_to);
  [[nodiscard]] static bool answers_probe(const protocol::message& m) noexcept;

private:
  config cfg_;
  /// When the head last answered (clock ticks since its epoch): written by heard().
  std::atomic<clock::rep> heard_;
  clock::time_point last_probe_{};
  bool missing_ = false;
  bool gave_up_ = false;
};

} // namespace celer
