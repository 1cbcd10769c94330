#pragma once
/// Options of `celer::init`, of tasks and of actors. Fields mirror Ray's; use designated
/// initialisers:
///
///   celer::init({.num_cpus = 4});
///   celer::task(train).options({.num_cpus = 2, .num_gpus = 0.5}).remote(cfg);
///   celer::actor(make_counter).options({.name = "counter", .max_concurrency = 4}).remote(0);
///   celer::task(step).options({.num_gpus = 1, .accelerator_type = "A100",
///                              .label_selector = {"zone=a", "kind!=spot"}}).remote(x);

#include <celer/ids.hpp>

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <typeinfo>
#include <utility>
#include <vector>

namespace celer {

/// How the scheduler chooses among the nodes (and GPUs) that fit a request.
struct scheduling_strategy {
  enum class kind : std::uint8_t {
    /// The default: packs work onto busy nodes until they pass a load threshold, then
    /// spreads; prefers the node that already holds most of the arguments' bytes.
    hybrid,
    /// Round-robin over the nodes that fit.
    spread,
    /// On `node` only (hard), or there while it fits and elsewhere otherwise (soft).
    node_affinity,
    /// The GPU with the earliest expected finish, given its speed score and its queue
    /// (work that asks for no GPU is placed as by `hybrid`).
    speed_weighted,
    /// Inside a bundle of placement group `group` (bundle `bundle`, or any when -1), on
    /// the resources the group reserved.
    placement_group,
  };
  kind how = kind::hybrid;
  node_id node;
  bool soft = false;
  placement_group_id group;
  int bundle = -1;

