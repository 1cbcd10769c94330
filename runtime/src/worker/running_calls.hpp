#pragma once
// The calls a worker is running, each with the flag celer::cancel sets (celer::is_cancelled
// reads it), and the cancels that came for calls not started yet (an actor's call waiting
// for a thread of its pool, or one in flight to this worker): such a call is answered as
// cancelled instead of run.
//
//   running_calls calls;
//   auto* slot = calls.start(spec.id);          // the thread that runs the call
//   if (slot->cancelled) ...                    // cancelled before it started
//   calls.finish(slot);
//   calls.cancel(id);                           // the thread a cancel_task arrived on
//
// Thread-safe: mutex_ guards the table; a slot's flag is atomic, read without it. A slot
// stays where it is until finish (the running call holds its address), and is reused after.

#include <celer/ids.hpp>

#include <atomic>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

namespace celer {

class running_calls {
public:
  struct slot {
    task_id task;
    std::atomic<bool> cancelled{false};
    bool in_use = false;
  };
  /// How many cancels of calls not started are remembered (the oldest are forgotten: a
  /// cancel that crossed its call's result on the way never finds it).
  static constexpr std::size_t remembered = 1024;

  /// Call `task` starts: its slot, flagged already when a cancel came before it.
  slot* start(const task_id& task);
  /// The call of `s` is over; its slot is free again.
  void finish(slot* s);
  /// celer::cancel for `task`: true when it is running (its flag is set now); false when it
  /// is not, and then it is remembered, so that it is cancelled if it starts later.
  bool cancel(const task_id& task);
  /// Calls running now (tests).
  [[nodiscard]] std::size_t running() const;

private:
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<slot>> slots_;
  std::deque<task_id> early_;
};

} // namespace celer
