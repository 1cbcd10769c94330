#include "core/core_worker.hpp"

#include "config/knobs.hpp"
#include "log.hpp"
#include "protocol/env_vars.hpp"
#include "scheduler/labels.hpp"

#include <cstdlib>
#include <cstring>

#include <unistd.h>

namespace celer {

worker_context*& current_worker_context() noexcept {
  thread_local worker_context* ctx = nullptr;
  return ctx;
}

namespace {

/// The task whose (first) return is `result`: a task id leaves the low 16 bits for the
/// return index (task_ids).
task_id task_of(const object_id& result) {
  return task_id(unique_id{result.hi, result.lo & ~std::uint64_t{0xFFFF}});
}

/// The shared namespace this process names its actors in and looks names up in
/// (CELER_NAMESPACE; empty: its job's own). The head remembers a job's shared namespace
/// from the first process that names it, for the job's other processes.
std::string shared_namespace() {
  const char* ns = std::getenv("CELER_NAMESPACE");
  return ns == nullptr ? std::string() : std::string(ns);
}

protocol::resource_set checked_request(const std::string& what, double cpus, double gpus,
                                       double memory, const std::map<std::string, double>& custom) {
  for (const auto& [name, amount] : custom) {
    // A custom resource named is a resource wanted: zero would ask for nothing and hide a
    // mistake (a computed amount that came out 0); leave the name out instead.
    if (!(amount > 0)) {
      throw exception(error_code::invalid_argument,
                      what + ": custom resource '" + name + "' must be positive, got " +
                        protocol::format_amount(amount) + " (leave it out to ask for none)");
    }
  }
  auto req = protocol::make_request(cpus, gpus, memory, custom);
  if (!req) throw exception(req.error().code(), what + ": " + req.error().message());
  return std::move(*req);
}

/// Where a task or actor may go and how to choose, from its options.
protocol::placement checked_placement(const std::string& what, const std::string& accelerator_type,
                                      double gpu_memory_gb,
                                      const std::vector<std::string>& label_selector,
                                      const scheduling_strategy& strategy) {
  protocol::placement p;
  if (!(gpu_memory_gb >= 0)) {
    throw exception(error_code::invalid_argument,
                    what + ": gpu_memory_gb must be zero or positive, got " +
                      protocol::format_amount(gpu_memory_gb));
  }
  auto labels = scheduling::parse_label_selectors(label_selector);
  if (!labels) throw exception(labels.error().code(), what + ": " + labels.error().message());
  if (strategy.how == scheduling_strategy::kind::node_affinity && strategy.node.nil()) {
    throw exception(error_code::invalid_argument,
                    what + ": node affinity needs a node id (scheduling_strategy::node_affinity)");
  }
  if (strategy.how == scheduling_strategy::kind::placement_group && strategy.group.nil()) {
    throw exception(error_code::invalid_argument,
                    what + ": a placement group strategy needs the group (placement_group::bundle)");
  }
  p.group = strategy.group;
  p.bundle = strategy.bundle;
  p.how = strategy.how;
  p.node = strategy.node;
  p.soft = strategy.soft;
  p.accelerator_type = accelerator_type;
  p.gpu_memory_bytes = static_cast<std::uint64_t>(gpu_memory_gb * 1e9);
  p.labels = std::move(*labels);
  return p;
}

} // namespace

core_worker::core_worker(transport& net, endpoints where)
  : net_(net), where_(std::move(where)), requests_(net_, where_.self, where_.now),
    head_(net_, requests_, where_.head),
    store_(net_, requests_, {where_.self, where_.node, where_.this_node, where_.job},
           [this](const protocol::object_copied& c) { objects_.on_copied(c); }),
    objects_(net_, where_.self, store_, where_.cluster ? &head_ : nullptr),
    streams_(net_, objects_, where_.job),
    tasks_(net_, objects_, ids_,
           {where_.self, where_.node, where_.head, where_.this_node, where_.cluster}, where_.now),
    actors_(net_, objects_, requests_, {where_.self, where_.head}),
    peers_(net_, where_.self, where_.job,
           {.mailbox_bytes = static_cast<std::size_t>(knobs().peer_mailbox_bytes),
            .lane_bytes = static_cast<std::size_t>(knobs().peer_lane_bytes)}),
    local_node_(where_.this_node) {
  objects_.set_rebuilder([this](std::vector<reference_table::rebuild> lost) {
    for (auto& r : lost) tasks_.rebuild(std::move(r));
  });
  lease_reaper_ = std::thread([this] { tasks_.run_reaper(); });
}

core_worker::~core_worker() {
  stop("the core is destroyed");
  lease_reaper_.join();
}

protocol::task_spec core_worker::task_spec_of(const detail::remote_entry& fn, const task_options& options) {
  if (options.max_retries < -1) {
    throw exception(error_code::invalid_argument,
                    fn.name + ": max_retries must be -1 (without limit) or more, got " +
                      std::to_string(options.max_retries));
  }
  protocol::task_spec spec;
  spec.resources =
    checked_request(fn.name, options.num_cpus, options.num_gpus, options.memory, options.resources);
  spec.id = ids_.next();
  spec.kind = protocol::task_kind::normal;
  spec.function = fn.name;
  spec.owner = where_.self;
  spec.job = where_.job;
  spec.binary = where_.binary;
  spec.package = where_.package;
  spec.durable = options.durable;
  spec.where = checked_placement(fn.name, options.accelerator_type, options.gpu_memory_gb,
                                 options.label_selector, options.scheduling);
  spec.priority = options.priority.value_or(default_priority());
  spec.max_retries = options.max_retries;  // the node's memory monitor kills retriable work first
  spec.env_vars = env_vars_of(fn.name, options.env_vars);
  return spec;
}

object_ref<void> core_worker::submit_task(const detail::remote_entry& fn,
                                          std::vector<detail::arg_spec> args,
                                          const task_options& options,
                                          std::uint32_t num_returns,
                                          std::vector<object_ref<void>>* all) {
  auto spec = task_spec_of(fn, options);
  spec.num_returns = num_returns;
  // Held until the table has counted the task's use of them.
  const auto stored = store_large_args(args);
  auto ref = objects_.submit(spec, std::move(args), all);
  note_child(ref.id());
  tasks_.submit(std::move(spec), {options.max_retries, options.retry_exceptions});
  return ref;
}

namespace {

/// A generator's window as task_spec::generator carries it, checked.
std::int32_t window_of(const std::string& function, std::int32_t backpressure) {
  if (backpressure == 0 || backpressure < -1) {
    throw exception(error_code::invalid_argument,
                    function + ": generator_backpressure takes -1 (no limit) or 1 or more values, got " +
                      std::to_string(backpressure));
  }
  return backpressure;
}

} // namespace

object_ref<void> core_worker::submit_stream(const detail::remote_entry& fn, std::vector<detail::arg_spec> args,
                                            const task_options& options) {
  auto spec = task_spec_of(fn, options);
  spec.generator = window_of(fn.name, options.generator_backpressure);
  const auto stored = store_large_args(args);
  auto ref = objects_.submit(spec, std::move(args));
  note_child(ref.id());
  streams_.open(spec);  // before its first value can arrive
  tasks_.submit(std::move(spec), {options.max_retries, options.retry_exceptions});
  return ref;
}

void core_worker::note_child(const object_id& child) {
  if (const auto* ctx = current_worker_context(); ctx != nullptr && !ctx->task.nil()) {
    children_.add(ctx->task, child);
  }
}

namespace {

/// Who cancels, as the cancelled call's error says it.
std::string canceller() {
  if (const auto* ctx = current_worker_context(); ctx != nullptr && !ctx->task.nil()) {
    return "task " + ctx->task.short_hex() + " on worker " + ctx->worker.short_hex() +
           " (celer::cancel)";
  }
  return "celer::cancel in process " + std::to_string(::getpid()) + " (its owner)";
}

} // namespace

bool core_worker::cancel(const object_ref<void>& ref, bool force, bool recursive) {
  objects_.check_running();
  if (ref.owner().id != where_.self.id) {
    throw exception(error_code::invalid_argument,
                    "celer::cancel: object " + ref.id().short_hex() +
                      " was not made by a task this process submitted; only the process that "
                      "submitted a task (its owner) can cancel it");
  }
  const task_id task = task_of(ref.id());
  if (force && actors_.knows_call(task)) {
    throw exception(error_code::invalid_argument,
                    "celer::cancel: force is for tasks; an actor call cannot be cancelled with "
                    "force (stop the actor with celer::kill instead)");
  }
  return cancel_task(task, force, recursive, canceller());
}

bool core_worker::cancel_task(const task_id& task, bool force, bool recursive,
                              const std::string& who) {
  const auto fail = protocol::failure_info::make(detail::failure_kind::cancelled,
                                                 error_code::cancelled, "was cancelled by " + who);
  protocol::cancel_task tell{task, where_.self, recursive, force, who, {}};
  address worker;
  if (actors_.cancel(task, fail, worker)) {
    tell.force = false;
    if (!worker.id.nil()) (void)net_.send(worker, std::move(tell));
    return true;
  }
  auto found = tasks_.cancel(task, force, fail);
  if (found.found == task_submitter::cancelled::state::unknown) return false;
  if (found.found == task_submitter::cancelled::state::pushed) {
    // No lock held: an embedded worker handles it on this thread (and may cancel children).
    if (!found.worker.id.nil()) (void)net_.send(found.worker, std::move(tell));
    if (found.kill) (void)net_.send(found.node, std::move(*found.kill));
  }
  return true;
}

void core_worker::cancel_children(const task_id& parent, bool force, const std::string& who) {
  const std::string why = "the cancel of its parent task " + parent.short_hex() + " (" + who + ")";
  // Force is for tasks: an actor call among the children gets the flag only.
  for (const auto& child : children_.take(parent)) (void)cancel_task(task_of(child), force, true, why);
}

std::map<std::string, std::string> core_worker::env_vars_of(const std::string& what,
                                                            const std::map<std::string, std::string>& own) const {
  if (auto why = protocol::env_vars_problem(own); !why.empty()) {
    throw exception(error_code::invalid_argument, what + ": " + why);
  }
  const auto* ctx = current_worker_context();
  const auto& inherited = ctx != nullptr ? ctx->env_vars : where_.env_vars;
  return own.empty() ? inherited : protocol::merged_env(inherited, own);
}

std::int32_t core_worker::default_priority() const {
  if (const auto* ctx = current_worker_context(); ctx != nullptr) return ctx->priority;
  return where_.priority;
}

object_ref<void> core_worker::put(std::string payload) {
  const task_id t = ids_.next();
  return objects_.put(object_id(unique_id{t.hi, t.lo | 1}), std::move(payload));
}

protocol::object_payload core_worker::store_value(const object_id& id, std::size_t size,
                                                  unsigned char first, bool durable,
                                                  const address& owner, const job_id& job,
                                                  const std::function<void(char*)>& write) {
  return store_.store_value(id, size, first, durable, owner, job, write);
}

object_ref<void> core_worker::put_stored(std::size_t size, unsigned char first, bool durable,
                                         const std::function<void(char*)>& write) {
  const task_id t = ids_.next();
  const object_id id(unique_id{t.hi, t.lo | 1});
  auto v = store_.store_value(id, size, first, durable, where_.self, where_.job, write);
  if (!v.ok) throw exception(v.fail.code, "celer::put: " + v.fail.message);
  return objects_.put(std::move(v), durable);
}

std::vector<object_ref<void>> core_worker::store_large_args(std::vector<detail::arg_spec>& args) {
  const auto limit = static_cast<std::size_t>(knobs().inline_object_bytes);
  std::vector<object_ref<void>> stored;
  for (auto& a : args) {
    if (a.is_ref || a.value.size() <= limit) continue;
    const std::string value = std::move(a.value);
    auto ref = put_stored(value.size(), static_cast<unsigned char>(value[0]), false,
                          [&](char* out) { std::memcpy(out, value.data(), value.size()); });
    a = detail::arg_spec{true, ref.id(), ref.owner(), {}};
    stored.push_back(std::move(ref));
  }
  return stored;
}

void core_worker::escaped(const object_id& id) { objects_.escaped(id); }

std::size_t core_worker::owned_objects() const { return objects_.owned_objects(); }

std::vector<detail::fetched> core_worker::fetch(const std::vector<object_ref<void>>& refs,
                                                timeout_t timeout) {
  return objects_.fetch(refs, timeout);
}

std::vector<std::size_t> core_worker::wait_ready(const std::vector<object_ref<void>>& refs,
                                                 std::size_t num_returns,
                                                 timeout_t timeout) {
  return objects_.wait_ready(refs, num_returns, timeout);
}

actor_id core_worker::create_actor(const detail::remote_entry& factory,
                                   std::vector<detail::arg_spec> args,
                                   const actor_options& options) {
  if (options.max_concurrency < 1) {
    throw exception(error_code::invalid_argument,
                    factory.name + ": max_concurrency must be at least 1, got " +
                      std::to_string(options.max_concurrency));
  }
  if (options.max_restarts < -1 || options.max_task_retries < -1) {
    throw exception(error_code::invalid_argument,
                    factory.name + ": max_restarts and max_task_retries take -1 (no limit), 0 or "
                                   "more, got " +
                      std::to_string(options.max_restarts) + " and " +
                      std::to_string(options.max_task_retries));
  }
  if (options.max_pending_calls == 0 || options.max_pending_calls < -1) {
    throw exception(error_code::invalid_argument,
                    factory.name + ": max_pending_calls takes -1 (no limit) or 1 or more, got " +
                      std::to_string(options.max_pending_calls));
  }
  if (options.concurrency_groups.size() > 64) {
    throw exception(error_code::invalid_argument,
                    factory.name + ": at most 64 concurrency groups, got " +
                      std::to_string(options.concurrency_groups.size()));
  }
  for (const auto& [group, threads] : options.concurrency_groups) {
    if (group.empty() || group.size() > 64 || threads < 1 || threads > 1024) {
      throw exception(error_code::invalid_argument,
                      factory.name + ": a concurrency group needs a name of 1 to 64 characters and 1 to 1024 "
                                     "threads, got '" + group + "' with " + std::to_string(threads));
    }
  }
  for (const auto& [method, group] : options.method_groups) {
    if (!options.concurrency_groups.contains(group)) {
      throw exception(error_code::invalid_argument,
                      factory.name + ": method " + method + " is put in concurrency group '" + group +
                        "', which concurrency_groups does not name");
    }
  }
  protocol::create_actor msg;
  auto& spec = msg.spec;
  spec.resources = checked_request(factory.name, options.num_cpus, options.num_gpus,
                                   options.memory, options.resources);
  spec.where = checked_placement(factory.name, options.accelerator_type, options.gpu_memory_gb,
                                 options.label_selector, options.scheduling);
  spec.id = ids_.next();
  spec.kind = protocol::task_kind::actor_creation;
  spec.function = factory.name;
  spec.owner = where_.self;
  spec.actor = actor_id::random();
  spec.actor_name = options.name;
  if (!options.name_space.empty()) {
    if (spec.actor_name.empty()) {
      throw exception(error_code::invalid_argument,
                      factory.name + ": name_space '" + options.name_space + "' is given, but no name to put in it");
    }
    spec.name_space = options.name_space;
    spec.namespace_named = true;
  } else if (!spec.actor_name.empty()) {
    spec.name_space = shared_namespace();
  }
  spec.class_type = factory.class_type;
  spec.max_concurrency = options.max_concurrency;
  spec.concurrency_groups.insert(options.concurrency_groups.begin(), options.concurrency_groups.end());
  spec.method_groups = options.method_groups;
  spec.priority = options.priority.value_or(default_priority());
  spec.preemptible = options.preemptible;
  spec.preemption_grace_ms = options.preemption_grace.count();
  spec.max_restarts = options.max_restarts;
  spec.max_task_retries = options.max_task_retries;
  spec.max_pending_calls = options.max_pending_calls;
  spec.restore_method = options.restore_method;
  spec.env_vars = env_vars_of(factory.name, options.env_vars);
  spec.job = where_.job;
  spec.binary = where_.binary;
  spec.package = where_.package;
  if (options.get_if_exists && spec.actor_name.empty()) {
    throw exception(error_code::invalid_argument, factory.name + ": get_if_exists needs a name");
  }
  spec.detached = options.lifetime == celer::lifetime::detached;
  if (spec.detached && spec.actor_name.empty()) {
    throw exception(error_code::invalid_argument,
                    factory.name + ": a detached actor needs a name (actor_options::name): later drivers find it by it");
  }
  // A detached actor runs as its namespace's job, which shares no store with this one.
  if (spec.detached && where_.cluster) guest_args(args, factory.name);
  const auto stored = spec.detached && where_.cluster ? std::vector<object_ref<void>>{} : store_large_args(args);
  spec.args = objects_.creation_args(std::move(args));
  if (!options.get_if_exists) return actors_.create(std::move(msg));
  // The name may be taken: then the actor that has it is the answer. Between the two
  // questions the other actor may die (its name is free again): ask once more.
  for (int attempt = 0;; ++attempt) {
    try {
      return actors_.create(msg);
    } catch (const exception& e) {
      if (e.code() != error_code::already_exists) throw;
    }
    try {
      return spec.namespace_named ? find_named_actor(spec.actor_name, spec.class_type, spec.name_space)
                                  : find_named_actor(spec.actor_name, spec.class_type);
    } catch (const exception& e) {
      if (e.code() != error_code::not_found || attempt > 0) throw;
    }
  }
}

protocol::task_spec core_worker::call_spec_of(const actor_id& actor, const detail::remote_entry& method,
                                              const call_options& options) {
  if (actor.nil()) {
    throw exception(error_code::invalid_argument,
                    method.name + ": called through an empty actor handle");
  }
  actors_.admit(actor, method.name);
  protocol::task_spec spec;
  spec.id = ids_.next();
  spec.kind = protocol::task_kind::actor_call;
  spec.function = method.name;
  spec.owner = where_.self;
  spec.actor = actor;
  spec.concurrency_group = options.concurrency_group;
  return spec;
}

object_ref<void> core_worker::submit_actor_call(const actor_id& actor,
                                                const detail::remote_entry& method,
                                                std::vector<detail::arg_spec> args,
                                                const call_options& options,
                                                std::uint32_t num_returns,
                                                std::vector<object_ref<void>>* all) {
  auto spec = call_spec_of(actor, method, options);
  spec.num_returns = num_returns;
  // An actor of another job (a detached one) shares no store with this one: values only.
  const bool guest = where_.cluster && actors_.guest(actor);
  if (guest) guest_args(args, method.name);
  const auto stored = guest ? std::vector<object_ref<void>>{} : store_large_args(args);  // released once the table counted them
  auto ref = objects_.submit(spec, std::move(args), all);
  note_child(ref.id());
  actors_.call(std::move(spec));
  return ref;
}

object_ref<void> core_worker::submit_actor_stream(const actor_id& actor, const detail::remote_entry& method,
                                                  std::vector<detail::arg_spec> args,
                                                  const call_options& options) {
  const auto window = window_of(method.name, options.generator_backpressure);
  auto spec = call_spec_of(actor, method, options);
  spec.generator = window;
  if (where_.cluster && actors_.guest(actor)) {
    throw exception(error_code::invalid_argument,
                    method.name + ": actor " + actor.short_hex() +
                      " runs as another job (a detached actor of a shared namespace), and a streaming "
                      "generator does not cross jobs: return the values instead");
  }
  const auto stored = store_large_args(args);
  auto ref = objects_.submit(spec, std::move(args));
  note_child(ref.id());
  streams_.open(spec);
  actors_.call(std::move(spec));
  return ref;
}

std::optional<object_ref<void>> core_worker::next_value(const object_ref<void>& end, timeout_t timeout) {
  return streams_.next(task_of(end.id()), end, timeout);
}

void core_worker::close_stream(const object_ref<void>& end) { streams_.close(task_of(end.id())); }

actor_id core_worker::find_named_actor(std::string_view name, std::string_view class_type,
                                       std::string_view name_space) {
  job_id runs_as;
  const actor_id id = name_space.empty()
                        ? head_.find_named_actor(name, class_type, where_.job, shared_namespace(), false, &runs_as)
                        : head_.find_named_actor(name, class_type, where_.job, name_space, /*named=*/true, &runs_as);
  if (where_.cluster && !runs_as.nil() && runs_as != where_.job) actors_.note_guest(id);
  return id;
}

void core_worker::guest_args(const std::vector<detail::arg_spec>& args, const std::string& what) const {
  constexpr auto limit = protocol::task_spec::max_guest_value_bytes;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i].is_ref) {
      throw exception(error_code::invalid_argument,
                      what + ": argument " + std::to_string(i + 1) +
                        " is an object ref, and this actor runs as another job (a detached actor of a shared "
                        "namespace): refs do not cross jobs; celer::get the value and pass it");
    }
    if (args[i].value.size() > limit) {
      throw exception(error_code::resource_exhausted,
                      what + ": argument " + std::to_string(i + 1) + " is " + std::to_string(args[i].value.size()) +
                        " bytes; a call to an actor of another job (a detached actor of a shared namespace) "
                        "carries its values inline, each at most " + std::to_string(limit >> 20) + " MiB");
    }
  }
}

