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
//   calls.wait_room(slot, produced, window);    // a generator ahead of its consumer
//   calls.acked(id, consumed);                  // the thread a generator_ack arrived on
//
// Thread-safe: mutex_ guards the table and each slot's `consumed`; a slot's flag is
// atomic, read without it. A slot stays where it is until finish (the running call holds
// its address), and is reused after; calls are found by id, not by a scan (a coroutine
// actor keeps thousands running, parked). room_ wakes the generators waiting for their
// consumers (on an ack or a cancel).

#include <celer/ids.hpp>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace celer {

class running_calls {
public:
  struct slot {
    task_id task;
    std::atomic<bool> cancelled{false};
    bool in_use = false;
    /// A generator's values its consumer has taken (generator_ack); mutex_ guards it.
    std::uint64_t consumed = 0;
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
  /// A generator that has produced `produced` values and may be `window` ahead of its
  /// consumer waits until it is less, or its call is cancelled; false when cancelled.
  bool wait_room(slot* s, std::uint64_t produced, std::uint64_t window);
  /// Whether it may go on at once (wait_room would not wait).
  bool has_room(slot* s, std::uint64_t produced, std::uint64_t window);
  /// Generator `task`'s consumer has taken `consumed` values (a running call's only; an
  /// older count than one heard is ignored).
  void acked(const task_id& task, std::uint64_t consumed);
  /// Calls running now (tests).
  [[nodiscard]] std::size_t running() const;

private:
  /// The slot of running call `task`, or null (mutex_ held).
  [[nodiscard]] slot* find(const task_id& task) const;

  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<slot>> slots_;
  /// The slots not in use, and those in use by their call (a coroutine actor parks
  /// thousands of calls at once: no scan of them all per call).
  std::vector<slot*> free_;
  std::unordered_map<task_id, slot*> by_task_;
  std::deque<task_id> early_;
  std::condition_variable room_;
};

} // namespace celer
