// The public API's entry points: init/shutdown and the detail:: calls the templates make.
#include "cluster/driver.hpp"
#include "cluster/worker_process.hpp"
#include "config/knobs.hpp"
#include "core/core_worker.hpp"
#include "log.hpp"
#include "protocol/env_vars.hpp"
#include "remote_registry.hpp"
#include "runtime.hpp"
#include "type_names.hpp"
#include "worker/preemption.hpp"

#include <celer/api.hpp>
#include <celer/future.hpp>
#include <celer/peer.hpp>
#include <celer/print.hpp>
#include <celer/runtime_context.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

namespace celer {
namespace {

std::mutex runtime_mutex;  // guards the_runtime's replacement (init/shutdown)
std::shared_ptr<runtime_base> the_runtime;
/// The running core's address id, so that refs owned elsewhere (most of those decoded) are
/// told apart without a lock.
std::atomic<std::uint64_t> self_hi{0}, self_lo{0};

void set_self(const std::shared_ptr<runtime_base>& rt) {
  const unique_id id = rt ? rt->core().self().id : unique_id{};
  self_hi.store(id.hi, std::memory_order_relaxed);
  self_lo.store(id.lo, std::memory_order_relaxed);
}

/// The running runtime if `owner` is its core, else null.
std::shared_ptr<runtime_base> owning_runtime(const address& owner) {
  if (owner.id.nil() || owner.id.hi != self_hi.load(std::memory_order_relaxed) ||
      owner.id.lo != self_lo.load(std::memory_order_relaxed)) {
    return nullptr;
  }
  std::lock_guard lock(runtime_mutex);
  return the_runtime;
}

std::shared_ptr<runtime_base> running() {
  std::lock_guard lock(runtime_mutex);
  if (!the_runtime) {
    throw exception(error_code::failed_precondition,
                    "celer is not initialized: call celer::init() first (or it was shut down)");
  }
  return the_runtime;
}

/// Throws invalid_argument when CELER_REMOTE gave a name to two different functions: no
/// process of this binary may run a task by a name that could mean either.
void check_registrations() {
  if (auto ok = global_remote_registry().check(); !ok) {
    throw exception(ok.error().code(), ok.error().message());
  }
}

/// Serves as a worker process until the node agent stops it, then ends the process.
[[noreturn]] void serve_as_worker(const knob_values& k) {
  int code = 0;
  try {
    check_registrations();
    set_knobs(k);
    auto rt = std::make_shared<cluster::worker_process>(k);
    {
      std::lock_guard lock(runtime_mutex);
      the_runtime = rt;
      set_self(rt);
    }
    rt->start();  // only now: a task may arrive at once and call the API
    rt->wait_until_finished();
    {
      std::lock_guard lock(runtime_mutex);
      the_runtime.reset();
      set_self(nullptr);
    }
    rt->stop();
  } catch (const std::exception& e) {
    CELER_LOG(error, "worker", std::string("worker process failed: ") + e.what());
    code = 1;
  }
  std::fflush(nullptr);
  std::_Exit(code);  // user code's static objects belong to the driver, not to workers
}

void start(const knob_values& knobs_in, const init_options& options) {
  if (cluster::worker_mode_requested()) serve_as_worker(knobs_in);
  check_registrations();
  knob_values k = knobs_in;
  if (options.priority) k.job_priority = *options.priority;
  if (auto why = protocol::env_vars_problem(options.env_vars); !why.empty()) {
    throw exception(error_code::invalid_argument, "init_options::env_vars: " + why);
  }
  std::string address = options.address.empty() ? k.address : options.address;
  std::lock_guard lock(runtime_mutex);
  if (the_runtime) {
    throw exception(error_code::failed_precondition,
                    "celer::init was called twice: call celer::shutdown() before starting again");
  }
  set_knobs(k);
  if (!address.empty()) {
    the_runtime = std::make_shared<cluster::cluster_driver>(k, address, cluster::cluster_driver::role::driver,
                                                           options.env_vars);
  } else {
    the_runtime = std::make_shared<embedded_runtime>(k, options);
  }
  set_self(the_runtime);
}

} // namespace

void init(int argc, char** argv) {
  const knob_values k = load_knobs(argc, argv);
  start(k, init_options{});
}

void init(const init_options& options) { start(load_knobs(0, nullptr), options); }

void serve_if_worker() {
  if (cluster::worker_mode_requested()) serve_as_worker(load_knobs(0, nullptr));
}

void shutdown() {
  std::shared_ptr<runtime_base> rt;
  {
    std::lock_guard lock(runtime_mutex);
    rt = std::move(the_runtime);
    set_self(nullptr);
  }
  if (rt) rt->stop();
}

bool is_initialized() noexcept {
  std::lock_guard lock(runtime_mutex);
  return the_runtime != nullptr;
}

node_id current_node_id() { return running()->node(); }

worker_id current_worker_id() {
  const worker_context* ctx = current_worker_context();
  return ctx == nullptr ? worker_id{} : ctx->worker;
}

bool placement_group::ready(std::chrono::milliseconds timeout) const {
  return running()->core().placement_group_ready(id_, timeout);
}

placement_group create_placement_group(const placement_group_options& options) {
  return placement_group(running()->core().create_placement_group(options));
}

void remove_placement_group(const placement_group& group) {
  running()->core().remove_placement_group(group.id());
}

std::vector<placement_group_state> list_placement_groups() {
  std::vector<placement_group_state> out;
  for (auto& g : running()->core().query_placement_groups({})) {
    placement_group_state s;
    s.id = g.id;
    s.name = g.name;
    s.strategy = g.strategy;
    s.state = g.state == protocol::group_state::created   ? "created"
              : g.state == protocol::group_state::removed ? "removed"
                                                          : "pending";
    s.nodes = g.nodes;
    s.why = g.why;
    out.push_back(std::move(s));
  }
  return out;
}

namespace detail {
namespace {
/// wait_in_place scopes open on this thread (future::get).
thread_local int waits_in_place = 0;
} // namespace

wait_in_place::wait_in_place() { ++waits_in_place; }
wait_in_place::~wait_in_place() { --waits_in_place; }

bool suspend_on(const object_ref<void>& ref, std::coroutine_handle<> h) {
  worker_context* ctx = current_worker_context();
  if (ctx != nullptr && ctx->coroutines != nullptr && waits_in_place == 0) return ctx->coroutines->suspend(ref, h);
  (void)wait_ready({ref}, 1, std::nullopt);  // no call to park: the value is awaited here
  return false;
}

void throw_if_cancelled() {
  if (!is_cancelled()) return;
  const worker_context* ctx = current_worker_context();
  const std::string function = ctx != nullptr && ctx->function != nullptr ? *ctx->function : std::string("the call");
  throw task_cancelled_error(function + " was cancelled while it awaited a value");
}

std::string pending_reason_of_task(const object_id& id) {
  return running()->core().pending_reason(id);
}
std::string pending_reason_of_actor(const actor_id& id) {
  return running()->core().pending_reason(id);
}
} // namespace detail

void report_gpu_usage(double utilisation, std::uint64_t memory_used_bytes) {
  const auto ids = gpu_ids();
  if (ids.empty()) return;
  running()->core().report_gpu_usage(ids, utilisation, memory_used_bytes);
}

std::vector<int> gpu_ids() {
  const worker_context* ctx = current_worker_context();
  return ctx == nullptr ? std::vector<int>{} : ctx->gpu_ids;
}

void on_preempt(std::function<void(const preemption&)> callback) {
  const worker_context* ctx = current_worker_context();
  if (ctx == nullptr || ctx->actor.nil()) {
    throw exception(error_code::invalid_argument,
                    "celer::on_preempt is called from inside an actor (its constructor or a method)");
  }
  preemption_board::instance().set_callback(ctx->actor, std::move(callback), *ctx);
}

bool was_restarted() {
  const worker_context* ctx = current_worker_context();
  return ctx != nullptr && !ctx->actor.nil() && ctx->restarts > 0;
}

bool is_cancelled() noexcept {
  const worker_context* ctx = current_worker_context();
  return ctx != nullptr && ctx->cancelled != nullptr && ctx->cancelled->load(std::memory_order_relaxed);
}

std::optional<preemption> preemption_notice() {
  const worker_context* ctx = current_worker_context();
  if (ctx == nullptr || ctx->actor.nil()) return std::nullopt;
  return preemption_board::instance().notice(ctx->actor);
}

runtime_context get_runtime_context() {
  auto rt = running();
  runtime_context out;
  out.job = rt->core().where().job;
  // Embedded, no job is registered: the runtime's own id stands for it (its core, shared
  // by the driver and every worker thread).
  if (out.job.nil()) out.job = job_id(rt->core().self().id);
  out.node = rt->node();
  const char* ns = std::getenv("CELER_NAMESPACE");
  out.name_space = ns != nullptr && std::strlen(ns) > 0 ? std::string(ns) : out.job.hex();
  const worker_context* ctx = current_worker_context();
  if (ctx == nullptr) {  // the driver
    out.env_vars = rt->core().where().env_vars;
    return out;
  }
  out.task = ctx->task;
  out.actor = ctx->actor;
  out.worker = ctx->worker;
  if (ctx->resources != nullptr) out.resources = ctx->resources->to_map();
  out.gpu_ids = ctx->gpu_ids;
  out.attempt = ctx->attempt;
  out.was_restarted = !ctx->actor.nil() && ctx->restarts > 0;
  out.env_vars = ctx->env_vars;
  return out;
}

void print_line(std::string_view text) {
  std::shared_ptr<runtime_base> rt;
  {
    std::lock_guard lock(runtime_mutex);
    rt = the_runtime;
  }
  if (!rt) {  // before init or after shutdown: the program's own output
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    return;
  }
  rt->core().print(text);
}

std::optional<std::string> getenv(const std::string& name) {
  if (const worker_context* ctx = current_worker_context(); ctx != nullptr) {
    if (auto it = ctx->env_vars.find(name); it != ctx->env_vars.end()) return it->second;
  }
  if (const char* v = std::getenv(name.c_str()); v != nullptr) return std::string(v);
  return std::nullopt;
}

std::vector<node_info> nodes() {
  std::vector<node_info> out;
  for (auto& n : running()->core().query_status().nodes) {
    node_info i;
    i.id = n.node;
    i.address = n.addr.endpoint.empty() ? std::string("embedded") : n.addr.endpoint;
    i.resources = n.total.to_map();
    i.labels = std::move(n.labels);
    i.alive = n.alive;
    i.dead_reason = std::move(n.dead_reason);
    out.push_back(std::move(i));
  }
  return out;
}

void exit_actor() {
  worker_context* ctx = current_worker_context();
  if (ctx == nullptr || ctx->actor.nil() || ctx->task.nil() || ctx->constructing) {
    throw exception(error_code::invalid_argument,
                    "celer::exit_actor is called from inside an actor's method (not from a task, "
                    "the driver, or an actor's factory)");
  }
  ctx->exit_requested = true;
}

std::map<std::string, double> cluster_resources() {
  return running()->core().query_resources().total.to_map();
}

std::map<std::string, double> available_resources() {
  return running()->core().query_resources().available.to_map();
}

object_store_stats local_object_store_stats() {
  const auto c = running()->core().query_store_stats();
  object_store_stats s;
  s.capacity_bytes = c.capacity;
  s.bytes_in_memory = c.bytes_in_memory;
  s.objects_in_memory = c.objects_in_memory;
  s.objects_on_disk_only = c.objects_on_disk_only;
  s.spilled_objects = c.spilled_objects;
  s.spilled_bytes = c.spilled_bytes;
  s.restored_objects = c.restored_objects;
  s.restored_bytes = c.restored_bytes;
  s.pulled_objects = c.pulled_objects;
  s.pulled_bytes = c.pulled_bytes;
  return s;
}

std::string type_name_of(const std::type_info& type) { return type_name(type); }

namespace detail {

object_ref<void> submit_task(const remote_entry& fn, std::vector<arg_spec> args,
                             const task_options& options) {
  return running()->core().submit_task(fn, std::move(args), options);
}

std::vector<object_ref<void>> submit_task(const remote_entry& fn, std::vector<arg_spec> args,
                                          const task_options& options, std::uint32_t num_returns) {
  std::vector<object_ref<void>> refs;
  refs.reserve(num_returns);
  (void)running()->core().submit_task(fn, std::move(args), options, num_returns, &refs);
  return refs;
}

object_ref<void> put_payload(std::string payload) {
  return running()->core().put(std::move(payload));
}

std::size_t inline_object_limit() { return static_cast<std::size_t>(knobs().inline_object_bytes); }

object_ref<void> put_stored(std::size_t size, unsigned char first, const put_options& options,
                            const std::function<void(char*)>& write) {
  return running()->core().put_stored(size, first, options.durable, write);
}

void object_escaped(const object_id& id, const address& owner) {
  if (auto rt = owning_runtime(owner)) rt->core().escaped(id);
}

std::vector<fetched> fetch(const std::vector<object_ref<void>>& refs, timeout_t timeout) {
  return running()->core().fetch(refs, timeout);
}

std::vector<std::size_t> wait_ready(const std::vector<object_ref<void>>& refs,
                                    std::size_t num_returns, timeout_t timeout) {
  return running()->core().wait_ready(refs, num_returns, timeout);
}

actor_id create_actor(const remote_entry& factory, std::vector<arg_spec> args,
                      const actor_options& options) {
  return running()->core().create_actor(factory, std::move(args), options);
}

object_ref<void> submit_actor_call(const actor_id& actor, const remote_entry& method,
                                   std::vector<arg_spec> args, const call_options& options) {
  return running()->core().submit_actor_call(actor, method, std::move(args), options);
}

std::vector<object_ref<void>> submit_actor_call(const actor_id& actor, const remote_entry& method,
                                                std::vector<arg_spec> args, const call_options& options,
                                                std::uint32_t num_returns) {
  std::vector<object_ref<void>> refs;
  refs.reserve(num_returns);
  (void)running()->core().submit_actor_call(actor, method, std::move(args), options, num_returns, &refs);
  return refs;
}

actor_id find_named_actor(std::string_view name, std::string_view class_type, std::string_view name_space) {
  return running()->core().find_named_actor(name, class_type, name_space);
}

void kill_actor(const actor_id& actor, bool no_restart) { running()->core().kill_actor(actor, no_restart); }

stream_state::~stream_state() {
  // The stream's runtime may be gone (shut down): then there is nothing to close.
  if (auto rt = owning_runtime(end.owner())) {
    try {
      rt->core().close_stream(end);
    } catch (const std::exception&) {
    }
  }
}

std::shared_ptr<stream_state> submit_stream(const remote_entry& fn, std::vector<arg_spec> args,
                                            const task_options& options) {
  return std::make_shared<stream_state>(running()->core().submit_stream(fn, std::move(args), options));
}

std::shared_ptr<stream_state> submit_actor_stream(const actor_id& actor, const remote_entry& method,
                                                  std::vector<arg_spec> args, const call_options& options) {
  return std::make_shared<stream_state>(
    running()->core().submit_actor_stream(actor, method, std::move(args), options));
}

std::optional<object_ref<void>> stream_next(const stream_state& s, timeout_t timeout) {
  auto rt = owning_runtime(s.end.owner());
  if (!rt) {
    throw exception(error_code::invalid_argument,
                    "celer::ref_stream: only the process that made the call reads its stream, while "
                    "its runtime runs");
  }
  return rt->core().next_value(s.end, timeout);
}

bool cancel(const object_ref<void>& ref, bool force, bool recursive) {
  return running()->core().cancel(ref, force, recursive);
}

} // namespace detail
} // namespace celer

