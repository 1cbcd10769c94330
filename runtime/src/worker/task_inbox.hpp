#pragma once
// A worker's messages, in the order they arrived, held where the worker can still give
// tasks back: the receiving thread (the transport's, or a sender's in embedded mode) puts
// each message here and wakes the worker's thread only when it was idle; the worker's thread
// takes them one by one. While a call blocks in get, the plain tasks queued behind it are
// taken out and returned to their owners (and any that arrive meanwhile), so that a task can
// never wait behind one that waits for it: pipelining is safe. An owner can also withdraw
// queued tasks (a lease that went idle takes them instead). A task is either taken out here
// or started by the worker, never both (one lock decides), so nothing runs twice.
//
//   task_inbox inbox;
//   if (inbox.deliver(m) == task_inbox::after::wake) wake_the_worker();  // receiving thread
//   while (auto m = inbox.next()) handle(*m);                            // worker's thread
//   auto back = inbox.block();  // the running call waits in get: return `back` to owners
//
// Thread-safe: mutex_ guards everything.

#include "protocol/messages.hpp"

#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

namespace celer {

class task_inbox {
public:
  /// What the receiving thread does after deliver().
  enum class after {
    /// Nothing: the worker's thread is taking messages and will reach it.
    nothing,
    /// Wake the worker's thread: it was idle.
    wake,
    /// Return the task to its owner: a call blocks in get, so it would wait behind it
    /// (`m` is left as it was, and not queued).
    give_back,
  };
  /// Queues `m` (moved from, unless the answer is give_back).
  after deliver(protocol::message& m);
  /// The next message for the worker's thread; none when the queue is empty (the worker is
  /// then idle until deliver() answers wake).
  std::optional<protocol::message> next();
  /// A call the worker runs blocks in get: the plain tasks queued now are taken out (to be
  /// returned to their owners), and those delivered until unblock() are given back too.
  /// Calls may block on several threads at once (an actor's concurrent calls): counted.
  std::vector<protocol::task_spec> block();
  void unblock();
  /// Takes out the queued plain tasks among `ids`: they will not run here. Those not taken
  /// have started (or were never here).
  std::vector<protocol::task_spec> withdraw(const std::vector<task_id>& ids);
  /// Takes out the queued task or actor call `id` (celer::cancel): it will not run here.
  /// None when it is not queued (it started, or was never here).
  std::optional<protocol::task_spec> take(const task_id& id);
  /// Messages queued now (tests).
  [[nodiscard]] std::size_t queued() const;

private:
  /// A plain task (not an actor's creation or call): may run elsewhere.
  static bool movable(const protocol::message& m);

  mutable std::mutex mutex_;
  std::deque<protocol::message> queue_;
  /// The worker's thread is taking messages (a wake is on its way or it is running one).
  bool draining_ = false;
  /// Calls blocked in get now.
  std::size_t blocked_ = 0;
};

} // namespace celer