void core_worker::kill_actor(const actor_id& actor, bool no_restart) {
  objects_.check_running();
  actors_.kill(actor, no_restart);
}

protocol::resource_reply core_worker::query_resources() {
  return requests_.ask<protocol::resource_reply>(where_.cluster ? where_.head : where_.node,
                                                 protocol::resource_query{});
}

placement_group_id core_worker::create_placement_group(const placement_group_options& options) {
  protocol::create_placement_group m;
  m.id = placement_group_id::random();
  m.name = options.name;
  m.strategy = options.strategy;
  m.job = where_.job;
  const std::string what = "placement group " + (options.name.empty() ? m.id.short_hex() : options.name);
  if (options.bundles.empty()) {
    throw exception(error_code::invalid_argument, what + ": it has no bundles");
  }
  for (std::size_t i = 0; i < options.bundles.size(); ++i) {
    const auto& b = options.bundles[i];
    const std::string bundle = what + ", bundle " + std::to_string(i);
    protocol::bundle_spec spec;
    spec.need = checked_request(bundle, b.num_cpus, b.num_gpus, b.memory, b.resources);
    if (spec.need.amounts.empty()) {
      throw exception(error_code::invalid_argument, bundle + ": it reserves nothing");
    }
    spec.where = checked_placement(bundle, b.accelerator_type, b.gpu_memory_gb, {}, {});
    m.bundles.push_back(std::move(spec));
  }
  const auto id = m.id;
  head_.create_placement_group(std::move(m));
  return id;
}