namespace celer::peer {
namespace {

/// The running runtime, or failed_precondition as an error value.
expected<std::shared_ptr<runtime_base>> runtime_or_error() {
  try {
    return running();
  } catch (const exception& e) {
    return error(e.code(), e.what());
  }
}

} // namespace

expected<endpoint> here() {
  auto rt = runtime_or_error();
  if (!rt) return rt.error();
  const auto& self = (*rt)->core().self();
  return endpoint{self.id, self.endpoint};
}

expected<void> send(const endpoint& to, std::string_view box, std::uint64_t seq,
                    std::span<const std::byte> payload) {
  if (box.empty()) return error(error_code::invalid_argument, "celer::peer::send needs a mailbox name");
  if (box.starts_with(peer_link::reserved_prefix)) {
    return error(error_code::invalid_argument, "celer::peer::send: mailbox names beginning with " +
                                                 std::string(peer_link::reserved_prefix) + " are celer's own");
  }
  if (payload.size() > max_payload) {
    return error(error_code::invalid_argument, "celer::peer::send: a payload of " + std::to_string(payload.size()) +
                                                 " bytes is over celer::peer::max_payload (" +
                                                 std::to_string(max_payload) + "): send it in pieces");
  }
  auto rt = runtime_or_error();
  if (!rt) return rt.error();
  if (!(*rt)->core().peers().send(address{to.id, to.where}, std::string(box), seq, payload)) {
    return error(error_code::unavailable, "celer::peer::send: " + std::string(box) + " #" + std::to_string(seq) +
                                            " could not be sent: the process at " +
                                            (to.where.empty() ? std::string("this endpoint") : to.where) +
                                            " is gone or unknown here");
  }
  return {};
}

expected<bytes> receive(std::string_view box, std::uint64_t seq, std::chrono::nanoseconds timeout) {
  auto rt = runtime_or_error();
  if (!rt) return rt.error();
  return (*rt)->core().peers().mailbox().take(std::string(box), seq,
                                              peer_mailbox::clock::now() +
                                                std::chrono::duration_cast<peer_mailbox::clock::duration>(timeout));
}

void close(std::string_view box) {
  auto rt = runtime_or_error();
  if (rt) (*rt)->core().peers().mailbox().close(std::string(box));
}

counters stats() {
  auto rt = runtime_or_error();
  if (!rt) return {};
  const auto c = (*rt)->core().peers().counters();
  return {c.bytes_sent_shared, c.bytes_sent_message, c.bytes_received_shared, c.bytes_received_message,
          c.lanes_out, c.lanes_in};
}

} // namespace celer::peer
