#pragma once
// Preemption notices for the actors this process hosts: each actor's on_preempt callback,
// and the notice once its node sent one. A notice runs the callback on a thread of its own,
// beside any call the actor is running (a call may run for hours; the notice cannot wait
// behind it), then `done` tells the node that the actor may be stopped now.

#include "core/core_worker.hpp"
#include "protocol/messages.hpp"
#include "transport/transport.hpp"

#include <celer/api.hpp>
#include <celer/ids.hpp>

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>

namespace celer {

class preemption_board {
public:
  using callback = std::function<void(const preemption&)>;
  /// The process's board (every actor it hosts).
  static preemption_board& instance();
  ~preemption_board();

  /// Registers `actor`'s callback, run with `ctx` (the actor's context) as its thread's.
  void set_callback(const actor_id& actor, callback cb, const worker_context& ctx);
  /// The node preempts `actor`: records the notice and runs its callback on a new thread,
  /// then calls `done`; without a callback, calls `done` at once.
  void notify(const actor_id& actor, std::chrono::milliseconds grace, std::string reason,
              std::function<void()> done);
  /// notify() for a notice from node `node` to worker `worker`: done answers preempt_ready.
  void notify(const protocol::preempt_actor& notice, transport& net, const address& node,
              const worker_id& worker);
  [[nodiscard]] std::optional<preemption> notice(const actor_id& actor) const;
  /// The actor is stopping: waits for its callback to return, then forgets it.
  void forget(const actor_id& actor);

private:
  struct entry {
    callback cb;
    worker_context ctx;
    std::optional<preemption> notice;
    std::function<void()> done;
    std::thread runner;
  };
  /// Starts `e`'s callback (the lock is held; it runs without it).
  void run(entry& e);

  mutable std::mutex mutex_;  // guards entries_
  std::unordered_map<actor_id, entry> entries_;
};

} // namespace celer
