#pragma once
// A node's worker pool: a slot for each worker it started (a thread in embedded mode, a
// process in cluster mode), what the worker holds and for whom, and its life: started for
// work (an idle worker of the same job that sees the same GPUs and has the same env_vars is
// reused, else a new one starts, once its job's working directory is here if it names one),
// lent to a task owner until the lease comes back or kept by its actor for the actor's
// lifetime, blocked in get (its CPUs lent to other work meanwhile), taken back into the pool
// or retired, and what its owner or the head is told when it exits or dies.
//
//   worker_pool pool(net, launcher, room, packages, guard, cfg);
//   pool.when_room_frees([&] { dispatch(); });   // the local scheduler's, once
//   pool.lend(spec, shares, in_bundle, grace);   // the work goes now, or once it is ready
//   pool.take_back_if(match);                    // leases withdrawn (cancelled, job ended)
//   pool.on(worker_ready), on(worker_died), on(return_lease), on(worker_blocked), ...
//
// Which waiting work starts, and which actors are preempted to make room for it, is the
// local scheduler's (local_scheduler.hpp): it lends workers through lend(), reads the slots
// (find, for_each, any_of) and marks those it preempts, and hears from when_room_frees()
// that a worker gave resources back (a lease returned, a worker blocked, exited or died).
//
// One of the node agent's managers: it owns the slots, the idle list, the endpoints of
// workers told to stop whose process has not exited, those forgotten while they started,
// and the finished jobs (whose lent workers retire when they come back); what a worker
// gives back goes to the node's room (node_room). Threads: the agent's (one message at a
// time).

#include "node/node_guard.hpp"
#include "node/node_room.hpp"
#include "node/package_fetcher.hpp"
#include "protocol/messages.hpp"
#include "transport/transport.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace celer {

/// Starts and stops workers: threads in embedded mode, processes in cluster mode.
class worker_launcher {
public:
  struct launched {
    address addr;
    /// False when the worker announces itself later with worker_ready (a process).
    bool ready = true;
  };
  virtual ~worker_launcher() = default;
  /// Starts a worker with id `id` for the job of `first`, the work it will run first; it
  /// sees only the GPUs `gpus` (device indices; CUDA_VISIBLE_DEVICES for a process).
  virtual launched launch(const worker_id& id, const protocol::task_spec& first,
                          const std::vector<int>& gpus) = 0;
  /// Stops the worker hosting `actor` now (a process is killed; a thread is asked).
  virtual void terminate(const worker_id& id, const address& addr, const actor_id& actor) = 0;
  /// The job ended: what the launcher holds for it on this machine may go.
  virtual void job_finished(const job_id& job) { (void)job; }
  /// The process id of worker `id`; nullopt for a thread, or a process gone.
  [[nodiscard]] virtual std::optional<int> pid_of(const worker_id& id) const {
    (void)id;
    return std::nullopt;
  }
  /// Hands a preemption notice to the worker hosting its actor in this process, beside any
  /// call it is running; false when the worker is elsewhere (the node sends the notice).
  virtual bool preempt(const worker_id& id, const protocol::preempt_actor& notice) {
    (void)id;
    (void)notice;
    return false;
  }
};

