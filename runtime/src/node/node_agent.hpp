#pragma once
// The node agent: the node's resources, its worker pool and local dispatch. Tasks wait in
// a queue until their resources are free, then run on an idle worker (or a new one); each
// actor gets a worker of its own for its lifetime. What the node can never place goes to
// the head. Plain logic behind `handle`; a CAF actor runs it (one message at a time).

#include "protocol/messages.hpp"
#include "transport/transport.hpp"

#include <deque>
#include <functional>
#include <map>
#include <unordered_map>
#include <vector>

namespace celer {

/// Starts and stops workers: threads in embedded mode, processes in cluster mode.
class worker_launcher {
public:
  virtual ~worker_launcher() = default;
  /// Starts a worker with id `id` and returns its address.
  virtual address launch(const worker_id& id) = 0;
};

class node_agent {
public:
  struct config {
    node_id id;
    address self;
    address head;
    protocol::resource_set total;
    std::map<std::string, std::string> labels;
    /// Idle task workers kept for reuse.
    int max_idle_workers = 4;
  };
  node_agent(transport& net, worker_launcher& launcher, config cfg);

  /// Registers with the head.
  void start();
  void handle(protocol::message& m);

  [[nodiscard]] const protocol::resource_set& available() const noexcept { return available_; }
  [[nodiscard]] std::size_t queued() const noexcept { return queue_.size(); }
  [[nodiscard]] std::size_t workers() const noexcept { return workers_.size(); }

private:
  struct worker_slot {
    address addr;
    bool busy = false;
    bool blocked = false;
    bool actor_worker = false;
    actor_id actor;
    task_id task;
    /// What the worker holds now (its CPUs drop out while it is blocked in get).
    protocol::resource_set held;
    /// What its task or actor asked for.
    protocol::resource_set granted;
  };

  void on(protocol::submit_task& m);
  void on(protocol::start_actor& m);
  void on(protocol::task_done& m);
  void on(protocol::worker_blocked& m);
  void on(protocol::worker_unblocked& m);
  void on(protocol::actor_exited& m);
  void on(protocol::kill_actor& m);
  void on(protocol::resource_query& m);
  void on(protocol::shutdown_component& m);
  void dispatch();
  worker_id take_worker(bool for_actor);
  void release(worker_slot& w);

  transport& net_;
  worker_launcher& launcher_;
  config cfg_;
  protocol::resource_set available_;
  std::deque<protocol::task_spec> queue_;
  std::unordered_map<worker_id, worker_slot> workers_;
  std::vector<worker_id> idle_;
  bool stopping_ = false;
};

} // namespace celer
