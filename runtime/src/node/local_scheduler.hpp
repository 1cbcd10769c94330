#pragma once
// A node's local scheduler: the lease requests (for tasks) and actor starts that came to
// this node, and which of them start, when and on which worker. A request is checked
// (admissible: valid amounts, its own job's bundle), sent on to the head's scheduler when
// this node can never run it or (in a cluster) the head should choose, or queued by shape
// and priority (scheduling::shape_queues); dispatch() starts the head of each shape while
// its shape fits the node's free room (or its bundle's), on a worker the pool lends, and
// preempts actors that opted in (lower priority, newest first) when higher-priority work
// cannot fit otherwise.
//
//   local_scheduler scheduler(net, pool, room, guard, cfg);  // after the pool: it listens to it
//   scheduler.on(request_lease), on(start_actor), on(cancel_lease_requests), on(kill_actor),
//   scheduler.on(preempt_ready), on(return_bundles)
//   scheduler.withdraw_leases(match)       // a job ended, a process went
//   scheduler.tick(now); scheduler.report(heartbeat, now)
//
// One of the node agent's managers: it owns the waiting work, the requests it spilled to
// the head (spilled_requests, resent when the head restarts) and the preemption of actors.
// The workers are the pool's (worker_pool.hpp): it lends them through the pool, reads and
// marks their slots (a preempted actor's deadline), and dispatches again when the pool says
// that resources came back. Threads: the agent's (one message at a time).

#include "node/node_guard.hpp"
#include "node/node_room.hpp"
#include "node/spilled_requests.hpp"
#include "node/worker_pool.hpp"
#include "protocol/messages.hpp"
#include "scheduler/device_pool.hpp"
#include "scheduler/shape_queues.hpp"
#include "transport/transport.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_set>

namespace celer {

class local_scheduler {
public:
  using time_point = std::chrono::steady_clock::time_point;
  struct config {
    node_id id;
    address head;
    /// What the node has and its labels (whether it could ever run a request).
    protocol::resource_set total;
    std::map<std::string, std::string> labels;
    /// Cluster mode: work that cannot start here now goes to the head's scheduler.
    bool spill_to_head = false;
    /// How long a preempted actor has to checkpoint when its options name no grace.
    std::chrono::milliseconds preemption_grace{30000};
    /// When work was queued and when a preempted actor's grace ends are timed by it.
    std::function<time_point()> now = [] { return std::chrono::steady_clock::now(); };
    /// Cluster mode: a lease request the head placed here that has found no room for this
    /// long goes back to the head once (lease_respill_ms; 0: never).
    std::chrono::milliseconds respill_after{1000};
  };
  /// The pool, the room and the guard are the agent's and outlive the scheduler; it
  /// listens to the pool's when_room_frees.
  local_scheduler(transport& net, worker_pool& pool, node_room& room, node_guard& guard, config cfg);

  void on(protocol::request_lease& m);
  void on(protocol::start_actor& m);
  void on(protocol::cancel_lease_requests& m);
  void on(protocol::kill_actor& m);
  void on(protocol::preempt_ready& m);
  /// Waiting work in the bundles fails, running work is stopped, the bundles go back to the
  /// node's room.
  void on(protocol::return_bundles& m);

  /// Drops the queued lease requests that `match` (owner, request, job) picks, forgets
  /// those spilled to the head, and takes back the workers started or lent for such
  /// requests; returns how many it found here.
  std::size_t withdraw_leases(const worker_pool::lease_match& match);
  /// Each tick: spilled requests expire; preempted actors whose grace ended are stopped;
  /// lease requests the head placed here that found no room within respill_after go back
  /// to the head once. The head chose this node by its view of the cluster, which lags
  /// the nodes' heartbeats: a node it thought free may be busy for as long as its work
  /// runs, while another has room. Sent again, the head places the request by what it knows
  /// then; one that comes back stays here.
  void tick(time_point now);
  /// The head restarted: what was spilled to it is sent again.
  void resend_spilled();
  [[nodiscard]] std::size_t spilled() const noexcept { return spilled_.size(); }
  /// The node is stopping: the waiting work is dropped and no more is taken.
  void stop();
  /// What waits here (how much, the oldest requests, the actors being preempted), for the
  /// heartbeat.
  void report(protocol::heartbeat& h, time_point now) const;
  [[nodiscard]] std::size_t queued() const noexcept { return queues_.size(); }

private:
  /// Whether a request of a job (`sender`: nil for the head and nodes) may be queued here:
  /// its amounts are valid (protocol::validate_amounts) and the bundle it names, if
  /// reserved here, is its job's. Refuses it otherwise (logged, rate-limited).
  bool admissible(const protocol::task_spec& spec);
  /// Why this node could never run `spec` ("" when it could some day).
  [[nodiscard]] std::string never_here(const protocol::task_spec& spec) const;
  /// Whether the head's scheduler should choose where `m` runs rather than this node.
  [[nodiscard]] bool head_should_place(const protocol::request_lease& m) const;
  /// Sends `m` to the head's scheduler and remembers it a while (see spilled_).
  void spill(protocol::request_lease m);
  /// Whether a request with this id is queued here or has a worker started or lent for it
  /// (a resend of a request the node already holds).
  [[nodiscard]] bool holds_request(const task_id& request) const;
  /// Whether this start of `actor` (or a later one) is queued or running here (a resend
  /// by a head that restarted while it was being started).
  [[nodiscard]] bool holds_actor(const actor_id& actor, std::uint32_t restarts) const;
  void enqueue(protocol::task_spec spec);
  /// Fails a queued request that cannot be served here any more (`code`: why it fails;
  /// resource_exhausted, or permission_denied and invalid_argument for a refused request).
  void refuse(const protocol::task_spec& spec, const std::string& why,
              error_code code = error_code::resource_exhausted);
  /// Sends back to the head the lease requests waiting here past respill_after (tick).
  void respill(time_point now);
  /// Starts the waiting work that fits, shape by shape, highest priority first.
  void dispatch();
  /// The head of `q` does not fit. `room` (and `room_devices`) is what will be free once
  /// the actors already being preempted stop, less what is held for earlier requests. If
  /// that is not enough, stops preemptible actors of lower priority that make it enough
  /// (lowest priority first, then the newest) and adds what they hold. True when `room`
  /// now has room for it (dispatch then holds that for it).
  bool preempt_for(const scheduling::shape_queues::shape& q, protocol::resource_set& room,
                   scheduling::device_pool& room_devices);
  /// Tells the actor of worker `id` it is preempted (`why`), with its grace to checkpoint.
  void start_preemption(const worker_id& id, worker_slot& w, const std::string& why);
  /// The preempted actor's time is up (or it is ready): the head learns why, the worker stops.
  void stop_preempted(const worker_id& id, worker_slot& w);

  transport& net_;
  worker_pool& pool_;
  node_room& room_;
  node_guard& guard_;
  config cfg_;
  /// Work waiting here, by resource shape.
  scheduling::shape_queues queues_;
  /// Lease requests this node spilled to the head lately (resent if the head restarts).
  spilled_requests spilled_;
  /// Requests sent back to the head once (by tick): one the head places here again stays.
  /// Forgotten once neither on its way to the head nor queued here (checked each tick).
  std::unordered_set<task_id> respilled_;
  /// Set by stop(): the node is leaving, no work is taken.
  bool stopped_ = false;
};

} // namespace celer
