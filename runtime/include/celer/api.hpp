#pragma once
/// The API users call: start and stop the runtime, run tasks, create and call actors,
/// store and read objects.
///
///   celer::init(argc, argv);                                   // embedded unless an address is given
///   auto r = celer::task(add).remote(1, 2);                    // object_ref<int>
///   int three = celer::get(r);
///   auto c = celer::actor(make_counter).options({.name = "c"}).remote(0);
///   int five = celer::get(c.task(&counter::incr).remote(5));
///   auto [ready, pending] = celer::wait(refs, /*num_returns=*/1, std::chrono::seconds(5));
///   celer::shutdown();

#include <celer/codec.hpp>
#include <celer/detail/calls.hpp>
#include <celer/error.hpp>
#include <celer/fwd.hpp>
#include <celer/handles.hpp>
#include <celer/ids.hpp>
#include <celer/options.hpp>
#include <celer/ref_stream.hpp>
#include <celer/remote.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace celer {

/// Starts the runtime. Reads `--celer-address=HOST:PORT`, `--celer-num-cpus=N` and
/// `--celer-num-gpus=N` from the command line (and CELER_ADDRESS, CELER_NUM_CPUS,
/// CELER_NUM_GPUS from the environment); with no address, runs embedded in this process,
/// with one, connects to that cluster (the token comes from CELER_TOKEN or, on the head's
/// machine, its session directory).
/// Throws celer::exception(failed_precondition) if already initialised; unauthenticated,
/// unavailable or invalid_argument when the cluster cannot be joined.
///
/// In a worker process (a node agent runs the driver's own binary in worker mode) `init`
/// does not return: it serves tasks until the node stops the worker, then ends the process.
/// Call it before anything the workers should not do.
void init(int argc, char** argv);
/// Starts the runtime with explicit options.
void init(const init_options& options = {});
/// For programs that do work before `init` (a test runner, say): call it first in main.
/// In a worker process it serves tasks and ends the process; otherwise it returns at once.
void serve_if_worker();
/// Stops the runtime: pending work is cancelled, running tasks finish, every thread the
/// runtime started is joined. Waiting `get` calls throw. Safe to call when not initialised.
void shutdown();
/// Whether `init` has been called and `shutdown` has not.
[[nodiscard]] bool is_initialized() noexcept;
/// The node this code runs on (a driver in cluster mode: the node it submits tasks to).
[[nodiscard]] node_id current_node_id();
/// The worker this code runs on; nil in the driver.
[[nodiscard]] worker_id current_worker_id();
/// Bundles of resources reserved together, all or nothing, on one node or across several
/// (bundle_strategy); tasks and actors then run inside a bundle, on what it reserved.
///
///   auto pg = celer::create_placement_group({.bundles = {{.num_cpus = 1, .num_gpus = 1},
///                                                       {.num_cpus = 1, .num_gpus = 1}},
///                                           .strategy = celer::bundle_strategy::strict_spread});
///   pg.ready(std::chrono::seconds(30));
///   auto t = celer::task(train).options({.num_gpus = 1, .scheduling = pg.bundle(0)}).remote();
///   celer::remove_placement_group(pg);   // stops what runs in it
class placement_group {
public:
  placement_group() = default;
  explicit placement_group(placement_group_id id) : id_(id) {}
  [[nodiscard]] const placement_group_id& id() const noexcept { return id_; }
  /// Waits until every bundle is reserved: true, or false when `timeout` passes first.
  /// Throws celer::exception (failed_precondition) once the group was removed.
  bool ready(std::chrono::milliseconds timeout = std::chrono::seconds(60)) const;
  /// The strategy that runs work in bundle `index` (-1: any bundle it fits in).
  [[nodiscard]] scheduling_strategy bundle(int index = -1) const {
    return scheduling_strategy::in_placement_group(id_, index);
  }

private:
  placement_group_id id_;
};

/// Asks the cluster to reserve the bundles. Returns at once (see placement_group::ready);
/// throws celer::exception (resource_exhausted, saying why) when no layout of the cluster's
/// nodes could ever hold them, invalid_argument for a bad bundle, already_exists when a
/// live group of this job has its name.
placement_group create_placement_group(const placement_group_options& options);
/// Gives the bundles back; tasks and actors running in them are stopped.
void remove_placement_group(const placement_group& group);