bool core_worker::placement_group_ready(const placement_group_id& id,
                                        std::chrono::milliseconds timeout) {
  return head_.placement_group_ready(id, timeout);
}

void core_worker::remove_placement_group(const placement_group_id& id) {
  objects_.check_running();
  head_.remove_placement_group(id);
}

std::vector<protocol::placement_group_info> core_worker::query_placement_groups(
  const placement_group_id& id) {
  return head_.query_placement_groups(id);
}

void core_worker::report_gpu_usage(const std::vector<int>& devices, double utilisation,
                                   std::uint64_t memory_used_bytes) {
  protocol::gpu_usage m;
  m.devices.assign(devices.begin(), devices.end());
  m.utilisation = utilisation;
  m.memory_used_bytes = memory_used_bytes;
  (void)net_.send(where_.node, std::move(m));
}

std::string core_worker::pending_reason(const object_id& id) {
  auto q = tasks_.waiting(id);
  if (!q) return {};  // running, done, or not a task of this process
  auto why = head_.explain_placement(std::move(*q));
  return why.empty() ? "waits for a worker: some node has room for it, and its lease request "
                       "is on its way there"
                     : why;
}

std::string core_worker::pending_reason(const actor_id& actor) {
  if (actors_.placed(actor)) return {};
  protocol::explain_placement q;
  q.actor = actor;
  return head_.explain_placement(std::move(q));
}

