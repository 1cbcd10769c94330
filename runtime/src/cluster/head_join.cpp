#include "cluster/head_join.hpp"

#include "log.hpp"

#include <algorithm>

namespace celer {

head_join::head_join(config c, clock::time_point now, std::uint64_t seed)
  : cfg_(std::move(c)), started_(now), rng_(seed) {}

std::chrono::milliseconds head_join::attempt_timeout(clock::time_point now) const {
  auto t = cfg_.attempt_timeout;
  if (cfg_.give_up_after.count() > 0) {
    t = std::min(t, std::chrono::ceil<std::chrono::milliseconds>(started_ + cfg_.give_up_after - now));
  }
  return std::max(t, std::chrono::milliseconds(1));
}

head_join::step head_join::failed(clock::time_point now, const error& e) {
  ++failures_;
  step s;
  if (e.code() != error_code::unavailable) {
    s.give_up = true;
    s.why = e.message();
    return s;
  }
  // The last attempt gets at least this long (not a sliver just before the bound).
  const auto least = std::max(std::min(cfg_.first_pause, cfg_.attempt_timeout), std::chrono::milliseconds(1));
  const auto left = started_ + cfg_.give_up_after - now;
  if (cfg_.give_up_after.count() > 0 && left < least) {
    s.give_up = true;
    s.why = "the head at " + cfg_.head + " did not answer " + std::to_string(failures_) +
            (failures_ == 1 ? " hello in " : " hellos in ") +
            millis(std::chrono::duration_cast<std::chrono::milliseconds>(now - started_)) + " (" + cfg_.give_up_knob +
            " is " + std::to_string(cfg_.give_up_after.count()) + "): " + e.message();
    return s;
  }
  // Doubles from first_pause up to max_pause; drawn from the upper half of that.
  auto cap = cfg_.first_pause;
  for (int i = 1; i < failures_ && cap < cfg_.max_pause; ++i) cap *= 2;
  cap = std::max(std::min(cap, cfg_.max_pause), std::chrono::milliseconds(1));
  std::uniform_int_distribution<std::chrono::milliseconds::rep> draw(cap.count() / 2, cap.count());
  auto pause = std::chrono::milliseconds(draw(rng_));
  if (cfg_.give_up_after.count() > 0) {
    // The last attempt starts early enough to get its least time before the bound.
    pause = std::min(pause, std::chrono::floor<std::chrono::milliseconds>(left - least));
  }
  s.retry_at = now + pause;
  s.say = "the head at " + cfg_.head + " did not answer hello " + std::to_string(failures_) + " (" +
          e.message() + "); trying again in " + millis(pause) +
          (cfg_.give_up_after.count() > 0
             ? ", until " + millis(cfg_.give_up_after) + " have passed (" + cfg_.give_up_knob + ")"
             : std::string(", until it answers (") + cfg_.give_up_knob + " is 0)");
  return s;
}

expected<void> join_head(head_join& join,
                         const std::function<expected<void>(std::chrono::milliseconds)>& hello,
                         const std::function<bool(std::chrono::milliseconds)>& pause,
                         const std::function<head_join::clock::time_point()>& now,
                         const std::function<void(const std::string&)>& say) {
  for (;;) {
    auto r = hello(join.attempt_timeout(now()));
    if (r) return r;
    const auto at = now();
    auto s = join.failed(at, r.error());
    if (s.give_up) return error(r.error().code(), s.why);
    say(s.say);
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(s.retry_at - at);
    if (!pause(std::max(wait, std::chrono::milliseconds(0)))) {
      return error(error_code::cancelled, "stopped while joining: " + r.error().message());
    }
  }
}

} // namespace celer