/// A placement group as the head sees it.
struct placement_group_state {
  placement_group_id id;
  std::string name;
  bundle_strategy strategy = bundle_strategy::pack;
  /// "pending", "created" or "removed".
  std::string state;
  /// The node of each bundle (nil while pending).
  std::vector<node_id> nodes;
  /// Why it is pending, or why it was removed.
  std::string why;
};
/// Every placement group of the cluster (`celer list placement-groups` prints them).
std::vector<placement_group_state> list_placement_groups();

/// Why the task that returns `ref` (submitted by this process) has not started: which
/// resources it waits for, on which nodes. "" once it runs or has run.
template <class T>
[[nodiscard]] std::string pending_reason(const object_ref<T>& ref) {
  return detail::pending_reason_of_task(ref.id());
}
/// Why the actor has not started: which resources it waits for, on which nodes. "" once
/// it is alive (or dead: calls then fail with why).
template <class T>
[[nodiscard]] std::string pending_reason(const actor_handle<T>& actor) {
  return detail::pending_reason_of_actor(actor.id());
}

/// The GPUs given to the task or actor running this code, as device indices on its node
/// (a worker process sees exactly these in CUDA_VISIBLE_DEVICES); empty in the driver and
/// for work that asked for no GPU. Fractional requests sharing a device see the same index.
[[nodiscard]] std::vector<int> gpu_ids();
/// Reports how busy this task's or actor's GPUs are (0..1) and the bytes of their memory
/// in use: what `celer status` shows for declared devices, which NVML cannot sample.
/// Nothing happens outside work that holds GPUs.
void report_gpu_usage(double utilisation, std::uint64_t memory_used_bytes);
/// What a preemptible actor is told when the scheduler preempts it for higher-priority work:
/// it is stopped at `deadline` at the latest (sooner once its callback returns).
struct preemption {
  std::chrono::steady_clock::time_point deadline;
  /// Which request, of which priority, needs its resources, and on which node.
  std::string reason;
};
/// Inside an actor (created with actor_options::preemptible): `callback` runs when the actor
/// is preempted, on a thread of its own beside any call the actor is running, so guard what
/// it shares with the actor's methods. Checkpoint there; the actor is stopped when it
/// returns or at the deadline. Without a callback a preempted actor is stopped at once.
/// Calling it again replaces the callback; invalid_argument outside an actor.
void on_preempt(std::function<void(const preemption&)> callback);
/// Inside an actor: whether this instance was started again after the actor died
/// (actor_options::max_restarts), in its factory, restore hook and methods; false elsewhere.
[[nodiscard]] bool was_restarted();
/// Inside an actor: the preemption notice once one came, else nullopt. A long call can poll
/// it and return early (embedded mode stops an actor only between calls).
[[nodiscard]] std::optional<preemption> preemption_notice();
/// Total and available resources of the cluster, by name ("CPU", "GPU", "memory", custom).
[[nodiscard]] std::map<std::string, double> cluster_resources();
[[nodiscard]] std::map<std::string, double> available_resources();

/// The object store of the node this code runs on, in numbers.
struct object_store_stats {
  std::uint64_t capacity_bytes = 0;
  std::uint64_t bytes_in_memory = 0;
  std::uint64_t objects_in_memory = 0;
  /// Spilled objects not in memory now (restored when read).
  std::uint64_t objects_on_disk_only = 0;
  std::uint64_t spilled_objects = 0, spilled_bytes = 0;
  std::uint64_t restored_objects = 0, restored_bytes = 0;
  /// Objects copied here from other nodes.
  std::uint64_t pulled_objects = 0, pulled_bytes = 0;
};
[[nodiscard]] object_store_stats local_object_store_stats();

/// Several return values, each its own object with its own ref (Ray's num_returns): a
/// remote function or method returning `celer::returns<A, B, ...>` (which is
/// `std::tuple<A, B, ...>`) gives a std::tuple of refs from `.remote(...)`:
///
///   celer::returns<std::vector<float>, std::vector<float>> split(std::vector<float> data, double at);
///   auto [train, test] = celer::task(split).remote(data, 0.8);   // two object_refs
///   auto rows = celer::get(train);                                 // test's ref may be dropped
///
/// Each object is freed when its own refs are gone. If the call fails, every ref holds the
/// failure. A stored one is not made again when its node dies (a task with one return is).
template <class... T>
using returns = std::tuple<T...>;

