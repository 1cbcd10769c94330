#pragma once
// The per-process core: what the API calls into. It owns the objects this process's calls
// create (an in-memory table of values and failures), runs tasks on workers it leases from
// nodes (Ray's lease design: tasks wait here by resource shape, the local node grants a
// worker or spills the request to the head, and tasks are pushed straight to leased
// workers), sends actor calls straight to the actor's worker, and answers other processes
// asking for objects it owns. One per process: the driver's in embedded mode (shared by its worker
// threads), each worker process's in cluster mode.
//
// Threads: user threads (driver, worker threads running user code) call the public
// methods; `handle` runs on the core's CAF actor. Both take mutex_, which guards the
// core's own tables; the pieces it delegates to guard theirs: requests_ (requests awaiting
// replies), head_ (queries to the head) and store_ (the node's object store).

#include "core/head_client.hpp"
#include "core/request_table.hpp"
#include "core/store_client.hpp"
#include "protocol/messages.hpp"
#include "transport/transport.hpp"

#include <celer/api.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace celer {

/// Per-thread facts about the worker running user code on this thread (null on the driver).
struct worker_context {
  worker_id worker;
  address node;
  /// Set when the call running on this thread waits in get or wait.
  bool blocked = false;
  /// The GPUs (device indices) the worker was given.
  std::vector<int> gpu_ids;
  /// The actor it hosts (nil for task workers), and the priority of the work it runs.
  actor_id actor;
  std::int32_t priority = 0;
  /// How many times the actor it hosts was started again after dying (celer::was_restarted).
  std::uint32_t restarts = 0;
};
worker_context*& current_worker_context() noexcept;

class core_worker {
public:
  struct endpoints {
    address self;
    address node;
    address head;
    celer::node_id this_node;
    /// The job this process's calls belong to, and (cluster mode) the binary its workers run.
    job_id job;
    std::string binary;
    /// Cluster mode: resource questions go to the head.
    bool cluster = false;
    /// The job's priority (init_options::priority): work submitted without one gets it.
    std::int32_t priority = 0;
    /// The clock requests are timed by (tests pass a made-up one).
    request_table::clock now = [] { return std::chrono::steady_clock::now(); };
  };
  core_worker(transport& net, endpoints where);
  ~core_worker();
  core_worker(const core_worker&) = delete;
  core_worker& operator=(const core_worker&) = delete;

  [[nodiscard]] const address& self() const noexcept { return where_.self; }
  [[nodiscard]] const endpoints& where() const noexcept { return where_; }

  object_ref<void> submit_task(const detail::remote_entry& fn, std::vector<detail::arg_spec> args,
                               const task_options& options);
  object_ref<void> put(std::string payload);
  /// Puts a value of `size` packed bytes (starting with byte `first`) into this node's
  /// object store; `write` packs it into the store's memory. Throws celer::exception
  /// (resource_exhausted, ...) when the store refuses it.
  object_ref<void> put_stored(std::size_t size, unsigned char first, bool durable,
                              const std::function<void(char*)>& write);
  /// Writes a value into this node's object store for `owner`, as object `id`; returns the
  /// payload that points at it, or the failure (not ok). Does not take mutex_
  /// (store_client::store_value).
  protocol::object_payload store_value(const object_id& id, std::size_t size, unsigned char first,
                                       bool durable, const address& owner, const job_id& job,
                                       const std::function<void(char*)>& write);
  /// Marks a ref to an object this process owns as serialised, where its holders cannot
  /// be counted: the object is kept until the job ends (see object_ref).
  void escaped(const object_id& id);
  /// How many objects this process owns now (tests, metrics).
  [[nodiscard]] std::size_t owned_objects() const;
  std::vector<detail::fetched> fetch(const std::vector<object_ref<void>>& refs,
                                     detail::timeout_t timeout);
  std::vector<std::size_t> wait_ready(const std::vector<object_ref<void>>& refs,
                                      std::size_t num_returns, detail::timeout_t timeout);
  actor_id create_actor(const detail::remote_entry& factory, std::vector<detail::arg_spec> args,
                        const actor_options& options);
  object_ref<void> submit_actor_call(const actor_id& actor, const detail::remote_entry& method,
                                     std::vector<detail::arg_spec> args);
  actor_id find_named_actor(std::string_view name, std::string_view class_type);
  void kill_actor(const actor_id& actor);
  protocol::resource_reply query_resources();
  /// The cluster's state, from the head.
  protocol::status_reply query_status();
  /// Why the task returning `id` (owned here) or the actor `actor` has not started; ""
  /// once it runs.
  std::string pending_reason(const object_id& id);
  std::string pending_reason(const actor_id& actor);
  /// Placement groups: asks the head to reserve the bundles (throws when they can never
  /// be placed), waits until it has, removes them, lists them.
  placement_group_id create_placement_group(const placement_group_options& options);
  bool placement_group_ready(const placement_group_id& id, std::chrono::milliseconds timeout);
  void remove_placement_group(const placement_group_id& id);
  std::vector<protocol::placement_group_info> query_placement_groups(const placement_group_id& id);
  /// Tells the node how busy the calling work's GPUs are.
  void report_gpu_usage(const std::vector<int>& devices, double utilisation,
                        std::uint64_t memory_used_bytes);
  /// This node's object store in numbers.
  protocol::store_counters query_store_stats();
  /// Sets the node tasks are submitted to (a cluster driver learns it after connecting;
  /// call before any task is submitted).
  void attach_node(address node, node_id id);

