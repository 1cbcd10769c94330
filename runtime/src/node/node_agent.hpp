#pragma once
// The node agent: the node's resources, its worker pool and local dispatch. Lease requests
// (for tasks) and actors wait in a queue until their resources are free; a lease lends an
// idle worker (or a new one) to the owner that asked, which pushes its tasks to it directly
// until it returns the lease; each actor gets a worker of its own for its lifetime. What
// the node can never place, or (in a cluster) cannot place now, goes to the head. Plain
// logic behind `handle`; a CAF actor runs it (one message at a time).
//
// The workers themselves are the worker pool's (worker_pool.hpp: their slots, starting,
// lending, taking back, their exits); the agent routes the pool's messages to it.

#include "node/gpu_monitor.hpp"
#include "node/node_guard.hpp"
#include "node/node_room.hpp"
#include "node/node_store.hpp"
#include "node/package_fetcher.hpp"
#include "node/spilled_requests.hpp"
#include "node/worker_pool.hpp"
#include "protocol/head_watch.hpp"
#include "protocol/messages.hpp"
#include "scheduler/device_pool.hpp"
#include "scheduler/shape_queues.hpp"
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
  [[nodiscard]] std::size_t queued() const noexcept { return queues_.size(); }
  [[nodiscard]] std::size_t workers() const noexcept { return pool_.size(); }
  /// The object store (null when the node has none).
  [[nodiscard]] const node_store* objects() const noexcept { return store_.get(); }

private:
  void on(protocol::request_lease& m);
  void on(protocol::start_actor& m);
  void on(protocol::cancel_lease_requests& m);
  void on(protocol::unsubscribe_cluster& m);
  void on(protocol::kill_actor& m);
  void on(protocol::resource_query& m);
  void on(protocol::shutdown_component& m);
  void on(protocol::tick& m);
  void on(protocol::job_finished& m);
  void on(protocol::node_died& m);
  void on(protocol::reserve_bundle& m);
  void on(protocol::gpu_usage& m);
  void on(protocol::return_bundles& m);
  void on(protocol::preempt_ready& m);
  void on(protocol::lookup_actor_reply& m);
  void on(protocol::head_restarted& m);
  /// Sends register_node to the head.
  void register_with_head();
  /// Sends `m` to the head's scheduler and remembers it a while (see spilled_).
  void spill(protocol::request_lease m);
  /// Whether a request with this id is queued here or has a worker started or lent for it
  /// (a resend of a request the node already holds).
  [[nodiscard]] bool holds_request(const task_id& request) const;
  /// Whether this start of `actor` (or a later one) is queued or running here (a resend
  /// by a head that restarted while it was being started).
  [[nodiscard]] bool holds_actor(const actor_id& actor, std::uint32_t restarts) const;
  /// Probes the head (cluster mode); false once it has given up on it and stopped.
  bool watch_head();
  /// Fails a queued request that cannot be served here any more (`code`: why it fails;
  /// resource_exhausted, or permission_denied and invalid_argument for a refused request).
  void refuse(const protocol::task_spec& spec, const std::string& why,
              error_code code = error_code::resource_exhausted);
  /// Whether a request of a job (`sender`: nil for the head and nodes) may be queued here:
  /// its amounts are valid (protocol::validate_amounts) and the bundle it names, if
  /// reserved here, is its job's. Refuses it otherwise (logged, rate-limited).
  bool admissible(const protocol::task_spec& spec);
  /// store_create, store_seal, store_get, store_release, store_free, store_pull, store_chunk.
  template <class M>
    requires requires(node_store& s, M& m) { s.on(m); }
  void on(M& m);
  void dispatch();
  /// Tells the actor of worker `id` it is preempted (`why`), with its grace to checkpoint.
  void start_preemption(const worker_id& id, worker_slot& w, const std::string& why);
  /// The preempted actor's time is up (or it is ready): the head learns why, the worker stops.
  void stop_preempted(const worker_id& id, worker_slot& w);
  /// Whether this node could run `m` some day, and should decide it here rather than
  /// leave the choice to the head's scheduler.
  [[nodiscard]] std::string never_here(const protocol::task_spec& spec) const;
  [[nodiscard]] bool head_should_place(const protocol::request_lease& m) const;
  /// Drops the queued lease requests that `match` (owner, request, job) picks and takes
  /// back the workers started or lent for such requests; returns how many it found.
  std::size_t withdraw_leases(const worker_pool::lease_match& match);
  void enqueue(protocol::task_spec spec);
  /// The head of `q` does not fit. `room` (and `room_devices`) is what will be free once
  /// the actors already being preempted stop, less what is held for earlier requests. If
  /// that is not enough, stops preemptible actors of lower priority that make it enough
  /// (lowest priority first, then the newest) and adds what they hold. True when `room`
  /// now has room for it (dispatch then holds that for it).
  bool preempt_for(const scheduling::shape_queues::shape& q, protocol::resource_set& room,
                   scheduling::device_pool& room_devices);

  transport& net_;
  worker_launcher& launcher_;
  config cfg_;
  /// Its free resources and devices, and the placement group bundles reserved here.
  node_room room_;
  /// Its GPUs' monitoring, for the heartbeat.
  gpu_monitor gpu_monitor_;
  /// What a job's message is checked against, and the refusals' log (shared with the pool).
  node_guard guard_;
  /// Jobs' working directories: fetched from the head, unpacked, bound to their jobs.
  package_fetcher packages_;
  /// Its workers (after the room, the packages and the guard, which it uses).
  worker_pool pool_;
  /// Work waiting here, by resource shape (the local scheduler's queues).
  scheduling::shape_queues queues_;
  /// Set once the head said it declared this node dead: the node is leaving.
  bool declared_dead_ = false;
  bool stopping_ = false;
  std::unique_ptr<node_store> store_;
  std::optional<head_watch> head_watch_;
  /// Lease requests this node spilled to the head lately (resent if the head restarts).
  spilled_requests spilled_;
};

} // namespace celer