/// What `celer::task(f)` returns: `.options(o)` sets the task's options, `.remote(args...)`
/// submits it and returns the ref to its result.
template <class F>
class task_builder {
public:
  using result_type = detail::ref_value_t<detail::remote_result_t<F>>;
  explicit task_builder(F f) : entry_(&detail::entry_of(f, "function")) {
    static_assert(detail::remote_traits<F>::kind == detail::remote_kind::function,
                  "celer::task takes a free function; use celer::actor for factories");
  }
  task_builder& options(task_options o) {
    options_ = std::move(o);
    return *this;
  }
  /// One ref to the result; a std::tuple of refs, one per value, when `f` returns a
  /// std::tuple (multiple returns); a ref_stream of its values when `f` is a streaming
  /// generator (returns celer::generator<T>).
  using refs_type = typename detail::returns_t<detail::remote_result_t<F>>::refs;
  template <class... A>
  refs_type remote(A&&... args) const {
    using returns = detail::returns_t<detail::remote_result_t<F>>;
    if constexpr (returns::stream) {
      return refs_type(
        detail::submit_stream(*entry_, detail::encode_call<F>(std::forward<A>(args)...), options_));
    } else if constexpr (returns::split) {
      return detail::restore_all<refs_type>(detail::submit_task(
        *entry_, detail::encode_call<F>(std::forward<A>(args)...), options_, returns::count));
    } else {
      return detail::restore<result_type>(
        detail::submit_task(*entry_, detail::encode_call<F>(std::forward<A>(args)...), options_));
    }
  }

private:
  const detail::remote_entry* entry_;
  task_options options_;
};

/// What `celer::actor(factory)` returns: `.options(o)` and `.on_restart(&T::hook)` set how
/// the actor runs, `.remote(args...)` creates it and returns its handle.
template <class F>
class actor_builder {
public:
  using actor_type = typename detail::remote_traits<F>::actor_class;
  explicit actor_builder(F f) : entry_(&detail::entry_of(f, "actor factory")) {
    static_assert(detail::remote_traits<F>::kind == detail::remote_kind::factory,
                  "celer::actor takes a factory returning T*, unique_ptr<T> or shared_ptr<T>");
  }
  actor_builder& options(actor_options o) {
    auto hook = std::move(options_.restore_method);
    auto groups = std::move(options_.method_groups);
    options_ = std::move(o);
    if (options_.restore_method.empty()) options_.restore_method = std::move(hook);
    for (auto& [method, group] : groups) options_.method_groups.try_emplace(method, std::move(group));
    return *this;
  }
  /// Runs `methods` (registered members of the actor's class or its bases) in concurrency
  /// group `name` (one of actor_options::concurrency_groups):
  /// `celer::actor(make_server).options({.concurrency_groups = {{"io", 4}}}).group("io", &server::load)`.
  template <class... Methods>
  actor_builder& group(const std::string& name, Methods... methods) {
    static_assert(sizeof...(Methods) > 0, "group takes the methods to run in it");
    static_assert(((detail::remote_traits<Methods>::kind == detail::remote_kind::method) && ...),
                  "group takes member function pointers, e.g. &server::load");
    static_assert((std::is_base_of_v<typename detail::remote_traits<Methods>::actor_class, actor_type> && ...),
                  "a method given to group does not belong to this actor's class");
    (options_.method_groups.insert_or_assign(detail::entry_of(methods, "actor method").name, name), ...);
    return *this;
  }
  /// The method a restarted actor runs after its factory and before any call (to reload
  /// its last checkpoint): a registered member of the actor's class taking nothing.
  template <class Method>
  actor_builder& on_restart(Method hook) {
    static_assert(detail::remote_traits<Method>::kind == detail::remote_kind::method,
                  "on_restart takes a member function pointer, e.g. &counter::restore");
    static_assert(std::is_base_of_v<typename detail::remote_traits<Method>::actor_class, actor_type>,
                  "the restore hook does not belong to this actor's class");
    static_assert(std::tuple_size_v<detail::remote_args_t<Method>> == 0,
                  "the restore hook takes no arguments");
    options_.restore_method = detail::entry_of(hook, "restore hook").name;
    return *this;
  }
  template <class... A>
  actor_handle<actor_type> remote(A&&... args) const {
    return actor_handle<actor_type>(
      detail::create_actor(*entry_, detail::encode_call<F>(std::forward<A>(args)...), options_));
  }

private:
  const detail::remote_entry* entry_;
  actor_options options_;
};