  /// Handles a message addressed to this core (on the core's actor, or on the transport's
  /// receiver thread).
  void handle(protocol::message& m);
  /// Fails every wait and every request from now on with `reason`, and returns every
  /// leased worker (at shutdown). With `code` (the cluster is gone: unavailable), they
  /// and every later call fail with that code and `reason` as the message. The first
  /// stop's reason stands.
  void stop(const std::string& reason, std::optional<error_code> code = std::nullopt);

private:
  struct object_entry {
    bool ready = false;
    bool fetch_sent = false;
    protocol::object_payload value;
    /// Borrowers waiting for the value (owned objects only).
    std::vector<address> remote_waiters;
    /// Owned objects: freed when no handle holds them, no pending task takes them, and no
    /// ref to them has escaped this process.
    bool owned = false;
    bool escaped = false;
    int holders = 0;
    int task_uses = 0;
    /// Stored objects: other nodes that pulled a copy (freed with the object).
    std::vector<address> copies;
  };
  /// Lets handles outlive the core: they reach it through this while it lives.
  struct link {
    std::mutex m;
    core_worker* core = nullptr;
  };
  struct actor_entry {
    protocol::actor_state state = protocol::actor_state::pending;
    address worker;
    protocol::failure_info fail;
    bool subscribed = false;
    /// Calls made before the actor's address was known, in submission order.
    std::deque<protocol::task_spec> queued;
    /// Calls sent and not yet answered.
    std::unordered_set<task_id> in_flight;
    /// With max_task_retries: the calls sent and not yet answered, in order (sent again,
    /// first, once the actor has restarted), and how often each was sent again.
    std::int32_t max_task_retries = 0;
    std::deque<protocol::task_spec> unanswered;
    std::unordered_map<task_id, std::int32_t> resent;
  };

  /// Tasks of one resource shape (Ray's scheduling class) waiting for a leased worker.
  struct task_class {
    protocol::resource_set shape;
    protocol::placement where;
    std::int32_t priority = 0;
    std::deque<protocol::task_spec> queued;
    /// Lease requests sent and not answered yet.
    std::size_t requests = 0;
  };
  /// A worker a node lent this process, and the tasks pushed to it and not finished.
  struct lease {
    address worker;
    node_id node;
    address node_addr;
    /// The request it was granted for (names the lease to the node).
    task_id request;
    std::size_t cls = 0;
    std::vector<task_id> running;
    /// How many of `running` may wait in get (nothing is queued behind those).
    std::size_t may_block = 0;
    /// When it last became idle (nothing running, nothing of its class waiting); an idle
    /// lease goes back to its node after lease_idle_ms.
    std::chrono::steady_clock::time_point idle_since;
  };

