#pragma once
// The node agent: the node's resources, its workers and the work waiting for them. Lease
// requests (for tasks) and actors wait until their resources are free; a lease lends an
// idle worker (or a new one) to the owner that asked, which pushes its tasks to it directly
// until it returns the lease; each actor gets a worker of its own for its lifetime. What
// the node can never place, or (in a cluster) cannot place now, goes to the head. Plain
// logic behind `handle`; a CAF actor runs it (one message at a time, so no locks).
//
// As the head, a router over managers that each own their state and their handlers:
//   worker_pool      the worker slots: starting, lending, taking back, retiring workers, and
//                    worker_ready, worker_died, worker_blocked, worker_unblocked,
//                    actor_exited, return_lease, package_data;
//   local_scheduler  the waiting work, dispatch onto the pool's workers, preemption, the
//                    requests spilled to the head, and request_lease, start_actor,
//                    cancel_lease_requests, kill_actor, preempt_ready, return_bundles;
// and the pieces they share, which the agent owns: node_room (free resources, devices,
// bundles), node_guard (what a job may touch, the refusals' log), package_fetcher (jobs'
// working directories); its own: gpu_monitor, node_store (the object store service, whose
// messages the agent forwards), head_watch. What stays here is what no manager owns:
// routing, registering with the head and watching it, the tick and its heartbeat, bundles
// reserved, and what several managers react to, called in this order:
//   job_finished     the pool marks the job finished (its lent workers retire when they
//                    come back), the transport lets its connections go, the scheduler
//                    withdraws its leases and requests (taking back its workers), the pool
//                    retires its idle workers, then the store, the packages, the launcher;
//   node_died        another node's: the store fails its pulls from it; this node's (the
//                    head declared it dead): as shutdown_component, then head_lost;
//   shutdown_component  the scheduler drops its waiting work and takes no more, the pool
//                    tells every worker to stop;
//   unsubscribe_cluster  (a process went) the scheduler withdraws its leases, the store
//                    drops its mappings and frees the objects it owned;
//   tick             the store's stuck pulls, the scheduler's spilled requests and preempted
//                    actors past their grace, the pool's workers that never started, the
//                    memory monitor (memory_monitor.hpp), then the heartbeat.

#include "node/gpu_monitor.hpp"
#include "node/local_scheduler.hpp"
#include "node/memory_monitor.hpp"
#include "node/node_guard.hpp"
#include "node/node_room.hpp"
#include "node/node_store.hpp"
#include "node/package_fetcher.hpp"
#include "node/worker_pool.hpp"
#include "protocol/head_watch.hpp"
#include "protocol/messages.hpp"
#include "transport/transport.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace celer {