/// What `handle.task(&T::method)` returns: `.remote(args...)` calls the method on the actor
/// and returns the ref to its result.
template <class Method>
class actor_call_builder {
public:
  using result_type = detail::ref_value_t<detail::remote_result_t<Method>>;
  actor_call_builder(actor_id actor, Method m)
    : actor_(actor), entry_(&detail::entry_of(m, "actor method")) {}
  /// Options of this call (a generator method's back-pressure).
  actor_call_builder& options(call_options o) {
    options_ = o;
    return *this;
  }
  using refs_type = typename detail::returns_t<detail::remote_result_t<Method>>::refs;
  template <class... A>
  refs_type remote(A&&... args) const {
    using returns = detail::returns_t<detail::remote_result_t<Method>>;
    if constexpr (returns::stream) {
      return refs_type(detail::submit_actor_stream(
        actor_, *entry_, detail::encode_call<Method>(std::forward<A>(args)...), options_));
    } else if constexpr (returns::split) {
      return detail::restore_all<refs_type>(detail::submit_actor_call(
        actor_, *entry_, detail::encode_call<Method>(std::forward<A>(args)...), options_, returns::count));
    } else {
      return detail::restore<result_type>(detail::submit_actor_call(
        actor_, *entry_, detail::encode_call<Method>(std::forward<A>(args)...), options_));
    }
  }

private:
  actor_id actor_;
  const detail::remote_entry* entry_;
  call_options options_;
};

template <class T>
template <class Method>
actor_call_builder<Method> actor_handle<T>::task(Method method) const {
  static_assert(detail::remote_traits<Method>::kind == detail::remote_kind::method,
                "handle.task takes a member function pointer, e.g. &counter::incr");
  static_assert(std::is_base_of_v<typename detail::remote_traits<Method>::actor_class, T>,
                "the method does not belong to this actor's class");
  return actor_call_builder<Method>(id_, method);
}

/// Starts a task of the registered free function `f`.
template <class F>
task_builder<F> task(F f) {
  return task_builder<F>(f);
}

/// Starts creating an actor with the registered factory `f`.
template <class F>
actor_builder<F> actor(F f) {
  return actor_builder<F>(f);
}

/// Stores `value` in the object store and returns a reference to it. Values above
/// inline_object_bytes (100 KiB) are packed straight into the node's shared memory (one
/// copy); readers on the node map them without another. Throws celer::exception
/// (resource_exhausted) when the store cannot hold it, with the sizes.
template <class T>
object_ref<std::decay_t<T>> put(T&& value, const put_options& options = {}) {
  detail::size_counter counted;
  msgpack::pack(counted, value);
  if (counted.size <= detail::inline_object_limit() && !options.durable) {
    // Its size is known: packed once, into a buffer of exactly that size.
    std::string packed(counted.size, '\0');
    detail::memory_writer w{packed.data()};
    msgpack::pack(w, value);
    return detail::restore<std::decay_t<T>>(detail::put_payload(std::move(packed)));
  }
  return detail::restore<std::decay_t<T>>(
    detail::put_stored(counted.size, counted.first, options, [&](char* out) {
      detail::memory_writer w{out};
      msgpack::pack(w, value);
    }));
}

/// Waits for the object and returns its value; throws task_error, actor_died_error,
/// object_lost_error, infeasible_error or celer::exception when it holds an error.
template <class T>
T get(const object_ref<T>& ref) {
  auto got = detail::fetch({detail::erase(ref)}, std::nullopt);
  return detail::decode_result<T>(got.front());
}

/// Like `get(ref)`, but throws get_timeout_error when `timeout` passes first.
template <class T, class Rep, class Period>
T get(const object_ref<T>& ref, std::chrono::duration<Rep, Period> timeout) {
  auto got = detail::fetch({detail::erase(ref)}, std::chrono::nanoseconds(timeout));
  return detail::decode_result<T>(got.front());
}

/// Reads several objects; the first error found is thrown.
template <class T>
std::vector<T> get(const std::vector<object_ref<T>>& refs, timeout_t timeout = {}) {
  static_assert(!std::is_void_v<T>, "use celer::wait for object_ref<void>");
  std::vector<object_ref<void>> erased;
  erased.reserve(refs.size());
  for (const auto& r : refs) erased.push_back(detail::erase(r));
  auto got = detail::fetch(erased, timeout);
  std::vector<T> out;
  out.reserve(got.size());
  for (const auto& g : got) out.push_back(detail::decode_result<T>(g));
  return out;
}