  task_id next_task_id();
  // The following require mutex_.
  std::size_t class_of(const protocol::resource_set& shape, const protocol::placement& where,
                       std::int32_t priority);
  /// The priority of work submitted without one: the running task's or actor's (nested
  /// work inherits it), else the job's.
  [[nodiscard]] std::int32_t default_priority() const;
  /// The nodes holding `spec`'s stored arguments that this process owns, with their bytes.
  std::vector<protocol::node_bytes> locality_of(const protocol::task_spec& spec) const;
  /// Pushes queued tasks of class `cls` to its leases with room, and asks for more leases
  /// while tasks still wait.
  void pump(std::size_t cls);
  void push(const worker_id& w, lease& l, protocol::task_spec spec);
  /// Fails the tasks running on lease `w` and forgets it.
  void drop_lease(const worker_id& w, detail::failure_kind kind, const std::string& why);
  void on_lease_reply(protocol::lease_reply& r);
  /// Withdraws the outstanding lease requests of class `cls` (all classes if none).
  void cancel_requests(std::optional<std::size_t> cls);
  [[nodiscard]] bool idle(const lease& l) const;
  /// Returns leases idle for lease_idle_ms (its own thread; sleeps while none is idle).
  void return_idle_leases();
  /// Moves by-value arguments above the inline limit into the object store (as refs to
  /// objects this process owns, returned: hold them until to_wire has counted them).
  /// Does not take mutex_.
  std::vector<object_ref<void>> store_large_args(std::vector<detail::arg_spec>& args);
  /// Requires mutex_. Counts refs to owned objects as used by `task` until it finishes
  /// (nil: an actor creation, whose refs are kept until the job ends).
  std::vector<protocol::task_arg> to_wire(std::vector<detail::arg_spec> args, const task_id& task);
  /// Requires mutex_: a ref to an owned object, counted as a holder.
  object_ref<void> owned_ref(const object_id& id);
  void release_hold(const object_id& id);
  /// Requires mutex_: frees `id` if nothing keeps it.
  void maybe_free(const object_id& id);
  /// Requires mutex_: records another node's copy of an owned object.
  void on_copied(const protocol::object_copied& m);
  void check_running() const;  // requires mutex_
  // The following require mutex_.
  void fill(protocol::object_payload value);
  void fail_object(const object_id& id, const protocol::failure_info& fail);
  void send_call(actor_entry& actor, protocol::task_spec spec);
  void fail_actor_calls(actor_entry& actor, const actor_id& id);
  /// The actor died and is restarting: its unanswered calls that may be retried go first
  /// into its queue, the others fail.
  void requeue_actor_calls(actor_entry& actor, const actor_id& id);
  actor_entry& actor_slot(const actor_id& id);
  /// Registers interest in `refs`; returns how many are ready.
  std::size_t prepare(const std::vector<object_ref<void>>& refs);
  /// Blocks (mutex_ held via `lock`) until `done()` or the deadline; lends the worker's CPUs.
  bool block_until(std::unique_lock<std::mutex>& lock, detail::timeout_t timeout,
                   const std::function<bool()>& done);

  transport& net_;
  endpoints where_;
  std::uint64_t id_prefix_;
  std::atomic<std::uint64_t> counter_{0};
  /// Requests awaiting replies (handle completes them), and the clients that send them.
  request_table requests_;
  head_client head_;
  store_client store_;

  mutable std::mutex mutex_;
  std::condition_variable ready_cv_;
  bool stopped_ = false;
  std::string stop_reason_;
  std::optional<error_code> stop_code_;
  std::unordered_map<object_id, object_entry> objects_;
  std::unordered_map<actor_id, actor_entry> actors_;
  std::unordered_map<task_id, actor_id> call_actor_;
  std::vector<task_class> classes_;
  std::unordered_map<worker_id, lease> leases_;
  /// A task pushed to a leased worker.
  struct pushed {
    worker_id worker;
    std::string function;
    /// Counted in its lease's may_block.
    bool may_block = false;
  };
  std::unordered_map<task_id, pushed> running_;
  /// Functions whose tasks have run without ever waiting in get: only those are pipelined
  /// (queued on a worker behind another), so that no task waits behind one that blocks.
  std::unordered_map<std::string, bool> never_blocks_;
  [[nodiscard]] bool pipelinable(const std::string& function) const;
  /// Lease requests not answered yet, and the class each is for.
  std::unordered_map<task_id, std::size_t> lease_requests_;
  /// Set once the local node died: lease requests go to the head instead.
  bool node_dead_ = false;
  std::condition_variable lease_cv_;
  std::thread lease_reaper_;
  /// Owned objects passed by ref to a task still pending, by task.
  std::unordered_map<task_id, std::vector<object_id>> task_args_;
  std::shared_ptr<link> link_;
};

} // namespace celer
