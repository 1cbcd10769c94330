#pragma once
// Every message that head, node agents, workers and per-process cores exchange. Components
// speak only these; in embedded mode they travel as CAF messages between actors of one
// process, in cluster mode the transport encodes them with msgpack (CELER_MSGPACK_DEFINE
// below: msgpack's MSGPACK_DEFINE, charging a decode's allocations to its budget, see
// protocol/decode_budget.hpp) and the message's index in `message` is its type tag on the wire.
//
// Adding or reordering a field or a message changes the wire: bump celer::protocol_version
// and docs/protocol.md with it.

#include "protocol/bulk.hpp"
#include "protocol/decode_budget.hpp"
#include "protocol/failure_info.hpp"
#include "protocol/placement.hpp"
#include "protocol/resources.hpp"
#include "protocol/store_messages.hpp"
#include "protocol/task_counts.hpp"

#include <celer/api.hpp>
#include <celer/codec.hpp>
#include <celer/ids.hpp>

#include <array>
#include <cstdint>
#include <map>
#include <span>
#include <stdexcept>
#include <string_view>
#include <string>
#include <variant>
#include <vector>

namespace celer::protocol {

enum class task_kind : std::uint8_t { normal, actor_creation, actor_call };
/// restarting: its process or node died and it is being started again (max_restarts);
/// calls made meanwhile wait for it.
enum class actor_state : std::uint8_t { pending, alive, dead, restarting };
enum class group_state : std::uint8_t { pending, created, removed };
} // namespace celer::protocol


MSGPACK_ADD_ENUM(celer::protocol::task_kind);
MSGPACK_ADD_ENUM(celer::protocol::actor_state);
MSGPACK_ADD_ENUM(celer::protocol::group_state);
namespace celer::protocol {

struct task_arg {
  bool is_ref = false;
  object_id ref;
  address owner;
  bulk value;
  CELER_MSGPACK_DEFINE(is_ref, ref, owner, value)
  bool operator==(const task_arg&) const = default;
};

/// Everything needed to run a task, create an actor, or call an actor method.
struct task_spec {
  task_id id;
  task_kind kind = task_kind::normal;
  /// The registered name of the function, factory or method.
  std::string function;
  std::vector<task_arg> args;
  resource_set resources;
  /// The core that owns the results; task_result goes there.
  address owner;
  /// For actor creation and calls.
  actor_id actor;
  std::string actor_name;
  std::string class_type;
  std::int32_t max_concurrency = 1;
  /// The job that submitted it; its workers serve that job only.
  job_id job;
  /// The program a worker process runs in worker mode (cluster mode; empty embedded).
  std::string binary;
  /// The result is written through to the node's disk (task_options::durable).
  bool durable = false;
  /// GPU model and memory, node labels and strategy: where it may go and how to choose.
  placement where;
  /// Higher goes first; a request that cannot be placed may preempt actors of lower
  /// priority that opted in (`preemptible`), which get `preemption_grace_ms` to checkpoint.
  std::int32_t priority = 0;
  bool preemptible = false;
  std::int64_t preemption_grace_ms = 0;
  /// Actor creation: restarts allowed after its process or node dies (-1: unlimited), how
  /// many it has had (0 on the first start), the registered method run after the factory
  /// on a restart (empty: none), and the retries of a call interrupted by its death.
  std::int32_t max_restarts = 0;
  std::uint32_t restarts = 0;
  std::string restore_method;
  std::int32_t max_task_retries = 0;
  /// Which run of the task this is: 1, then 2 for its first retry (task_options::
  /// max_retries); its task_result says it back, so that a late result of an earlier run
  /// is told apart.
  std::int32_t attempt = 1;
  /// The digest of the job's working directory (a package of jobs/package.hpp, uploaded with
  /// `celer submit --working-dir`), or empty. A node starts the job's workers in its own
  /// unpacked copy, fetched from the head once (package_fetch), and a relative `binary` is
  /// taken from there: the program need not exist on every machine.
  std::string package;
  /// Actor creation: the namespace `actor_name` lives in (protocol 19): empty, the job's
  /// own (no other job sees or takes its names); else a shared namespace that every job
  /// naming it shares (CELER_NAMESPACE; docs/scheduling.md, "Named actors and namespaces").
  std::string name_space;
  /// Tasks and actor calls: how many objects the call returns (protocol 20): 1, or N for a
  /// function returning std::tuple of N values, each stored as its own object
  /// (return_id_of(id, i)); at most max_returns.
  std::uint32_t num_returns = 1;
  /// Actor creation (protocol 20): the calls one process may have pending on the actor
  /// (sent or waiting, not answered) before another fails at once with resource_exhausted;
  /// -1: no limit (actor_options::max_pending_calls).
  std::int32_t max_pending_calls = -1;
  /// Tasks and actor calls (protocol 21): 0, a call with returns; else a streaming
  /// generator, whose values reach the owner one by one (generator_item) and whose return
  /// holds their count: -1 produces without waiting for its consumer, N > 0 stops while N
  /// values are unconsumed (generator_ack says how many are).
  std::int32_t generator = 0;
  /// Actor creation (protocol 21): named groups of threads and their sizes (Ray's
  /// concurrency groups), and which method runs in which (by registered name); a method
  /// in none runs as max_concurrency says.
  std::map<std::string, std::int32_t> concurrency_groups;
  std::map<std::string, std::string> method_groups;
  /// Actor calls (protocol 21): the group this call runs in, whatever its method's; empty:
  /// its method's.
  std::string concurrency_group;
  /// Actor creation (protocol 22): `name_space` was named in the call
  /// (actor_options::name_space): the head takes it as it is and does not remember it as
  /// the job's default (as it does the first CELER_NAMESPACE a job names).
  bool namespace_named = false;
  /// Tasks (protocol 22): the retries its owner allows after a system failure
  /// (task_options::max_retries; -1 without limit). The node's memory monitor kills the
  /// workers of retriable work first (attempt <= max_retries).
  std::int32_t max_retries = 0;
  /// Tasks and actor creation (protocol 22): the environment variables its worker starts
  /// with, over the node's (task_options/actor_options::env_vars over those of the job and
  /// of the submitting task; protocol/env_vars.hpp says which the node refuses). A worker
  /// is reused only for work with the same ones.
  std::map<std::string, std::string> env_vars;
  /// Actor creation (protocol 23): a detached actor (actor_options::lifetime): it outlives
  /// its creator's job. The head runs it as its shared namespace's job
  /// (credentials.hpp, namespace_job), which the jobs let into that namespace may call.
  bool detached = false;
  /// Each value of a call that crosses jobs (to a detached actor of a shared namespace, and
  /// its results back) travels inline, at most this large: no object store is shared
  /// between jobs.
  static constexpr std::size_t max_guest_value_bytes = 8u << 20;
  CELER_MSGPACK_DEFINE(id, kind, function, args, resources, owner, actor, actor_name, class_type,
                 max_concurrency, job, binary, durable, where, priority, preemptible,
                 preemption_grace_ms, max_restarts, restarts, restore_method, max_task_retries,
                 attempt, package, name_space, num_returns, max_pending_calls, generator,
                 concurrency_groups, method_groups, concurrency_group, namespace_named, max_retries, env_vars,
                 detached)
  /// Every field equal (the task submitter finds tasks of one function and options by it).
  bool operator==(const task_spec&) const = default;