protocol::status_reply core_worker::query_status() {
  return head_.query_status();
}

protocol::store_counters core_worker::query_store_stats() {
  return store_.query_stats();
}

void core_worker::attach_node(address node, node_id id) {
  {
    std::lock_guard lock(local_mutex_);
    local_node_ = id;
  }
  tasks_.attach_node(node, id);
  store_.attach_node(std::move(node), id);
}

void core_worker::on_local_node_died(std::function<void(const node_id&)> f) {
  std::lock_guard lock(local_mutex_);
  local_node_died_ = std::move(f);
}

void core_worker::handle(protocol::message& m) {
  // Replies to the head and store clients' requests complete them.
  if (requests_.complete(m)) return;
  std::visit(
    [&](auto& msg) {
      using T = std::decay_t<decltype(msg)>;
      if constexpr (std::is_same_v<T, protocol::task_result>) {
        // An actor call's, else a task's; else late (its task already failed): stored only
        // if its object still waits.
        if (!actors_.on_result(msg) && !tasks_.on_result(msg)) {
          objects_.finish_task(msg.task, msg.returns);
        }
      } else if constexpr (std::is_same_v<T, protocol::lease_reply>) {
        tasks_.on_lease_reply(msg);
      } else if constexpr (std::is_same_v<T, protocol::tasks_returned>) {
        tasks_.on_returned(msg);
      } else if constexpr (std::is_same_v<T, protocol::worker_died>) {
        tasks_.on_worker_died(msg);
      } else if constexpr (std::is_same_v<T, protocol::node_died>) {
        store_.on_node_died(msg.node);  // first: what waits on it fails over to the next
        tasks_.on_node_died(msg);
        objects_.on_node_died(msg.node, msg.reason);
        std::function<void(const node_id&)> tell;
        {
          std::lock_guard lock(local_mutex_);
          if (msg.node == local_node_) tell = local_node_died_;
        }
        if (tell) tell(msg.node);
      } else if constexpr (std::is_same_v<T, protocol::object_reply>) {
        objects_.fill(std::move(msg.object));
      } else if constexpr (std::is_same_v<T, protocol::object_copied>) {
        objects_.on_copied(msg);
      } else if constexpr (std::is_same_v<T, protocol::get_object>) {
        objects_.on_get_object(msg);
      } else if constexpr (std::is_same_v<T, protocol::actor_update>) {
        actors_.on_update(msg);
      } else if constexpr (std::is_same_v<T, protocol::peer_data>) {
        peers_.on_data(msg);
      } else if constexpr (std::is_same_v<T, protocol::generator_item>) {
        streams_.on_item(msg);
      } else if constexpr (std::is_same_v<T, protocol::user_log>) {
        // From the head, for this driver's job (admission checked a job's sender).
        if (msg.job == where_.job) logs_.show(std::move(msg.lines));
      }
    },
    m);
}

void core_worker::stop(const std::string& reason, std::optional<error_code> code) {
  logs_.tick(true);  // what the dedup still folds is counted out before the driver ends
  peers_.stop(code.value_or(error_code::cancelled), reason);
  store_.stop();
  objects_.stop(reason, code);
  tasks_.stop(reason);
  requests_.stop(reason, code);
}

void core_worker::print(std::string_view text) {
  const worker_context* ctx = current_worker_context();
  while (true) {
    const auto end = text.find('\n');
    const std::string_view one = text.substr(0, end);
    if (ctx == nullptr) {
      logs_.print_plain(std::string(one));  // the driver's own (or a thread celer did not start)
    } else {
      protocol::log_line line;
      line.text = std::string(one);
      if (ctx->function != nullptr) line.function = *ctx->function;
      line.actor = ctx->actor;
      line.worker = ctx->worker;
      line.node = node_id(ctx->node.id);
      line.pid = static_cast<std::int32_t>(::getpid());
      if (where_.cluster) {
        logs_.send(net_, where_.head, where_.job, std::move(line));
      } else {
        logs_.show({std::move(line)});
      }
    }
    if (end == std::string_view::npos || end + 1 == text.size()) break;
    text.remove_prefix(end + 1);
  }
}

} // namespace celer
