#pragma once
// When a core's lease reaper (task_submitter::run_reaper, its own thread) wakes: at the
// deadline of the next idle lease, or, while no lease is idle and it waits untold, when one
// goes idle. A lease going idle while the reaper waits for a deadline wakes no thread: its own
// deadline (idle_since + lease_idle_ms) is never sooner than one set already, so a caller
// whose lease goes idle after every task wakes no thread for it.
//
//   std::unique_lock lock(mutex_);               // task_submitter::mutex_
//   while (!stopped) alarm.sleep(lock, next_idle_deadline());  // the reaper
//   alarm.lease_went_idle();                     // another thread, mutex_ held
//
// Threads: guarded by task_submitter::mutex_: every call with it held (sleep releases it
// while it waits).

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace celer {

class reaper_alarm {
public:
  using time_point = std::chrono::steady_clock::time_point;

  /// The reaper waits (`lock` released meanwhile) until `next` on the steady clock
  /// (time_point::max(): untold, until a lease goes idle) or until woken.
  void sleep(std::unique_lock<std::mutex>& lock, time_point next);
  /// A lease went idle: wakes the reaper if it waits untold.
  void lease_went_idle() {
    if (wakes_ == time_point::max()) cv_.notify_one();
  }
  /// Wakes the reaper whatever it waits for (the stop: it sees it and ends).
  void wake() { cv_.notify_all(); }
  /// When the reaper wakes by itself (max: only when told).
  [[nodiscard]] time_point wakes() const noexcept { return wakes_; }

private:
  std::condition_variable cv_;
  time_point wakes_ = time_point::max();
};

} // namespace celer
