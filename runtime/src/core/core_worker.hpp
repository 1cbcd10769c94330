#pragma once
// The per-process core: what the API calls into. A thin facade over the pieces that do the
// work, each with one job:
//   - reference_table: the objects this process owns or read (values, refcounts, get/wait);
//   - task_submitter: tasks on leased workers (Ray's lease design: tasks wait by resource
//     shape, the local node grants a worker or spills the request to the head, tasks are
//     pushed straight to leased workers);
//   - actor_submitter: calls sent straight to actors' workers, in order;
//   - generator_streams: the values of the streaming generators it submitted;
//   - store_client: the node's object store; head_client: queries to the head;
//   - request_table: requests awaiting replies, for all of them;
//   - user_logs: celer::print's lines (a driver's console, deduplicated; a worker's sent on).
// It validates options, builds task specs, and routes each message to the piece that owns
// it. One per process: the driver's in embedded mode (shared by its worker threads), each
// worker process's in cluster mode.
//
// Threads: user threads (driver, worker threads running user code) call the public
// methods; `handle` runs on the core's CAF actor; a reaper thread returns idle leases. Each
// piece guards its own tables; lock order: a submitter's lock before the reference
// table's, never the reverse; user_logs' lock is taken holding no other.

#include "core/actor_submitter.hpp"
#include "core/generator_streams.hpp"
#include "core/peer_link.hpp"
#include "core/head_client.hpp"
#include "core/reference_table.hpp"
#include "core/request_table.hpp"
#include "core/store_client.hpp"
#include "core/task_children.hpp"
#include "core/task_ids.hpp"
#include "core/task_submitter.hpp"
#include "core/user_logs.hpp"
#include "core/worker_context.hpp"
#include "protocol/messages.hpp"
#include "transport/transport.hpp"