class node_agent {
public:
  struct config {
    node_id id;
    address self;
    address head;
    protocol::resource_set total;
    std::map<std::string, std::string> labels;
    /// The node's GPUs (total's "GPU" counts them).
    std::vector<gpu::device> gpus;
    /// How its launcher confines jobs' processes (told to the head for `celer status`).
    std::string isolation;
    /// Idle task workers kept for reuse.
    int max_idle_workers = 4;
    /// Cluster mode: work that cannot start here now goes to the head's scheduler.
    bool spill_to_head = false;
    /// A worker process that has not said worker_ready after this long is killed (checked
    /// on each tick); zero never kills one.
    std::chrono::milliseconds worker_start_timeout{0};
    /// The node's object store (capacity zero: none; store requests are refused).
    std::size_t store_capacity = 0;
    std::string store_dir;
    bool store_spill = true;
    /// Cluster mode with encryption: the lane pulled chunks travel on, sealed
    /// (node_store::config::lane); it outlives the agent. Null: none.
    bulk_lane* lane = nullptr;
    /// Where jobs' working directories (task_spec::package) are unpacked, one folder per
    /// digest, fetched from the head before a worker of the job starts here (the process
    /// launcher's packages_dir). Empty: work naming a package starts without it.
    std::filesystem::path packages_dir;
    /// How long a preempted actor has to checkpoint when its options name no grace.
    std::chrono::milliseconds preemption_grace{30000};
    /// The memory monitor's threshold (1 or more: off) and the workers' memory it holds
    /// them to (0: the machine's or the cgroup's); memory_monitor.hpp.
    double memory_threshold = 1.0;
    std::uint64_t memory_limit_bytes = 0;
    /// Cluster mode: the node probes the head on its ticks. Silent for
    /// `head_missing_after`, it says so in its log (once); silent for `head_timeout`, it
    /// stops its workers and calls `head_lost` with why (the daemon then exits). Zero
    /// durations: no probes.
    std::chrono::milliseconds head_missing_after{0};
    std::chrono::milliseconds head_timeout{0};
    std::function<void(const std::string&)> head_lost;
    // The same callback is called, with why, when the head says it declared this node
    // dead (a node_died naming it): the node leaves rather than run work owners gave up on.
    /// The clock the head probes, the store's pull expiry, workers' start timeouts,
    /// preemption deadlines and how long work has waited are timed by (tests pass a
    /// made-up one).
    std::function<std::chrono::steady_clock::time_point()> now = [] {
      return std::chrono::steady_clock::now();
    };
  };
  /// Throws celer::exception when the object store cannot be opened.
  node_agent(transport& net, worker_launcher& launcher, config cfg);

  /// Registers with the head.
  void start();
  void handle(protocol::message& m);

  [[nodiscard]] const protocol::resource_set& available() const noexcept { return room_.available(); }
  [[nodiscard]] std::size_t queued() const noexcept { return scheduler_.queued(); }
  [[nodiscard]] std::size_t workers() const noexcept { return pool_.size(); }
  /// The object store (null when the node has none).
  [[nodiscard]] const node_store* objects() const noexcept { return store_.get(); }

private:
  // Handlers of what no manager owns (the pool's and the scheduler's are theirs).
  void on(protocol::unsubscribe_cluster& m);
  void on(protocol::resource_query& m);
  void on(protocol::shutdown_component& m);
  void on(protocol::tick& m);
  void on(protocol::job_finished& m);
  void on(protocol::node_died& m);
  void on(protocol::reserve_bundle& m);
  void on(protocol::gpu_usage& m);
  void on(protocol::lookup_actor_reply& m);
  void on(protocol::head_restarted& m);
  /// store_create, store_seal, store_get, store_release, store_free, store_pull, store_chunk,
  /// store_stats_query: the store's, or refused when the node has none.
  template <class M>
    requires requires(node_store& s, M& m) { s.on(m); }
  void on(M& m);
  /// Sends register_node to the head.
  void register_with_head();
  /// Probes the head (cluster mode); false once it has given up on it and stopped.
  bool watch_head();

  transport& net_;
  worker_launcher& launcher_;
  config cfg_;
  // The pieces and managers, in the order they are made (each uses those before it).
  /// Its free resources and devices, and the placement group bundles reserved here.
  node_room room_;
  /// Its GPUs' monitoring, for the heartbeat.
  gpu_monitor gpu_monitor_;
  /// Kills a worker when the node runs short of memory (on each tick).
  memory_monitor memory_;
  /// What a job's message is checked against, and the refusals' log (the managers share it).
  node_guard guard_;
  /// Jobs' working directories: fetched from the head, unpacked, bound to their jobs.
  package_fetcher packages_;
  /// Its workers.
  worker_pool pool_;
  /// The work waiting here, its dispatch onto the pool's workers, preemption.
  local_scheduler scheduler_;
  /// Set once the head said it declared this node dead: the node is leaving.
  bool declared_dead_ = false;
  /// Set at shutdown_component (or when the head is lost, or declared it dead).
  bool stopping_ = false;
  std::unique_ptr<node_store> store_;
  std::optional<head_watch> head_watch_;
};

} // namespace celer
