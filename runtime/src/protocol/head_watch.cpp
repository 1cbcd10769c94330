#include "protocol/head_watch.hpp"

#include "log.hpp"

#include <algorithm>

namespace celer {

head_watch::head_watch(config c, clock::time_point now)
  : cfg_(std::move(c)), heard_(now.time_since_epoch().count()) {}

void head_watch::heard(clock::time_point now) noexcept {
  // Answers can arrive out of order with the ticks' clock readings: keep the latest.
  auto seen = heard_.load(std::memory_order_relaxed);
  const auto t = now.time_since_epoch().count();
  while (t > seen && !heard_.compare_exchange_weak(seen, t, std::memory_order_relaxed)) {
  }
}

std::chrono::milliseconds head_watch::silent_for(clock::time_point now) const noexcept {
  const clock::time_point seen{clock::duration(heard_.load(std::memory_order_relaxed))};
  return std::max(std::chrono::milliseconds(0),
                  std::chrono::duration_cast<std::chrono::milliseconds>(now - seen));
}

head_watch::step head_watch::tick(clock::time_point now) {
  step s;
  if (gave_up_) return s;
  const auto silent = silent_for(now);
  if (cfg_.give_up_after.count() > 0 && silent >= cfg_.give_up_after) {
    gave_up_ = true;
    s.give_up = true;
    s.why = "the head at " + cfg_.head + " has not answered for " + millis(silent) + " (" +
            cfg_.give_up_knob + " is " + std::to_string(cfg_.give_up_after.count()) + ")";
    return s;
  }
  if (cfg_.missing_after.count() > 0 && silent >= cfg_.missing_after && !missing_) {
    missing_ = true;
    s.say = "cannot reach the head at " + cfg_.head + ": no answer for " + millis(silent);
    if (cfg_.give_up_after.count() > 0) {
      s.say += "; giving up after " + millis(cfg_.give_up_after) + " (" + cfg_.give_up_knob +
               ") unless it answers";
    }
  } else if (missing_ && silent < cfg_.missing_after) {
    missing_ = false;
    s.say = "the head at " + cfg_.head + " answers again";
  }
  if (last_probe_ == clock::time_point{} || now - last_probe_ >= cfg_.probe_every) {
    last_probe_ = now;
    s.probe = true;
  }
  return s;
}

protocol::message head_watch::probe(const address& reply_to) {
  protocol::lookup_actor q;
  q.request_id = probe_request;
  q.reply_to = reply_to;
  return q;  // the empty name: no actor has it
}

bool head_watch::answers_probe(const protocol::message& m) noexcept {
  const auto* r = std::get_if<protocol::lookup_actor_reply>(&m);
  return r != nullptr && r->request_id == probe_request;
}

} // namespace celer