  static scheduling_strategy hybrid() { return {}; }
  static scheduling_strategy spread() { return {kind::spread}; }
  static scheduling_strategy speed_weighted() { return {kind::speed_weighted}; }
  static scheduling_strategy node_affinity(node_id node, bool soft = false) {
    return {kind::node_affinity, node, soft};
  }
  static scheduling_strategy in_placement_group(placement_group_id group, int bundle = -1) {
    return {kind::placement_group, {}, false, group, bundle};
  }
};

/// How a placement group's bundles are laid over the nodes.
enum class bundle_strategy : std::uint8_t {
  pack,           ///< as few nodes as possible (one if it fits)
  spread,         ///< as many nodes as possible
  strict_pack,    ///< all on one node, or not at all
  strict_spread,  ///< each on a node of its own, or not at all
};

/// Resources one bundle of a placement group reserves.
struct bundle {
  double num_cpus = 0;
  double num_gpus = 0;
  double memory = 0;
  /// Custom resources, each above 0.
  std::map<std::string, double> resources;
  /// What each GPU of the bundle must be (see task_options).
  std::string accelerator_type;
  double gpu_memory_gb = 0;
};

/// Options of `celer::create_placement_group`.
struct placement_group_options {
  std::vector<bundle> bundles;
  bundle_strategy strategy = bundle_strategy::pack;
  /// Shown in `celer list placement-groups`. Unique among the job's live groups: a second
  /// group with the name of one not yet removed is refused (already_exists).
  std::string name;
};

/// How `celer::init` runs the runtime.
struct init_options {
  /// Cluster address "host:port"; empty means: use CELER_ADDRESS, else run embedded.
  std::string address;
  /// CPUs the embedded node offers; 0 means the machine's hardware threads.
  double num_cpus = 0;
  /// GPUs the embedded node offers; 0 means the devices NVML finds (none without a driver),
  /// or those `gpus` declares.
  double num_gpus = 0;
  /// GPUs the embedded node declares instead of discovering, as `celer start --gpus`
  /// takes them: "A100-80GB:2,V100-16GB:2@15.7" (model-memory:count@speed score).
  std::string gpus;
  /// Custom resources of the embedded node, e.g. {{"disk_ssd", 1}}.
  std::map<std::string, double> resources;
  /// Bytes of memory the embedded node offers for `memory` requests; 0 means physical memory.
  double memory = 0;
  /// Bytes of shared memory for the embedded node's object store; 0 means the
  /// object_store_memory knob, else 30% of physical memory. Past it, objects spill to disk.
  double object_store_memory = 0;
  /// The job's priority: its tasks and actors get it unless their options name one
  /// (higher goes first; 0 by default). Unset: the job_priority knob (CELER_JOB_PRIORITY).
  std::optional<int> priority;
  /// Environment variables of every task and actor the job starts (Ray's
  /// `ray.init(runtime_env={"env_vars": ...})`), over those `celer submit --env` gave the
  /// job; a task's or actor's own env_vars go over these. The driver's own environment is
  /// left as it is.
  std::map<std::string, std::string> env_vars;
};

/// Resources a task or actor needs while it runs.
struct resource_request {
  double num_cpus = 1;
  double num_gpus = 0;
  double memory = 0;
  std::map<std::string, double> custom;
};

/// Which exceptions thrown by a task's own code run it again (task_options::
/// retry_exceptions), as Ray's `retry_exceptions=True` or `=[ValueError, ...]`: none
/// (`false`, the default), all (`true`), or those whose type is listed:
///
///   .retry_exceptions = true
///   .retry_exceptions = {"std::runtime_error", "app::flaky_io"}
///   .retry_exceptions = celer::retry_on<std::runtime_error, app::flaky_io>()
///
/// A type matches by the name celer::task_error::exception_type() gives the thrown
/// exception: its exact (most derived) type, demangled; its base classes do not match.
/// System failures (a worker or node that died) are retried whatever this says.
struct exceptions_to_retry {
  exceptions_to_retry(bool every = false) : all(every) {}  // NOLINT: implicit, `= true`
  exceptions_to_retry(std::initializer_list<std::string> names) : types(names) {}  // NOLINT
  exceptions_to_retry(std::vector<std::string> names) : types(std::move(names)) {}  // NOLINT
  bool all = false;
  std::vector<std::string> types;
  /// Whether any exception is retried.
  [[nodiscard]] bool any() const noexcept { return all || !types.empty(); }
  /// Whether an exception of (demangled) type `type` is.
  [[nodiscard]] bool covers(std::string_view type) const {
    if (all) return true;
    for (const auto& t : types) {
      if (t == type) return true;
    }
    return false;
  }
  friend bool operator==(const exceptions_to_retry&, const exceptions_to_retry&) = default;
};

/// The demangled name of a type, as task_error::exception_type() spells a thrown one
/// ("std::runtime_error").
std::string type_name_of(const std::type_info& type);

/// retry_exceptions for the exception types E...: `celer::retry_on<std::runtime_error>()`.
template <class... E>
exceptions_to_retry retry_on() {
  return exceptions_to_retry(std::vector<std::string>{type_name_of(typeid(E))...});
}

/// Options of one task submission.
struct task_options {
  /// CPUs held while the task runs (fractions allowed).
  double num_cpus = 1;
  /// GPUs held while the task runs: fractions up to 1, whole numbers above.
  double num_gpus = 0;
  /// Bytes of memory reserved while the task runs.
  double memory = 0;
  /// Custom resources, e.g. {{"disk_ssd", 1}}; each amount above 0 (0 or less is
  /// invalid_argument: leave the name out to ask for none).
  std::map<std::string, double> resources;
  /// A GPU model the devices must be ("A100", "V100", "H200"), matched against the model
  /// name; empty takes any.
  std::string accelerator_type;
  /// The least memory, in GB (10^9 bytes), each GPU given must have.
  double gpu_memory_gb = 0;
  /// Node labels to match: "key=value", "key!=value", "key=a|b" (one of), "key!=a|b",
  /// "key" (has the label), "!key" (has not).
  std::vector<std::string> label_selector;
  /// How to choose among the nodes that fit.
  scheduling_strategy scheduling;
  /// Retries after a system failure: the task's worker process or its node died. -1
  /// retries without limit, 0 never. A retry goes to a new worker before newer tasks.
  int max_retries = 3;
  /// Also retry when the task's own code throws (application errors), counted against the
  /// same max_retries: every exception (`true`) or those of the listed types
  /// (exceptions_to_retry). Off by default: an exception reaches the caller at once.
  exceptions_to_retry retry_exceptions = false;
  /// A name shown in errors and listings; defaults to the function's name.
  std::string name;
  /// Write the result through to the node's disk (synced) before it is handed out, so that
  /// it survives the death of the worker and of the node agent (see put_options::durable).
  bool durable = false;
  /// Higher goes first, and a task that cannot be placed preempts preemptible actors of
  /// lower priority. Unset: the priority of the task or actor submitting it, else the job's.
  std::optional<int> priority;
  /// Streaming generators (a function returning celer::generator<T>): how many values it
  /// may make that its consumer has not taken (ref_stream::next) before it waits, as Ray's
  /// _generator_backpressure_num_objects; -1 (the default): it never waits. While it
  /// waits its CPUs are lent to its node, as in a get.
  int generator_backpressure = -1;
  /// Environment variables the task's worker process has (Ray's runtime_env env_vars),
  /// over those of the job (init_options::env_vars, `celer submit --env`) and of the task or
  /// actor submitting it, which it inherits. A worker is reused only for work with the same
  /// ones. Names are [A-Za-z_][A-Za-z0-9_]*; CELER_* (but CELER_LOG_LEVEL),
  /// CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER and TMPDIR are the runtime's
  /// (invalid_argument). Embedded, workers are threads of your program and share its
  /// environment: read them with celer::getenv, which sees them both ways.
  std::map<std::string, std::string> env_vars;
};

/// Options of one actor method call: `handle.task(&T::m).options({...}).remote(...)`.
struct call_options {
  /// For a method that is a streaming generator: as task_options::generator_backpressure.
  int generator_backpressure = -1;
  /// The concurrency group (actor_options::concurrency_groups) this call runs in, whatever
  /// its method's; empty: its method's. A group the actor lacks fails the call
  /// (invalid_argument).
  std::string concurrency_group;
};

/// Options of `celer::cancel`.
struct cancel_options {
  /// Kill the worker process running the task (tasks only, cluster mode), as Ray's
  /// force=True does: for code that never looks at celer::is_cancelled(). Without it a
  /// running task is only told, through its flag. A worker of an embedded node is a thread
  /// of your program and cannot be killed: there force acts as the flag alone.
  bool force = false;
  /// Also cancel the tasks and actor calls the cancelled one submitted, and theirs.
  bool recursive = true;
};

/// Options of `celer::put`.
struct put_options {
  /// Write the object through to the node's disk, with a synced write-ahead log, before
  /// `put` returns: it survives the death of the process that put it and of the node
  /// agent (restarted on the same machine), and is found again. Freed when its job ends.
  bool durable = false;
};

/// Options of `celer::kill`.
struct kill_options {
  /// True (the default, as Ray's): the actor is dead for good. False: an actor with
  /// restarts left (actor_options::max_restarts) is stopped as if its process died and is
  /// started again, counted against its restarts; calls it was running fare as after a
  /// death (actor_options::max_task_retries). An actor not running yet (starting, or
  /// restarting) is left to start; one with no restarts left dies.
  bool no_restart = true;
};

/// Options of one actor creation.
/// How long an actor lives (actor_options::lifetime; Ray's `lifetime=`).
enum class lifetime : std::uint8_t {
  job,       ///< until its job ends (or it is killed, or exits): the default
  detached,  ///< until it is killed (celer::kill, `celer actor kill`), whatever job made it
};

struct actor_options {
  /// CPUs the actor holds for its lifetime. Like Ray, 0 by default so that many idle actors
  /// fit on a node; ask for 1 or more for actors that compute.
  double num_cpus = 0;
  double num_gpus = 0;
  double memory = 0;
  /// Custom resources, each above 0 (as task_options::resources).
  std::map<std::string, double> resources;
  /// A GPU model the devices must be ("A100", "V100", "H200"), matched against the model
  /// name; empty takes any.
  std::string accelerator_type;
  /// The least memory, in GB (10^9 bytes), each GPU given must have.
  double gpu_memory_gb = 0;
  /// Node labels to match: "key=value", "key!=value", "key=a|b" (one of), "key!=a|b",
  /// "key" (has the label), "!key" (has not).
  std::vector<std::string> label_selector;
  /// How to choose among the nodes that fit.
  scheduling_strategy scheduling;
  /// A cluster-wide name; `celer::get_actor<T>(name)` finds the actor by it.
  std::string name;
  /// The namespace the name lives in (Ray's `namespace=`): a shared one that every job naming
  /// it shares. Empty: CELER_NAMESPACE when the process has it, else the job's own (no
  /// other job sees or takes the name). Named here, it is used for this actor only; the
  /// job's default stays as it was.
  std::string name_space;
  /// With a name: when a live actor already has it, `remote()` returns that actor's handle
  /// instead of failing with already_exists (Ray's get_if_exists): many processes can each
  /// ask for "the" actor of a name and share one. The factory does not run again and these
  /// options are not applied to it; invalid_argument when it is of another class.
  bool get_if_exists = false;
  /// celer::lifetime::detached: the actor outlives its creator's job, and a later driver
  /// finds it by name (`celer::get_actor<T>(name, name_space)`) and calls it, until
  /// `celer::kill` or `celer actor kill` stops it (Ray's `lifetime="detached"`). It needs a
  /// name in a shared namespace (name_space, or CELER_NAMESPACE) that the job is let into
  /// (a driver started with the token is let into every one; a submitted job into those
  /// its submission names), and runs as that namespace's, not the creator's, job: calls to
  /// it from any job let into the namespace pass their arguments and results by value
  /// (no object refs; docs/scheduling.md, "Detached actors"). Embedded, it lives until
  /// celer::shutdown like any actor.
  celer::lifetime lifetime = celer::lifetime::job;
  /// Calls the actor runs at once. 1 (the default) runs calls one at a time, in order.
  int max_concurrency = 1;
  /// Named groups of threads (Ray's concurrency groups): `{{"io", 4}, {"compute", 1}}`.
  /// The calls of a method in a group run on that group's threads, at most its size at
  /// once, beside the other groups' and the rest (which run as max_concurrency says): a
  /// slow "io" call never holds up a "compute" one. Put methods in groups with
  /// `celer::actor(f).group("io", &T::load, &T::save)`, or one call with
  /// call_options::concurrency_group. Sizes 1 to 1,024; at most 64 groups.
  std::map<std::string, int> concurrency_groups;
  /// Which method (by registered name) runs in which group; actor_builder::group fills it.
  std::map<std::string, std::string> method_groups;
  /// Restarts after the actor's process or node dies, or it is preempted (cluster mode):
  /// 0 never, -1 without limit. A restart runs the factory again with the same arguments
  /// on any node that fits, then the restore hook (actor_builder::on_restart) if any;
  /// `celer::was_restarted()` is true in both. Calls made meanwhile wait for it.
  int max_restarts = 0;
  /// Retries of a call its actor died running (cluster mode, with max_restarts): 0 (the
  /// default) delivers each call at most once, and a call cut short fails with
  /// actor_died_error; above 0 (-1: without limit) a cut-short call is sent again to the
  /// restarted actor, in order, so calls are delivered at least once.
  int max_task_retries = 0;
  /// Calls one process may have pending on the actor (made and not answered) before the
  /// next fails at once with celer::exception(resource_exhausted), as Ray's
  /// PendingCallsLimitExceeded: back-pressure for a caller that makes calls faster than
  /// the actor runs them. -1 (the default): no limit. Applies to every handle of the
  /// actor, each process counting its own calls.
  int max_pending_calls = -1;
  /// The registered method (taking nothing) a restarted actor runs before any call, e.g.
  /// to reload its last checkpoint. Set it with `celer::actor(f).on_restart(&T::restore)`.
  std::string restore_method;
  /// Higher goes first; an actor that cannot be placed preempts preemptible actors of lower
  /// priority to take their resources. Unset: as task_options::priority.
  std::optional<int> priority;
  /// The scheduler may stop this actor for a request of higher priority. It is told first:
  /// its `celer::on_preempt` callback runs, and it is stopped when the callback returns or
  /// after `preemption_grace`, whichever comes first; its handles then fail with
  /// actor_preempted_error.
  bool preemptible = false;
  /// How long a preempted actor has to checkpoint; 0 means the preemption_grace_ms knob.
  std::chrono::milliseconds preemption_grace{0};
  /// Environment variables of the actor's worker process, its factory and every method, as
  /// task_options::env_vars says (over the job's and the creating task's).
  std::map<std::string, std::string> env_vars;
};

} // namespace celer