/// Like `get`, but returns the error as a value instead of throwing it (timeouts included).
template <class T>
expected<T> try_get(const object_ref<T>& ref, timeout_t timeout = {}) {
  try {
    auto got = detail::fetch({detail::erase(ref)}, timeout);
    if (!got.front().ok) return detail::to_error(got.front().fail);
    const auto& f = got.front();
    return detail::unpack<T>(f.bytes(), "the object's value", f.keep ? &f.keep : nullptr);
  } catch (const exception& e) {
    return error(e.code(), e.what());
  }
}

/// What `wait` returns: the refs that are ready and those still pending, in input order.
template <class T>
struct wait_result {
  std::vector<object_ref<T>> ready;
  std::vector<object_ref<T>> pending;
};

/// Waits until `num_returns` of `refs` are ready (hold a value or an error) or `timeout`
/// passes, whichever comes first.
template <class T>
wait_result<T> wait(const std::vector<object_ref<T>>& refs, std::size_t num_returns = 1,
                    timeout_t timeout = {}) {
  std::vector<object_ref<void>> erased;
  erased.reserve(refs.size());
  for (const auto& r : refs) erased.push_back(detail::erase(r));
  auto ready_idx = detail::wait_ready(erased, num_returns, timeout);
  wait_result<T> out;
  std::vector<bool> is_ready(refs.size(), false);
  for (auto i : ready_idx) is_ready[i] = true;
  for (std::size_t i = 0; i < refs.size(); ++i) {
    (is_ready[i] ? out.ready : out.pending).push_back(refs[i]);
  }
  return out;
}

/// Cancels the task or actor call that makes `ref` (Ray's ray.cancel). Its result fails at
/// once with task_cancelled_error, which says who cancelled it, and it never runs again
/// (not even with retries left):
///   - waiting for a worker, or queued at one: it is taken out and never starts;
///   - running: its flag is set, which it reads through celer::is_cancelled() to stop early
///     (what it returns then is dropped); with `force`, a task's worker process is killed
///     instead (the tasks queued behind it there run elsewhere, unharmed);
///   - with `recursive` (the default), what it submitted is cancelled too.
/// Returns false when there was nothing to cancel: it had finished (or `ref` is a put's).
/// Only the process that submitted the task can cancel it (invalid_argument otherwise), and
/// `force` is for tasks, not actor calls (invalid_argument: use celer::kill).
///
///   auto r = celer::task(long_search).remote(query);
///   celer::cancel(r);
///   try { celer::get(r); } catch (const celer::task_cancelled_error& e) { ... }
template <class T>
bool cancel(const object_ref<T>& ref, const cancel_options& options = {}) {
  return detail::cancel(detail::erase(ref), options.force, options.recursive);
}

/// celer::cancel of a streaming generator (the values it made stay readable; the ref after
/// them fails with task_cancelled_error).
template <class T>
bool cancel(const ref_stream<T>& stream, const cancel_options& options = {}) {
  return detail::cancel(detail::erase(stream.completed()), options.force, options.recursive);
}

/// Inside a task or actor call: whether it was cancelled (celer::cancel) while it runs.
/// Long work checks it now and then and returns early; false outside a task.
[[nodiscard]] bool is_cancelled() noexcept;

/// The live actor registered under `name` (actor_options::name). Throws
/// celer::exception(not_found) when there is none, invalid_argument when it is not a T.
template <class T>
actor_handle<T> get_actor(std::string_view name) {
  return actor_handle<T>(detail::find_named_actor(name, typeid(T).name()));
}

/// The live actor registered under `name` in namespace `name_space` (Ray's
/// `get_actor(name, namespace=...)`): a shared namespace, whichever job made the actor
/// there (a detached actor of a driver that has exited, say). An empty `name_space` is
/// get_actor(name). Throws as get_actor(name).
template <class T>
actor_handle<T> get_actor(std::string_view name, std::string_view name_space) {
  return actor_handle<T>(detail::find_named_actor(name, typeid(T).name(), name_space));
}

/// Stops the actor now. Calls not yet run, and later calls, fail with actor_died_error.
/// With `{.no_restart = false}` an actor with restarts left (actor_options::max_restarts)
/// is stopped as if its process died and starts again, counted against its restarts.
template <class T>
void kill(const actor_handle<T>& handle, const kill_options& options = {}) {
  detail::kill_actor(handle.id(), options.no_restart);
}

} // namespace celer