/// One worker of the pool, as the pool and the local scheduler see it.
struct worker_slot {
  address addr;
  /// False until a worker process says worker_ready; `pending` waits for it.
  bool ready = true;
  std::optional<protocol::task_spec> pending;
  /// The lease request it is lent for (while lent to a task owner).
  task_id lease_request;
  std::chrono::steady_clock::time_point started;
  /// Why the node killed it, if it did (reported instead of the bare signal).
  std::string kill_reason;
  /// Not started yet: the job's working directory with this digest is being fetched.
  std::string awaits_package;
  job_id job;
  /// Who leased it (or created its actor), and the function it was leased for.
  address owner;
  std::string function;
  bool busy = false;
  bool blocked = false;
  bool actor_worker = false;
  actor_id actor;
  /// Which start of its actor this is (the spec's restarts).
  std::uint32_t restarts = 0;
  /// What the worker holds now (its CPUs drop out while it is blocked in get).
  protocol::resource_set held;
  /// What its task or actor asked for.
  protocol::resource_set granted;
  /// The GPU shares it holds now, and the devices it was started to see (a process
  /// cannot change CUDA_VISIBLE_DEVICES later, so it is reused only for the same ones).
  std::vector<protocol::gpu_share> gpus;
  std::vector<int> visible;
  /// The environment variables its process was started with (task_spec::env_vars): it is
  /// reused only for work with the same ones.
  std::map<std::string, std::string> env_vars;
  /// The placement group bundle whose resources it holds (group nil: the node's).
  protocol::placement in_bundle;
  /// Its work's priority; an actor that opted in may be preempted for higher-priority
  /// work, with `grace` to checkpoint. Once told, it is stopped by `preempt_deadline`
  /// (the local scheduler's marks).
  std::int32_t priority = 0;
  bool preemptible = false;
  std::chrono::milliseconds grace{0};
  std::optional<std::chrono::steady_clock::time_point> preempt_deadline;
  bool preempt_stopped = false;
  /// What the head hears once its actor's worker is gone, instead of a bare death: set
  /// when celer::kill with no_restart = false stopped it (a death, so the actor restarts)
  /// or when the actor ended itself (celer::exit_actor: for good).
  std::optional<protocol::failure_info> report_on_exit;
  /// When it was last lent (or given its actor), and whether what it runs is retried if it
  /// dies (a task with retries left, an actor with restarts): the memory monitor kills the
  /// newest retriable work first.
  std::chrono::steady_clock::time_point lent_at;
  bool retriable = false;
};

class worker_pool {
public:
  using time_point = std::chrono::steady_clock::time_point;
  struct config {
    node_id node;
    /// The node's address (in the leases it grants) and its head's.
    address self;
    address head;
    /// Idle task workers kept for reuse.
    int max_idle_workers = 4;
    /// Cluster mode: a worker process's endpoint is forgotten (at the head, and by the
    /// transport once the process exited) when it goes.
    bool spill_to_head = false;
    /// A worker process that has not said worker_ready after this long is killed
    /// (kill_slow_starts); zero never kills one.
    std::chrono::milliseconds start_timeout{0};
    /// When a worker started (the start timeout and the preemption order are timed by it).
    std::function<time_point()> now = [] { return std::chrono::steady_clock::now(); };
  };
  /// The room, the packages and the guard are the agent's and outlive the pool.
  worker_pool(transport& net, worker_launcher& launcher, node_room& room, package_fetcher& packages,
              node_guard& guard, config cfg);

  /// `f` runs each time a worker gave resources back to the room outside a lend (a lease
  /// returned or taken back, a worker blocked in get, an actor exited, a worker died): the
  /// local scheduler dispatches then. One listener.
  void when_room_frees(std::function<void()> f) { room_freed_ = std::move(f); }

  void on(protocol::worker_ready& m);
  void on(protocol::worker_died& m);
  void on(protocol::worker_blocked& m);
  void on(protocol::worker_unblocked& m);
  void on(protocol::actor_exited& m);
  void on(protocol::return_lease& m);
  void on(protocol::package_data& m);

  // What the local scheduler uses.

  /// Starts `spec` on a worker: for a task, the most recently idle worker of its job that
  /// sees the devices of `gpus`, else (and for an actor) a new one. The slot records what
  /// it holds (`spec.resources`, already taken from the room by the caller, `gpus`, the
  /// bundle `in_bundle`) and the preemption `grace`; a lease goes to the owner, an actor's
  /// creation to the worker, now or once the worker is ready. Its id.
  worker_id lend(protocol::task_spec spec, std::vector<protocol::gpu_share> gpus,
                 const protocol::placement& in_bundle, std::chrono::milliseconds grace);
  /// Takes back the workers lent (or still starting) for the leases `match` picks (owner,
  /// request, job): into the pool, or retired; how many.
  using lease_match = std::function<bool(const address&, const task_id&, const job_id&)>;
  std::size_t take_back_if(const lease_match& match);
  /// Worker `id`, or null.
  [[nodiscard]] worker_slot* find(const worker_id& id);
  /// The worker `id` names, if it is here and `sender` may speak for it (a message from a
  /// worker about itself: `what` names the message, for the log); null otherwise.
  [[nodiscard]] worker_slot* of_sender(const worker_id& id, const job_id& sender, const char* what);
  /// The worker hosting `actor` (any start of it), or null.
  [[nodiscard]] std::pair<const worker_id, worker_slot>* host_of(const actor_id& actor);
  /// Calls `f(id, slot)` for each worker. `f` may mark slots; it must not lend, retire or
  /// take back workers.
  template <class F>
  void for_each(F&& f) {
    for (auto& [id, w] : workers_) f(id, w);
  }
  template <class F>
  void for_each(F&& f) const {
    for (const auto& [id, w] : workers_) f(id, w);
  }
  template <class F>
  [[nodiscard]] bool any_of(F&& f) const {
    return std::any_of(workers_.begin(), workers_.end(), [&](const auto& e) { return f(e.first, e.second); });
  }
  /// Stops worker `w` now (its process is killed); its exit frees what it holds.
  void terminate(const worker_id& id, const worker_slot& w);
  /// Hands `notice` to worker `w`'s actor (in this process, through the launcher, or sent).
  void tell_preempted(const worker_id& id, const worker_slot& w, protocol::preempt_actor notice);
  /// Stops the work running in bundle `key` (given back) for `why`; what it held goes back
  /// with the bundle.
  void stop_in_bundle(const node_room::bundle_key& key, const std::string& why);

