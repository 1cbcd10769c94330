#pragma once
// What a thread running user code knows about the worker it runs for: the core's get and
// wait lend the worker's CPUs to its node while they block, and nested work inherits the
// worker's priority.

#include <celer/fwd.hpp>
#include <celer/ids.hpp>

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace celer {
namespace protocol {
struct resource_set;
} // namespace protocol

/// Where a coroutine call's co_await parks it (the worker that runs it; <celer/future.hpp>).
class coroutine_host {
public:
  /// Parks the coroutine call running on this thread until `ref` is ready, then resumes `h`
  /// on the call's thread. False when `ref` is ready now (`h` goes on at once).
  virtual bool suspend(const object_ref<void>& ref, std::coroutine_handle<> h) = 0;

protected:
  ~coroutine_host() = default;
};

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
  /// The call running on this thread now (celer::get_runtime_context): its task, which
  /// run of it this is, and what it was given (a task's request; an actor's, for its
  /// methods). Set by the worker around each call; `resources` points into the running
  /// task's spec or the worker's copy of its actor's, and is null between calls.
  task_id task;
  /// The registered name of the function or method running on this thread (celer::print
  /// says it), pointing into its spec; null between calls.
  const std::string* function = nullptr;
  /// The running call's flag (celer::is_cancelled), set by a cancel while it runs; what
  /// the call submits is recorded as its children (celer::cancel with recursive).
  const std::atomic<bool>* cancelled = nullptr;
  std::int32_t attempt = 0;
  const protocol::resource_set* resources = nullptr;
  /// Set by celer::exit_actor in an actor's method: the worker ends the actor once the
  /// call returns. `constructing` while its factory or restore hook runs (no call to end).
  bool exit_requested = false;
  bool constructing = false;
  /// Set while a coroutine method's call runs on this thread: where its co_await parks it.
  coroutine_host* coroutines = nullptr;
  /// The environment variables of the running task, or of the actor (task_spec::env_vars):
  /// what it submits inherits them, and celer::getenv reads them first (embedded, where
  /// workers are threads sharing the program's environment).
  std::map<std::string, std::string> env_vars;
};
worker_context*& current_worker_context() noexcept;
/// Calls the current worker context's before_wait, if any.
inline void before_wait() {
  if (auto* ctx = current_worker_context(); ctx != nullptr && ctx->before_wait) ctx->before_wait();
}

} // namespace celer