#include <celer/api.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace celer {


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
    /// The job's working directory (task_spec::package), or empty; `binary` is relative to
    /// its root when the program lies inside it.
    std::string package;
    /// Cluster mode: resource questions go to the head.
    bool cluster = false;
    /// The job's priority (init_options::priority): work submitted without one gets it.
    std::int32_t priority = 0;
    /// The job's environment variables for its workers (init_options::env_vars over
    /// `celer submit --env`'s, CELER_ENV_VARS): work submitted from the driver gets them
    /// under its own.
    std::map<std::string, std::string> env_vars;
    /// The clock requests are timed and leases go idle by (tests pass a made-up one).
    request_table::clock now = [] { return std::chrono::steady_clock::now(); };
  };
  core_worker(transport& net, endpoints where);
  ~core_worker();
  core_worker(const core_worker&) = delete;
  core_worker& operator=(const core_worker&) = delete;

  [[nodiscard]] const address& self() const noexcept { return where_.self; }
  [[nodiscard]] const endpoints& where() const noexcept { return where_; }

  /// Submits a task; returns the ref to its (first) result. A function returning
  /// `num_returns` values (a std::tuple) has that many objects, whose refs go into `all`.
  object_ref<void> submit_task(const detail::remote_entry& fn, std::vector<detail::arg_spec> args,
                               const task_options& options, std::uint32_t num_returns = 1,
                               std::vector<object_ref<void>>* all = nullptr);
  /// Submits a streaming generator (`fn` returns celer::generator<T>): returns the ref to
  /// its end (its count of values, or the error that ended it); its values come from
  /// next_value. Throws invalid_argument for a generator_backpressure of 0 or below -1.
  object_ref<void> submit_stream(const detail::remote_entry& fn, std::vector<detail::arg_spec> args,
                                 const task_options& options);
  /// The same for an actor method that is a generator, with its window (-1: none).
  object_ref<void> submit_actor_stream(const actor_id& actor, const detail::remote_entry& method,
                                       std::vector<detail::arg_spec> args, const call_options& options);
  /// The next value of the stream whose end is `end`, nullopt after its last, `end` when it
  /// failed there (generator_streams::next).
  std::optional<object_ref<void>> next_value(const object_ref<void>& end, timeout_t timeout);
  /// The stream whose end is `end` is dropped by its consumer.
  void close_stream(const object_ref<void>& end);
  /// Streams open here (tests).
  [[nodiscard]] std::size_t open_streams() const { return streams_.open_streams(); }
  object_ref<void> put(std::string payload);
  /// Puts a value of `size` packed bytes (starting with byte `first`) into this node's
  /// object store; `write` packs it into the store's memory. Throws celer::exception
  /// (resource_exhausted, ...) when the store refuses it.
  object_ref<void> put_stored(std::size_t size, unsigned char first, bool durable,
                              const std::function<void(char*)>& write);
  /// Writes a value into this node's object store for `owner`, as object `id`; returns the
  /// payload that points at it, or the failure (not ok). Holds no lock of the core's
  /// (store_client::store_value).
  protocol::object_payload store_value(const object_id& id, std::size_t size, unsigned char first,
                                       bool durable, const address& owner, const job_id& job,
                                       const std::function<void(char*)>& write);
  /// Marks a ref to an object this process owns as serialised, where its holders cannot
  /// be counted: the object is kept until the job ends (see object_ref).
  void escaped(const object_id& id);
  /// How many objects this process owns now (tests, metrics).
  [[nodiscard]] std::size_t owned_objects() const;
  /// What this process's tasks have done (a driver's job heartbeats carry it), and with
  /// `take_changes` each task's changes of state since the last such call.
  [[nodiscard]] protocol::task_counts task_counts(bool take_changes = false) { return tasks_.counts(take_changes); }
  std::vector<detail::fetched> fetch(const std::vector<object_ref<void>>& refs,
                                     timeout_t timeout);
  std::vector<std::size_t> wait_ready(const std::vector<object_ref<void>>& refs,
                                      std::size_t num_returns, timeout_t timeout);
  /// A wait that blocks no thread (reference_table::when_ready): false when `ref` is ready
  /// now; else `then` runs once it is, on the thread that fills it.
  bool when_ready(const object_ref<void>& ref, std::function<void()> then) {
    return objects_.when_ready(ref, std::move(then));
  }
  actor_id create_actor(const detail::remote_entry& factory, std::vector<detail::arg_spec> args,
                        const actor_options& options);
  /// An actor call, as submit_task for its returns.
  object_ref<void> submit_actor_call(const actor_id& actor, const detail::remote_entry& method,
                                     std::vector<detail::arg_spec> args, const call_options& options = {},
                                     std::uint32_t num_returns = 1,
                                     std::vector<object_ref<void>>* all = nullptr);
  /// The live actor named `name` (head_client::find_named_actor): in `name_space` when one
  /// is named, else in CELER_NAMESPACE's or the job's own.
  actor_id find_named_actor(std::string_view name, std::string_view class_type, std::string_view name_space = {});
  /// celer::cancel of the task or actor call that makes `ref` (owned here): its result fails
  /// now with task_cancelled_error saying who cancelled it, and it never runs again. Waiting
  /// here it is taken out; sent to a worker, the worker takes it out of its inbox or sets
  /// the running call's flag (celer::is_cancelled) and, with `recursive`, cancels what the
  /// call submitted; with `force` a worker process running the task is killed (tasks
  /// only). False when there was nothing to cancel (it finished, or `ref` is a put's).
  /// Throws invalid_argument for a ref another process owns, or force on an actor call.
  bool cancel(const object_ref<void>& ref, bool force, bool recursive);
  /// A cancel with `recursive` reached call `parent` running here: cancels what it
  /// submitted (`who`: who cancelled the parent).
  void cancel_children(const task_id& parent, bool force, const std::string& who);
  /// The call `parent` running here is over: what it submitted is no longer its children.
  void forget_children(const task_id& parent) { children_.forget(parent); }
  void kill_actor(const actor_id& actor, bool no_restart = true);
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
  /// celer::peer in this process: its mailboxes (peer_data arriving here lands in them) and
  /// sending to another's.
  [[nodiscard]] peer_link& peers() noexcept { return peers_; }
  /// A thread about to wait in get or wait receives its own reply instead, when `seat`
  /// lends it the transport's socket (a cluster driver; reference_table::receiver_seat).
  /// Once, before any get.
  void receive_while_waiting(reference_table::receiver_seat seat) {
    objects_.receive_while_waiting(std::move(seat));
  }
  /// Sets the node tasks are submitted to and objects stored on: a cluster driver learns
  /// it after connecting, and takes another when that one dies.
  void attach_node(address node, node_id id);
  /// Called (on the thread handling messages: do not wait there) when the node this core
  /// is attached to is declared dead. The driver picks another.
  void on_local_node_died(std::function<void(const node_id&)> f);

  /// Handles a message addressed to this core (on the core's actor, or on the transport's
  /// receiver thread).
  void handle(protocol::message& m);
  /// celer::print: `text`, one line or several. From a task or actor of a worker process:
  /// to the worker's log and, through the head, to the driver; from an embedded worker
  /// thread: to this (the driver's) console, deduplicated; from the driver: printed as is.
  void print(std::string_view text);
  /// The driver's tick: lines folded by the dedup whose window ended are counted out.
  void tick_logs() { logs_.tick(); }
  /// Tests: where the driver's console lines go instead of standard output.
  void print_logs_to(user_logs::sink s) { logs_.print_to(std::move(s)); }
  /// Fails every wait and every request from now on with `reason`, and returns every
  /// leased worker (at shutdown). With `code` (the cluster is gone: unavailable), they
  /// and every later call fail with that code and `reason` as the message. The first
  /// stop's reason stands.
  void stop(const std::string& reason, std::optional<error_code> code = std::nullopt);