  // What the agent uses.

  /// Job `job` finished: its workers lent out retire when they come back.
  void job_finished(const job_id& job) { finished_jobs_.insert(job); }
  /// Retires the idle workers of `job`.
  void retire_idle(const job_id& job);
  /// Kills the worker processes that did not start within start_timeout (before `now`), and
  /// fails those still waiting for their job's working directory.
  void kill_slow_starts(time_point now);
  /// Tells every worker `m` (the node is stopping) and forgets them all.
  void stop_all(const protocol::shutdown_component& m);
  /// Whether a worker of `job` here sees GPU `index`.
  [[nodiscard]] bool sees(const job_id& job, int index) const;
  /// The workers' count and endpoints, for the heartbeat.
  void report(protocol::heartbeat& h) const;
  /// A line for each worker, for the debug log.
  [[nodiscard]] std::string describe() const;
  [[nodiscard]] std::size_t size() const noexcept { return workers_.size(); }

private:
  worker_id take_worker(const protocol::task_spec& spec, const std::vector<int>& gpus);
  /// Sends `spec` to worker `id` (or keeps it in `pending` until the worker is ready).
  void send_work(const worker_id& id, worker_slot& w, protocol::task_spec spec);
  /// Gives what `w` holds back to the room (or its bundle) and marks it free.
  void release(worker_slot& w);
  /// Takes back a lent worker: into the pool, or retired.
  void reclaim(const worker_id& id, worker_slot& w);
  /// Stops an idle or finished worker and forgets it.
  void retire(const worker_id& id, const std::string& why);
  /// Tells the head that a worker process's endpoint is going (cluster mode), and drops the
  /// connection to it once the process has `exited`.
  void forget_endpoint(const worker_id& id, const address& worker, bool exited);
  /// Fails worker `id`, which waited for its job's working directory, with `why` (as if
  /// its process had died: its lease request or actor fails).
  void fail_package_wait(const worker_id& id, const std::string& why);
  void room_freed() const {
    if (room_freed_) room_freed_();
  }

  transport& net_;
  worker_launcher& launcher_;
  node_room& room_;
  package_fetcher& packages_;
  node_guard& guard_;
  config cfg_;
  std::function<void()> room_freed_;
  std::unordered_map<worker_id, worker_slot> workers_;
  /// Workers back in the pool, the most recently idle last.
  std::vector<worker_id> idle_;
  /// Workers told to stop whose process has not exited yet: their endpoints.
  std::unordered_map<worker_id, std::string> exiting_;
  /// Actors whose worker process said actor_exited with a report (worker_slot::
  /// report_on_exit): the head hears it once the process is gone (worker_died), when
  /// everything the worker sent before has left it (its last results first).
  std::unordered_map<worker_id, std::pair<actor_id, protocol::failure_info>> exit_reports_;
  /// Workers forgotten before their process said worker_ready, and their jobs: told to stop
  /// when it does (on their job's word only), dropped when it exits.
  std::unordered_map<worker_id, job_id> starting_forgotten_;
  std::unordered_set<job_id> finished_jobs_;
};

} // namespace celer