  /// The most objects one call may return: a task id leaves its low 16 bits for the
  /// return index (core/task_ids.hpp), and a call's returns travel in one message.
  static constexpr std::uint32_t max_returns = 1024;
  /// The object holding the task's (first) return value.
  [[nodiscard]] object_id return_id(std::uint32_t index = 0) const { return return_id_of(id, index); }
  static object_id return_id_of(const task_id& t, std::uint32_t index = 0) {
    return object_id(unique_id{t.hi, t.lo | (std::uint64_t{index} + 1)});
  }
  /// The object holding value `index` (from 0) of generator `t`: the low 16 bits count
  /// on from its return (2 for the first value); past them, the high word is mixed with
  /// the rest of the index, so a stream has no length limit.
  static object_id generator_item_id(const task_id& t, std::uint64_t index) {
    const std::uint64_t n = index + 2;
    const std::uint64_t block = n / 0xffff;
    // splitmix64's finaliser: distinct blocks give unrelated high words.
    std::uint64_t mix = block;
    if (block != 0) {
      mix += 0x9e3779b97f4a7c15ULL;
      mix = (mix ^ (mix >> 30)) * 0xbf58476d1ce4e5b9ULL;
      mix = (mix ^ (mix >> 27)) * 0x94d049bb133111ebULL;
      mix ^= mix >> 31;
    }
    return object_id(unique_id{t.hi ^ mix, t.lo | (n % 0xffff + (block != 0 ? 1 : 0))});
  }
};

/// Bytes to leave before a stored value that starts with msgpack byte `first`, so that
/// the body after a bin, str or ext header starts 64-byte aligned (views of it can then be
/// read as arrays of numbers).
constexpr std::uint32_t lead_for(unsigned char first) noexcept {
  std::uint32_t header = 0;
  switch (first) {
    case 0xc4: case 0xd9: header = 2; break;  // bin8, str8
    case 0xc5: case 0xda: header = 3; break;  // bin16, str16
    case 0xc6: case 0xdb: header = 5; break;  // bin32, str32
    case 0xc7: header = 3; break;             // ext8
    case 0xc8: header = 4; break;             // ext16
    case 0xc9: header = 6; break;             // ext32
    default: return 0;
  }
  return (64 - header) % 64;
}

/// One object's content: a msgpack payload, or the failure that replaced it. A value larger
/// than inline_object_bytes is not carried: it sits in the object store of `node` (`stored`,
/// `size` bytes), and readers fetch it from there.
struct object_payload {
  object_id id;
  bool ok = false;
  bulk payload;
  failure_info fail;
  bool stored = false;
  node_id node;
  address node_addr;
  std::uint64_t size = 0;
  /// Bytes before the value in its block (the writer aligned what follows its header).
  std::uint32_t lead = 0;
  CELER_MSGPACK_DEFINE(id, ok, payload, fail, stored, node, node_addr, size, lead)
};

// ---- owner core -> its node, node -> head -> node: lend me a worker for tasks shaped like
// `spec` (the first waiting task, without its arguments; spec.id names the request). A node
// that cannot grant it now (or ever) forwards it to the head, which picks a node.
struct request_lease {
  task_spec spec;
  bool from_head = false;
  /// Nodes holding the first waiting task's stored arguments, and how many bytes each.
  std::vector<node_bytes> locality;
  CELER_MSGPACK_DEFINE(spec, from_head, locality)
};
// ---- node -> owner core (or head -> owner core when no node can ever grant it): the
// answer to a request_lease. A granted worker runs the owner's tasks of that shape, pushed
// to it directly, until the owner returns the lease.
struct lease_reply {
  task_id request;
  bool ok = false;
  worker_id worker;
  address worker_addr;
  node_id node;
  address node_addr;
  failure_info fail;
  CELER_MSGPACK_DEFINE(request, ok, worker, worker_addr, node, node_addr, fail)
};
// ---- owner core -> node (tasks, on a leased worker), node -> worker (actor creation),
// core -> actor's worker (actor calls)
struct execute_task {
  task_spec spec;
  CELER_MSGPACK_DEFINE(spec)
};
// ---- owner core -> node: the owner is done with the worker it leased by `request`; its
// resources return (a lease the node has already taken back is ignored)
struct return_lease {
  worker_id worker;
  task_id request;
  /// The job that sent it (the transport sets it for a job's connection; nil: head, node or
  /// this process).
  job_id sender_job;
  /// Stop the worker instead of keeping it (celer::cancel with force: a task it runs was
  /// cancelled; a worker process is killed, a thread of an embedded node cannot be).
  bool kill = false;
  CELER_MSGPACK_DEFINE(worker, request, sender_job, kill)
};
// ---- worker (or node, head) -> owner core: results of one task
struct task_result {
  task_id task;
  std::vector<object_payload> returns;
  /// The task waited in get or wait while it ran (its owner then never queues another task
  /// behind one of this function on a worker).
  bool blocked = false;
  /// The task_spec::attempt it answers.
  std::int32_t attempt = 1;
  /// The task's own code threw (an application error: its owner retries it only with
  /// task_options::retry_exceptions). False for a failed argument or a missing function.
  bool raised = false;
  CELER_MSGPACK_DEFINE(task, returns, blocked, attempt, raised)
};
// ---- worker -> node: the worker blocks in get (its CPUs are lent out) / resumes
struct worker_blocked {
  worker_id worker;
  /// The job that sent it (the transport sets it for a job's connection; nil: head, node or
  /// this process).
  job_id sender_job;
  CELER_MSGPACK_DEFINE(worker, sender_job)
};
struct worker_unblocked {
  worker_id worker;
  /// The job that sent it (the transport sets it for a job's connection; nil: head, node or
  /// this process).
  job_id sender_job;
  CELER_MSGPACK_DEFINE(worker, sender_job)
};
// ---- borrower core -> owner core: send me this object when it is ready
struct get_object {
  object_id id;
  address requester;
  CELER_MSGPACK_DEFINE(id, requester)
};
// ---- owner core -> borrower core
struct object_reply {
  object_payload object;
  CELER_MSGPACK_DEFINE(object)
};
// ---- node -> head
struct register_node {
  std::int32_t protocol_version = 0;
  node_id node;
  address node_address;
  resource_set total;
  std::map<std::string, std::string> labels;
  /// Its GPUs, found or declared (total's "GPU" counts them).
  std::vector<gpu::device> gpus;
  /// How it confines jobs' processes (sandbox/job_sandbox.hpp's describe()), for `celer status`.
  std::string isolation;
  CELER_MSGPACK_DEFINE(protocol_version, node, node_address, total, labels, gpus, isolation)
};
// ---- core -> head: register (and name) an actor, then place it
struct create_actor {
  std::uint64_t request_id = 0;
  address reply_to;
  task_spec spec;
  CELER_MSGPACK_DEFINE(request_id, reply_to, spec)
};
struct create_actor_reply {
  std::uint64_t request_id = 0;
  bool ok = false;
  failure_info fail;
  /// Protocol 23: the job the actor runs as: the creator's, or for a detached actor its
  /// namespace's (calls to it then pass their values inline, core_worker::guest_args).
  job_id job;
  CELER_MSGPACK_DEFINE(request_id, ok, fail, job)
};
// ---- head -> node: start this actor when resources allow
struct start_actor {
  task_spec spec;
  CELER_MSGPACK_DEFINE(spec)
};
// ---- worker -> head: the actor's constructor returned / threw
struct actor_started {
  actor_id actor;
  address worker;
  /// The GPU shares it holds (what the head weighs when it may preempt it).
  std::vector<gpu_share> gpus;
  /// The job that sent it (the transport sets it for a job's connection; nil: head, node or
  /// this process).
  job_id sender_job;
  CELER_MSGPACK_DEFINE(actor, worker, gpus, sender_job)
};
struct actor_failed {
  actor_id actor;
  failure_info fail;
  /// The job that sent it (the transport sets it for a job's connection; nil: head, node or
  /// this process).
  job_id sender_job;
  CELER_MSGPACK_DEFINE(actor, fail, sender_job)
};
// ---- core -> head: tell me when this actor's state changes (and now)
struct subscribe_actor {
  actor_id actor;
  address subscriber;
  /// The job that sent it (the transport sets it for a job's connection; nil: head, node or
  /// this process): the head refuses another job's actor (protocol 19).
  job_id sender_job;
  CELER_MSGPACK_DEFINE(actor, subscriber, sender_job)
};
// ---- head -> subscribed cores
struct actor_update {
  actor_id actor;
  actor_state state = actor_state::pending;
  address worker;
  /// dead: why; restarting: why it died this time.
  failure_info fail;
  /// Restarts so far, and the retries a call interrupted by the actor's death gets (from
  /// actor_options, for handles that did not create it).
  std::uint32_t restarts = 0;
  std::int32_t max_task_retries = 0;
  /// The actor's max_pending_calls (protocol 20; -1: no limit), for handles that did not
  /// create it.
  std::int32_t max_pending_calls = -1;
  CELER_MSGPACK_DEFINE(actor, state, worker, fail, restarts, max_task_retries, max_pending_calls)
};
// ---- core -> head: find a named actor
struct lookup_actor {
  std::uint64_t request_id = 0;
  address reply_to;
  std::string name;
  /// Protocol 19: the asking job (the transport holds a job's connection to its own) and
  /// the namespace to look in (empty: that job's own; task_spec::name_space).
  job_id job;
  std::string name_space;
  /// Protocol 22: `name_space` was named in the call (celer::get_actor(name, name_space)):
  /// looked in as it is, not remembered as the job's default.
  bool namespace_named = false;
  CELER_MSGPACK_DEFINE(request_id, reply_to, name, job, name_space, namespace_named)
};
struct lookup_actor_reply {
  std::uint64_t request_id = 0;
  bool found = false;
  actor_id actor;
  std::string class_type;
  /// Protocol 23: the job the actor runs as (another job's for a detached actor of a
  /// shared namespace).
  job_id job;
  CELER_MSGPACK_DEFINE(request_id, found, actor, class_type, job)
};
// ---- core -> head -> node -> worker: stop the actor
struct kill_actor {
  actor_id actor;
  std::string reason;
  /// The job that sent it (the transport sets it for a job's connection; nil: head, node or
  /// this process).
  job_id sender_job;
  /// Protocol 20: false lets an actor with restarts left restart (celer::kill's
  /// kill_options::no_restart): the head does not mark it dead, its node stops its worker
  /// and reports it as a death of its process.
  bool no_restart = true;
  CELER_MSGPACK_DEFINE(actor, reason, sender_job, no_restart)
};
// ---- worker -> node: the actor's worker exited; its resources return
struct actor_exited {
  actor_id actor;
  worker_id worker;
  /// The job that sent it (the transport sets it for a job's connection; nil: head, node or
  /// this process).
  job_id sender_job;
  /// Protocol 20: non-empty when the actor ended itself (celer::exit_actor): what it said,
  /// e.g. "celer::exit_actor() was called in counter::stop". The node reports the actor
  /// dead to the head with it, for good (no restart), once the worker is gone.
  std::string why;
  CELER_MSGPACK_DEFINE(actor, worker, sender_job, why)
};
// ---- core -> node: what does the node hold and have free
struct resource_query {
  std::uint64_t request_id = 0;
  address reply_to;
  CELER_MSGPACK_DEFINE(request_id, reply_to)
};
struct resource_reply {
  std::uint64_t request_id = 0;
  resource_set total;
  resource_set available;
  CELER_MSGPACK_DEFINE(request_id, total, available)
};
// ---- runtime -> component: stop (pending work is dropped, running work finishes)
struct shutdown_component {
  std::string reason;
  CELER_MSGPACK_DEFINE(reason)
};

// ---- worker process -> node: started and listening at `addr`; send it work
struct worker_ready {
  worker_id worker;
  address addr;
  /// The job that sent it (the transport sets it for a job's connection; nil: head, node or
  /// this process).
  job_id sender_job;
  CELER_MSGPACK_DEFINE(worker, addr, sender_job)
};
// ---- node's process reaper -> node: a worker process exited; node -> lease owner core:
// the leased worker died (its running tasks fail)
struct worker_died {
  worker_id worker;
  std::string reason;
  CELER_MSGPACK_DEFINE(worker, reason)
};
// ---- a process's timer -> its own head or node: time to heartbeat / check liveness
struct tick {
  std::int32_t unused = 0;
  CELER_MSGPACK_DEFINE(unused)
};
// ---- node -> head, every heartbeat interval: alive, and what it has free
/// A task lease or actor that waits in a node's queue.
struct waiting_request {
  std::string function;
  task_kind kind = task_kind::normal;
  job_id job;
  resource_set need;
  placement where;
  std::uint64_t waiting_ms = 0;
  /// Filled in by the head for status: why it cannot start.
  std::string why;
  std::int32_t priority = 0;
  CELER_MSGPACK_DEFINE(function, kind, job, need, where, waiting_ms, why, priority)
};
/// A preemption under way on a node: the actor told, what it runs, and how long it has left
/// (0 once it is being stopped).
struct preemption_state {
  actor_id actor;
  std::string function;
  std::int32_t priority = 0;
  std::int64_t ms_left = 0;
  std::string reason;
  CELER_MSGPACK_DEFINE(actor, function, priority, ms_left, reason)
};
struct heartbeat {
  node_id node;
  resource_set available;
  std::uint32_t queued = 0;
  std::uint32_t workers = 0;
  store_counters store;
  /// Free units of each GPU (register_node's order), and GPU units among the queued.
  std::vector<std::int64_t> gpu_free;
  std::int64_t queued_gpus = 0;
  /// The oldest requests waiting here (at most 20), so the head can say why.
  std::vector<waiting_request> waiting;
  /// Each GPU's monitoring: sampled through NVML, or (declared devices) as its workers
  /// last reported it (gpu_usage).
  std::vector<gpu::sample> gpu_samples;
  /// Actors being preempted here.
  std::vector<preemption_state> preempting;
  /// Its worker processes' endpoints: they die with the node, and the head forgets them
  /// (their subscriptions, its connections) when it declares the node dead.
  std::vector<std::string> worker_endpoints;
  CELER_MSGPACK_DEFINE(node, available, queued, workers, store, gpu_free, queued_gpus, waiting,
                 gpu_samples, preempting, worker_endpoints)
};
// ---- core -> head: tell me when nodes die (cluster mode)
struct subscribe_cluster {
  address subscriber;
  /// The job that sent it (the transport sets it for a job's connection; nil: head, node or
  /// this process): the head bounds each job's subscriptions (protocol 19).
  job_id sender_job;
  CELER_MSGPACK_DEFINE(subscriber, sender_job)
};
// ---- head -> subscribed cores and nodes: a node stopped heartbeating or left
struct node_died {
  node_id node;
  std::string reason;
  CELER_MSGPACK_DEFINE(node, reason)
};
// ---- driver core -> head -> nodes: the job ended; stop its actors and workers
struct job_finished {
  job_id job;
  CELER_MSGPACK_DEFINE(job)
};
// ---- driver core -> head, every heartbeat interval: the job's driver is alive, and what
// its tasks have done
struct job_heartbeat {
  job_id job;
  task_counts tasks;
  /// The driver's core, told job_ended if the head ended the job meanwhile (none: a
  /// heartbeat on the driver's behalf, the job manager's).
  address driver;
  CELER_MSGPACK_DEFINE(job, tasks, driver)
};
// ---- node -> head -> every node: the process at `endpoint` (a worker) is gone; stop telling
// it things, take back the workers it leased, drop its lease requests
struct unsubscribe_cluster {
  std::string endpoint;
  CELER_MSGPACK_DEFINE(endpoint)
};
/// One node as `celer status` shows it.
struct node_status {
  node_id node;
  address addr;
  bool alive = true;
  std::string dead_reason;
  resource_set total;
  resource_set available;
  std::map<std::string, std::string> labels;
  std::uint32_t queued = 0;
  std::uint32_t workers = 0;
  store_counters store;
  std::vector<gpu::device> gpus;
  std::vector<std::int64_t> gpu_free;
  std::vector<waiting_request> waiting;
  std::vector<gpu::sample> gpu_samples;
  std::vector<preemption_state> preempting;
  /// How the node confines jobs' processes (register_node's).
  std::string isolation;
  CELER_MSGPACK_DEFINE(node, addr, alive, dead_reason, total, available, labels, queued, workers,
                 store, gpus, gpu_free, waiting, gpu_samples, preempting, isolation)
};
// ---- any client -> head: the cluster's state
struct status_query {
  std::uint64_t request_id = 0;
  address reply_to;
  /// The job that sent it (the transport sets it for a job's connection; nil: head, node or
  /// this process): a job is answered with its own waiting work and actors only (protocol 19).
  job_id sender_job;
  CELER_MSGPACK_DEFINE(request_id, reply_to, sender_job)
};
struct status_reply {
  std::uint64_t request_id = 0;
  std::vector<node_status> nodes;
  std::uint32_t actors_alive = 0;
  std::uint32_t actors_pending = 0;
  CELER_MSGPACK_DEFINE(request_id, nodes, actors_alive, actors_pending)
};

/// Every message; the index is the wire type tag.
// ---- owner core -> its node -> head -> every node: these lease requests are not needed
// any more (their tasks ran elsewhere, or the owner is stopping): drop them where they
// wait, and take back a worker already lent for one
struct cancel_lease_requests {
  address owner;
  std::vector<task_id> requests;
  bool from_head = false;
  /// The job that sent it (the transport sets it for a job's connection; nil: head, node or
  /// this process). Kept when a node forwards it to the head and the head to every node, so
  /// that each node checks it against the requests it holds.
  job_id sender_job;
  CELER_MSGPACK_DEFINE(owner, requests, from_head, sender_job)
};

// ---- core -> head: why does this request (an actor of the cluster, or a task's shape)
// not start? The head answers from its view of every node
struct explain_placement {
  std::uint64_t request_id = 0;
  address reply_to;
  actor_id actor;  ///< a pending actor (nil: explain `need` and `where`)
  resource_set need;
  placement where;
  /// The job that sent it (the transport sets it for a job's connection; nil: head, node or
  /// this process): a job is answered about its own actors and groups only (protocol 19).
  job_id sender_job;
  CELER_MSGPACK_DEFINE(request_id, reply_to, actor, need, where, sender_job)
};
struct placement_explained {
  std::uint64_t request_id = 0;
  std::string why;  ///< "" when it could start now (or the actor is not pending)
  CELER_MSGPACK_DEFINE(request_id, why)
};

// ---- placement groups. core -> head: reserve these bundles together
struct create_placement_group {
  std::uint64_t request_id = 0;
  address reply_to;
  placement_group_id id;
  std::string name;
  bundle_strategy strategy = bundle_strategy::pack;
  std::vector<bundle_spec> bundles;
  job_id job;
  CELER_MSGPACK_DEFINE(request_id, reply_to, id, name, strategy, bundles, job)
};
// ---- head -> core: accepted (it is reserved when resources allow), or never possible
struct placement_group_reply {
  std::uint64_t request_id = 0;
  bool ok = false;
  failure_info fail;
  CELER_MSGPACK_DEFINE(request_id, ok, fail)
};
// ---- core -> head: the group is no longer needed; its bundles and the work in them go
struct remove_placement_group {
  placement_group_id id;
  /// The job that sent it (the transport sets it for a job's connection; nil: head, node or
  /// this process).
  job_id sender_job;
  CELER_MSGPACK_DEFINE(id, sender_job)
};
// ---- any client -> head: placement groups (one, or all when id is nil)
struct placement_group_query {
  std::uint64_t request_id = 0;
  address reply_to;
  placement_group_id id;
  /// The job that sent it (the transport sets it for a job's connection; nil: head, node or
  /// this process): a job is shown its own groups only (protocol 19).
  job_id sender_job;
  CELER_MSGPACK_DEFINE(request_id, reply_to, id, sender_job)
};
struct placement_group_info {
  placement_group_id id;
  std::string name;
  bundle_strategy strategy = bundle_strategy::pack;
  group_state state = group_state::pending;
  job_id job;
  std::vector<bundle_spec> bundles;
  /// Where each bundle is reserved (nil while pending).
  std::vector<node_id> nodes;
  /// Why it is pending, or why it was removed.
  std::string why;
  CELER_MSGPACK_DEFINE(id, name, strategy, state, job, bundles, nodes, why)
};
struct placement_group_list {
  std::uint64_t request_id = 0;
  std::vector<placement_group_info> groups;
  CELER_MSGPACK_DEFINE(request_id, groups)
};
// ---- head -> node: reserve bundle `index` of a group here; node -> head: done or not
struct reserve_bundle {
  placement_group_id group;
  std::int32_t index = 0;
  bundle_spec bundle;
  job_id job;
  CELER_MSGPACK_DEFINE(group, index, bundle, job)
};
struct bundle_reserved {
  placement_group_id group;
  std::int32_t index = 0;
  node_id node;
  bool ok = false;
  std::string why;
  CELER_MSGPACK_DEFINE(group, index, node, ok, why)
};
// ---- head -> node: give back these bundles of a group (all when `indices` is empty) and
// stop the work running in them
struct return_bundles {
  placement_group_id group;
  std::vector<std::int32_t> indices;
  std::string why;
  CELER_MSGPACK_DEFINE(group, indices, why)
};

// ---- core -> its node: how busy the calling work's GPUs are (celer::report_gpu_usage;
// what declared devices report, having no NVML)
struct gpu_usage {
  std::vector<std::int32_t> devices;
  double utilisation = 0;
  std::uint64_t memory_used_bytes = 0;
  /// The job that sent it (the transport sets it for a job's connection; nil: head, node or
  /// this process).
  job_id sender_job;
  CELER_MSGPACK_DEFINE(devices, utilisation, memory_used_bytes, sender_job)
};

// ---- node -> the worker hosting a preemptible actor: a higher-priority request needs its
// resources; its preemption callback runs now, and it is stopped after `grace_ms` (or as
// soon as the callback returns)
struct preempt_actor {
  actor_id actor;
  std::int64_t grace_ms = 0;
  std::string reason;
  CELER_MSGPACK_DEFINE(actor, grace_ms, reason)
};
// ---- worker -> its node: the actor's preemption callback returned; stop it now
struct preempt_ready {
  actor_id actor;
  worker_id worker;
  /// The job that sent it (the transport sets it for a job's connection; nil: head, node or
  /// this process).
  job_id sender_job;
  CELER_MSGPACK_DEFINE(actor, worker, sender_job)
};
// ---- head -> node: the head was started again and recovered its tables: the node
// registers again (a no-op when the head knows it as it is),
// announces its durable objects, and resends the lease requests it spilled to the head
// lately (the old head may have lost them; a node holding one already drops the copy)
struct head_restarted {
  std::string reason;
  CELER_MSGPACK_DEFINE(reason)
};
// ---- core -> core of the same job: message `seq` of mailbox `box` in the receiving process
// (celer::peer::send; the collectives' chunks). Bulk: a large payload is a frame of its own.
// Between processes of one machine the bytes may be in a lane instead (core/peer_link.hpp):
// `lane_size` bytes at position `lane_at` of the ring the receiver granted `from`, the
// notice claiming the ring from `lane_claim` (the bytes before `lane_at` are the ring's end,
// skipped). Boxes named celer.peer.* are the links' own (asking for a lane, granting one).
struct peer_data {
  std::string box;
  std::uint64_t seq = 0;
  bulk payload;
  /// The job that sent it (the transport sets it for a job's connection; nil: head, node or
  /// this process). The receiving core takes it only from its own job.
  job_id sender_job;
  /// The sending process (its core's id).
  unique_id from;
  std::uint64_t lane_claim = 0, lane_at = 0, lane_size = 0;
  CELER_MSGPACK_DEFINE(box, seq, payload, sender_job, from, lane_claim, lane_at, lane_size)
};

// ---- node `node` -> head: send me the package (a job's working directory,
// task_spec::package) that job `job` was submitted with
struct package_fetch {
  std::string digest;
  job_id job;
  node_id node;
  /// The node has the package unpacked already (for another job): the head answers with no
  /// archive, only whether `job` may use it (protocol 19).
  bool unpacked = false;
  CELER_MSGPACK_DEFINE(digest, job, node, unpacked)
};
// ---- head -> node: the package's archive (jobs/package.hpp), or why not (`error`, with
// the archive empty). The node checks the archive against the digest before unpacking it.
struct package_data {
  std::string digest;
  bulk archive;
  std::string error;
  /// The job that was submitted with it (protocol 19): the node lets that job's workers,
  /// and no other job's, start in its copy.
  job_id job;
  CELER_MSGPACK_DEFINE(digest, archive, error, job)
};

// ---- worker -> owner core: tasks it was sent and will not run (queued behind a call that
// blocked in get, or withdrawn by the owner); each is returned whole, at the attempt it was
// sent as. The worker removed them from its queue before sending: they never start there.
struct tasks_returned {
  worker_id worker;
  std::vector<task_spec> tasks;
  /// The function of the call that blocked in get ("" when the owner asked for them back,
  /// or when the call waits for its own arguments).
  std::string blocked_function;
  /// The job that sent it (the transport sets it for a job's connection).
  job_id sender_job;
  /// Given back because the running call waits (in get, or for its arguments): the owner
  /// sends that worker nothing more until the call finishes (false: a withdrawal's answer).
  bool blocked = false;
  CELER_MSGPACK_DEFINE(worker, tasks, blocked_function, sender_job, blocked)
};
// ---- owner core -> leased worker: give back these tasks unless they have started
struct withdraw_tasks {
  std::vector<task_id> tasks;
  /// Where to send tasks_returned.
  address owner;
  job_id sender_job;
  CELER_MSGPACK_DEFINE(tasks, owner, sender_job)
};
// ---- local: a worker's receiving thread -> the worker: its inbox has work
struct worker_wake {
  std::int32_t unused = 0;
  CELER_MSGPACK_DEFINE(unused)
};
// ---- head -> a driver's core: the head ended its job (the driver was silent for longer
// than node_timeout_ms: its actors and workers were stopped); every wait fails with `reason`
struct job_ended {
  job_id job;
  std::string reason;
  CELER_MSGPACK_DEFINE(job, reason)
};

// ---- owner core -> the worker running (or holding) one of its tasks or actor calls:
// celer::cancel. Queued there: taken out and answered with a cancelled result; running: its
// cooperative flag is set (celer::is_cancelled()), and with `recursive` the tasks and calls
// it submitted are cancelled too. A worker of another job ignores it.
struct cancel_task {
  task_id task;
  /// The owner (where the cancelled result goes).
  address owner;
  /// Also cancel what the task submitted (and what those submitted, and so on), with
  /// `force` as given to celer::cancel.
  bool recursive = true;
  bool force = false;
  /// Who cancelled it, for the error ("process 12 (its owner)", ...).
  std::string who;
  job_id sender_job;
  CELER_MSGPACK_DEFINE(task, owner, recursive, force, who, sender_job)
};
// ---- worker -> owner core: value `index` (from 0) of a streaming generator (task_spec::
// generator), in order, inline or in the worker's node's store (`value`). `worker` is where
// the owner's generator_ack goes. The owner keeps the first copy of each index (a retry's
// values it has already are dropped) and ignores one from another job (`sender_job`).
struct generator_item {
  task_id task;
  std::int32_t attempt = 1;
  std::uint64_t index = 0;
  object_payload value;
  address worker;
  job_id sender_job;
  CELER_MSGPACK_DEFINE(task, attempt, index, value, worker, sender_job)
};
// ---- owner core -> the worker running a generator: its consumer has taken `consumed`
// values (or, at UINT64_MAX, dropped the stream: produce without waiting). A generator
// with a window (task_spec::generator > 0) waits while it is that far ahead.
struct generator_ack {
  task_id task;
  std::uint64_t consumed = 0;
  job_id sender_job;
  CELER_MSGPACK_DEFINE(task, consumed, sender_job)
};
// One line user code printed with celer::print, and where it came from (protocol 22).
struct log_line {
  std::string text;
  /// The task or actor method that printed it (empty: outside any).
  std::string function;
  actor_id actor;
  worker_id worker;
  node_id node;
  std::int32_t pid = 0;
  CELER_MSGPACK_DEFINE(text, function, actor, worker, node, pid)
};
// ---- a job's worker -> head -> the job's driver core (protocol 22): lines its code printed
// with celer::print, for the driver's console (Ray's log monitor). The head passes them to
// the driver whose heartbeats it hears; the driver deduplicates lines several workers print
// alike (docs/api.md, "Printing to the driver's console").
struct user_log {
  job_id job;
  std::vector<log_line> lines;
  /// At most this many lines a message, each at most max_text bytes (longer ones are cut).
  static constexpr std::size_t max_lines = 256;
  static constexpr std::size_t max_text = 4096;
  CELER_MSGPACK_DEFINE(job, lines)
};

/// Who may send a message over the wire (messages.def says it for each).
enum class senders : std::uint8_t { local, cluster, any, shared };

template <class Ignored, class... Messages>
using variant_of = std::variant<Messages...>;
/// Every message; its index is its type tag on the wire (messages.def's order).
using message = variant_of<void
#define CELER_MESSAGE(type, who, doc) , type
#include "protocol/messages.def"
#undef CELER_MESSAGE
                           >;

/// Who may send the message with type tag `index` over the wire.
senders senders_of(std::size_t index) noexcept;
/// The name of the message with type tag `index` ("unknown" past the last).
const char* name_of_type(std::size_t index) noexcept;
/// The table of messages.def as Markdown (docs/protocol.md holds it).
std::string markdown_table();

/// The message's name, for logs.
const char* name_of(const message& m);

} // namespace celer::protocol

