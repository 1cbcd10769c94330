#pragma once
// What a thread running user code knows about the worker it runs for: the core's get and
// wait lend the worker's CPUs to its node while they block, and nested work inherits the
// worker's priority.

#include <celer/ids.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

namespace celer {

/// Per-thread facts about the worker running user code on this thread (null on the driver).
struct worker_context {
  worker_id worker;
  address node;
  /// Set when the call running on this thread waits in get or wait.
  bool blocked = false;
  /// Told when a call on this thread starts (true) and stops (false) waiting in get or
  /// wait: the worker gives back the tasks queued behind it. Runs with the reference
  /// table's lock held: it must not call back into the core.
  std::function<void(bool)> on_block;
  /// Told just before this thread waits for a message (a get, a request's reply, a peer's
  /// message): a worker process's transport then receives on another thread meanwhile.
  std::function<void()> before_wait;
  /// The GPUs (device indices) the worker was given.
  std::vector<int> gpu_ids;
  /// The actor it hosts (nil for task workers), and the priority of the work it runs.
  actor_id actor;
  std::int32_t priority = 0;
  /// How many times the actor it hosts was started again after dying (celer::was_restarted).
  std::uint32_t restarts = 0;
  /// The task or actor call running on this thread (nil between calls): what it submits is
  /// recorded as its children (celer::cancel with recursive), and `cancelled` is its flag
  /// (celer::is_cancelled), set by a cancel while it runs.
  task_id task;
  const std::atomic<bool>* cancelled = nullptr;
};
worker_context*& current_worker_context() noexcept;
/// Calls the current worker context's before_wait, if any.
inline void before_wait() {
  if (auto* ctx = current_worker_context(); ctx != nullptr && ctx->before_wait) ctx->before_wait();
}

} // namespace celer