private:
  /// The priority of work submitted without one: the running task's or actor's (nested
  /// work inherits it), else the job's.
  [[nodiscard]] std::int32_t default_priority() const;
  /// The environment variables of work `what` that asks for `own`: `own` over the running
  /// task's or actor's (nested work inherits them), else over the job's. Throws
  /// invalid_argument for a name the runtime keeps or cannot give (protocol/env_vars.hpp).
  [[nodiscard]] std::map<std::string, std::string> env_vars_of(const std::string& what,
                                                               const std::map<std::string, std::string>& own) const;
  /// Moves by-value arguments above the inline limit into the object store (as refs to
  /// objects this process owns, returned: hold them until the table has counted them).
  std::vector<object_ref<void>> store_large_args(std::vector<detail::arg_spec>& args);
  /// Throws unless `args` may go to an actor of another job (a detached actor of a shared
  /// namespace): values only, each at most task_spec::max_guest_value_bytes.
  void guest_args(const std::vector<detail::arg_spec>& args, const std::string& what) const;
  /// The spec of a task of `fn` with `options` (checked), ready to submit.
  protocol::task_spec task_spec_of(const detail::remote_entry& fn, const task_options& options);
  /// The spec of a call of `method` on `actor` with `options` (checked against its
  /// pending-call limit).
  protocol::task_spec call_spec_of(const actor_id& actor, const detail::remote_entry& method,
                                   const call_options& options);
  /// Records `child` as submitted by the call running on this thread, if any.
  void note_child(const object_id& child);
  bool cancel_task(const task_id& task, bool force, bool recursive, const std::string& who);

  transport& net_;
  endpoints where_;
  task_ids ids_;
  /// Requests awaiting replies (handle completes them), and the clients that send them.
  request_table requests_;
  head_client head_;
  store_client store_;
  reference_table objects_;
  generator_streams streams_;
  task_submitter tasks_;
  actor_submitter actors_;
  /// What each call running here submitted (celer::cancel's recursive).
  task_children children_;
  peer_link peers_;
  /// celer::print's lines (its own mutex, taken after no other lock).
  user_logs logs_;
  std::thread lease_reaper_;
  /// The node attached now, and who to tell when it dies (local_mutex_ guards both).
  std::mutex local_mutex_;
  node_id local_node_;
  std::function<void(const node_id&)> local_node_died_;
};

} // namespace celer
