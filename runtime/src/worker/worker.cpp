#include "worker/worker.hpp"

#include "config/knobs.hpp"
#include "log.hpp"
#include "transport/credentials.hpp"
#include "type_names.hpp"
#include "worker/call_pool.hpp"
#include "worker/parked_call.hpp"
#include "worker/preemption.hpp"
#include "worker/stream_out.hpp"
#include "worker/split_returns.hpp"

#include <algorithm>
#include <cstring>

namespace celer {


worker::worker(transport& net, core_worker& core, config cfg)
  : net_(net), core_(core), cfg_(std::move(cfg)), gate_(std::make_shared<resume_gate>()) {
  gate_->host = this;
  ctx_.worker = cfg_.id;
  ctx_.node = cfg_.node;
  ctx_.gpu_ids = cfg_.gpu_ids;
  ctx_.on_block = [this](bool blocked) { on_block(blocked); };
  ctx_.before_wait = cfg_.before_wait;
}

worker::~worker() {
  {
    std::lock_guard lock(gate_->mutex);
    gate_->host = nullptr;
  }
  if (exit_thread_.joinable()) {
    // The exit thread's last message may hold the last reference to this worker (an
    // embedded worker's front door): then it is that thread, done but for returning.
    if (exit_thread_.get_id() == std::this_thread::get_id()) {
      exit_thread_.detach();
    } else {
      exit_thread_.join();
    }
  }
  pool_.reset();
  groups_.clear();
}

std::string worker::group_of(const protocol::task_spec& spec) const {
  if (!spec.concurrency_group.empty()) return spec.concurrency_group;
  auto it = method_groups_.find(spec.function);
  return it == method_groups_.end() ? std::string() : it->second;
}

protocol::failure_info worker::failure(detail::failure_kind kind, error_code code,
                                       const std::string& function, std::string message) const {
  return protocol::failure_info::make(kind, code, std::move(message), function,
                                      cfg_.this_node.short_hex(), cfg_.id.short_hex());
}

bool worker::front_door(protocol::message& m) {
  if (auto* c = std::get_if<protocol::cancel_task>(&m)) {
    cancel(*c);
    return true;
  }
  if (auto* a = std::get_if<protocol::generator_ack>(&m)) {
    acked(*a);
    return true;
  }
  if (auto* w = std::get_if<protocol::withdraw_tasks>(&m)) {
    // Each task goes back to its own owner, whoever asked; an empty answer tells the asker
    // that the others have started.
    auto taken = inbox_.withdraw(w->tasks);
    if (taken.empty()) {
      (void)net_.send(w->owner, protocol::tasks_returned{cfg_.id, {}, {}, {}});
    } else {
      give_back(std::move(taken), false, "");
    }
    return true;
  }
  switch (inbox_.deliver(m)) {
    case task_inbox::after::nothing:
      return true;
    case task_inbox::after::give_back: {
      std::vector<protocol::task_spec> one;
      one.push_back(std::move(std::get<protocol::execute_task>(m).spec));
      // Arrived while a call blocks: its owner learns that this worker takes nothing more
      // for now (else it would send the task straight back here, again and again).
      give_back(std::move(one), true, "");
      return true;
    }
    case task_inbox::after::wake:
      break;
  }
  m = protocol::worker_wake{};
  return false;
}

void worker::cancel(const protocol::cancel_task& c) {
  // A namespace job's worker (a detached actor's) serves the jobs let into its namespace.
  if (!c.sender_job.nil() && c.sender_job != core_.where().job && !is_namespace_job(core_.where().job)) {
    CELER_LOG(warn, "worker", "ignored a cancel from job " + c.sender_job.short_hex() +
                                ", which this worker does not serve");
    return;
  }
  if (auto spec = inbox_.take(c.task)) {
    send_cancelled(*spec, c.who);
    return;
  }
  if (!calls_.cancel(c.task)) return;
  if (c.recursive) core_.cancel_children(c.task, c.force, c.who);
  // A coroutine call parked at a co_await goes on now: its co_await throws the cancel.
  std::shared_ptr<parked_call> parked;
  {
    std::lock_guard lock(coroutines_mutex_);
    if (auto it = coroutines_.find(c.task); it != coroutines_.end()) parked = it->second;
  }
  if (parked && parked->parked.exchange(0) != 0) {
    std::lock_guard lock(gate_->mutex);
    if (gate_->host != nullptr) post_resume(std::move(parked));
  }
}

void worker::send_cancelled(const protocol::task_spec& spec, const std::string& who) {
  protocol::task_result r;
  r.task = spec.id;
  r.attempt = spec.attempt;
  protocol::object_payload v;
  v.id = spec.return_id();
  v.fail = failure(detail::failure_kind::cancelled, error_code::cancelled, spec.function,
                   spec.function + " was cancelled by " + who + " before it started");
  r.returns.push_back(std::move(v));
  (void)net_.send(spec.owner, std::move(r));
}

void worker::give_back(std::vector<protocol::task_spec> tasks, bool blocked,
                       const std::string& blocked_function) {
  // One message per owner, the tasks in the order they were queued.
  while (!tasks.empty()) {
    const address owner = tasks.front().owner;
    protocol::tasks_returned back;
    back.worker = cfg_.id;
    back.blocked = blocked;
    back.blocked_function = blocked_function;
    std::vector<protocol::task_spec> rest;
    for (auto& t : tasks) {
      if (t.owner == owner) {
        back.tasks.push_back(std::move(t));
      } else {
        rest.push_back(std::move(t));
      }
    }
    if (!net_.send(owner, std::move(back))) {
      CELER_LOG(info, "worker", "the owner of tasks given back is gone; they are dropped");
    }
    tasks = std::move(rest);
  }
}

void worker::on_block(bool blocked) {
  if (!blocked) {
    inbox_.unblock();
    return;
  }
  auto back = inbox_.block();
  // A wait for the call's own arguments says nothing about its function.
  if (!back.empty()) give_back(std::move(back), true, resolving_ ? std::string() : running_function_);
}

void worker::handle(protocol::message& m) {
  current_worker_context() = &ctx_;
  if (std::holds_alternative<protocol::worker_wake>(m)) {
    while (!finished_) {
      auto next = inbox_.next();
      if (!next) break;
      handle_one(*next);
    }
    return;
  }
  handle_one(m);
}

void worker::handle_one(protocol::message& m) {
  if (auto* exec = std::get_if<protocol::execute_task>(&m)) {
    execute(exec->spec);
  } else if (auto* kill = std::get_if<protocol::kill_actor>(&m)) {
    // An actor ending itself is stopped by its exit thread.
    if (!actor_.nil() && kill->actor == actor_ && !exiting_.load(std::memory_order_acquire)) exit_actor();
  } else if (auto* notice = std::get_if<protocol::preempt_actor>(&m)) {
    if (!actor_.nil() && notice->actor == actor_) preempted(*notice);
  } else if (std::holds_alternative<protocol::worker_wake>(m)) {
    run_resumes();  // coroutine calls whose values came
  } else if (std::holds_alternative<protocol::head_restarted>(m)) {
    // From its node: the head restarted and may not have heard that the actor started.
    if (started_) (void)net_.send(cfg_.head, protocol::message(*started_));
  } else if (std::holds_alternative<protocol::shutdown_component>(m)) {
    if (!actor_.nil() && exiting_.load(std::memory_order_acquire)) {
      // its exit thread ends it
    } else if (!actor_.nil()) {
      exit_actor();
    } else {
      finished_ = true;
    }
  } else {
    CELER_LOG(warn, "worker", std::string("ignored unexpected message ") + protocol::name_of(m));
  }
}

bool worker::resolve_args(const protocol::task_spec& spec, std::vector<detail::fetched>& got,
                          std::vector<detail::arg_bytes>& out, protocol::failure_info& fail) {
  out.clear();
  out.reserve(spec.args.size());
  std::vector<object_ref<void>> refs;
  for (const auto& a : spec.args) {
    if (a.is_ref) refs.emplace_back(a.ref, a.owner);
  }
  got.clear();
  if (!refs.empty()) {
    try {
      got = core_.fetch(refs, std::nullopt);
    } catch (const exception& e) {
      fail = failure(detail::failure_kind::runtime_stopped, e.code(), spec.function, e.what());
      return false;
    }
  }
  std::size_t next = 0;
  for (const auto& a : spec.args) {
    if (!a.is_ref) {
      out.emplace_back(std::string_view(a.value));
      continue;
    }
    auto& g = got[next++];
    if (!g.ok) {
      // The argument's own failure propagates, as Ray does: get on this task's result
      // raises what made the argument fail.
      fail = protocol::failure_info::from(g.fail);
      return false;
    }
    // `got` outlives the call, so its payloads can be viewed; a stored argument is a view
    // of the store, kept mapped as long as the call (or what it keeps of it) needs.
    out.emplace_back(g.bytes(), g.keep);
  }
  return true;
}

protocol::object_payload worker::keep_value(const protocol::task_spec& spec, std::uint32_t index,
                                           std::string packed) {
  return keep_value(spec, spec.return_id(index), std::move(packed));
}

protocol::object_payload worker::keep_value(const protocol::task_spec& spec, const object_id& id,
                                           std::string packed) {
  protocol::object_payload v;
  // A call from another job (to a detached actor) shares no store with this one: its
  // values travel in the reply, each at most max_guest_value_bytes.
  const bool guest = !spec.job.nil() && spec.job != core_.where().job;
  constexpr auto guest_limit = protocol::task_spec::max_guest_value_bytes;
  if (guest && packed.size() > guest_limit) {
    v.id = id;
    v.fail = failure(detail::failure_kind::invalid_call, error_code::resource_exhausted, spec.function,
                     spec.function + " returned " + std::to_string(packed.size()) +
                       " bytes to a caller of another job (this is a detached actor of a shared namespace): "
                       "such values travel inline, each at most " + std::to_string(guest_limit >> 20) + " MiB");
    return v;
  }
  if (!guest && (packed.size() > static_cast<std::size_t>(knobs().inline_object_bytes) || spec.durable)) {
    // Too large to travel in the reply (or to be kept on disk): into this node's store,
    // owned by the caller, which reads it from there.
    v = core_.store_value(id, packed.size(),
                          packed.empty() ? 0 : static_cast<unsigned char>(packed[0]), spec.durable,
                          spec.owner, spec.job,
                          [&](char* out) { std::memcpy(out, packed.data(), packed.size()); });
    if (!v.ok) v.fail.function = spec.function;
    return v;
  }
  v.id = id;
  v.ok = true;
  v.payload = std::move(packed);
  return v;
}


void worker::acked(const protocol::generator_ack& a) {
  if (!a.sender_job.nil() && a.sender_job != core_.where().job) {
    CELER_LOG(warn, "worker", "ignored a generator_ack from job " + a.sender_job.short_hex() +
                                ", which this worker does not serve");
    return;
  }
  calls_.acked(a.task, a.consumed);
}

void worker::send_result(const protocol::task_spec& spec, protocol::object_payload v,
                         bool raised, std::vector<protocol::object_payload> rest) {
  v.id = spec.return_id();
  protocol::task_result r;
  r.task = spec.id;
  r.attempt = spec.attempt;
  r.raised = raised;
  if (auto* ctx = current_worker_context(); ctx != nullptr) {
    r.blocked = ctx->blocked;
    ctx->blocked = false;
  }
  r.returns.push_back(std::move(v));
  // (A failed call with several returns sends one failure: its owner fills them all.)
  for (auto& more : rest) r.returns.push_back(std::move(more));
  if (!net_.send(spec.owner, std::move(r))) {
    CELER_LOG(info, "worker", "owner of task " + spec.function + " is gone; result dropped");
  }
}

void worker::run_call(const protocol::task_spec& spec, const detail::remote_entry* entry,
                      void* self, call_pool* pool) {
  // Its cancel flag (celer::is_cancelled), and what it submits recorded as its children,
  // while it runs.
  // A call queued on the pool behind one that ended the actor.
  if (spec.kind == protocol::task_kind::actor_call && refuse_after_exit(spec)) return;
  auto* ctx = current_worker_context();
  auto* slot = calls_.start(spec.id);
  struct call_scope {
    worker& host;
    worker_context* ctx;
    running_calls::slot* slot;
    /// A coroutine call that parked: its slot stays taken until it ends.
    bool parked = false;
    ~call_scope() {
      if (ctx != nullptr) {
        ctx->task = {};
        ctx->function = nullptr;
        ctx->cancelled = nullptr;
      }
      if (parked) return;
      host.core_.forget_children(slot->task);
      host.calls_.finish(slot);
    }
  } scope{*this, ctx, slot};
  if (slot->cancelled.load(std::memory_order_relaxed)) {
    send_cancelled(spec, "its owner");  // cancelled on its way here, or while it waited
    return;
  }
  if (ctx != nullptr) {
    ctx->task = spec.id;
    ctx->function = &spec.function;
    ctx->cancelled = &slot->cancelled;
  }
  std::vector<detail::fetched> fetched;
  std::vector<detail::arg_bytes> args;
  // Plain tasks run on the worker's thread only (an actor's calls may run on its pool):
  // what on_block reads is written by that thread alone.
  const bool plain = spec.kind == protocol::task_kind::normal;
  if (plain) {
    running_function_ = spec.function;
    resolving_ = true;
  }
  {
    protocol::object_payload v;
    if (!resolve_args(spec, fetched, args, v.fail)) {
      if (plain) resolving_ = false;
      send_result(spec, std::move(v));
      return;
    }
  }
  if (plain) resolving_ = false;
  if (slot->cancelled.load(std::memory_order_relaxed)) {
    send_cancelled(spec, "its owner");  // cancelled while its arguments were fetched
    return;
  }
  // Waiting for arguments is not the call blocking: only waits in user code count.
  if (ctx != nullptr) {
    ctx->blocked = false;
    ctx->task = spec.id;
    ctx->attempt = spec.attempt;
    ctx->exit_requested = false;
    if (plain) ctx->resources = &spec.resources;
  }
  const auto check_returns = [&] {
    if (spec.num_returns != std::max<std::uint32_t>(1, entry->split_returns)) {
      throw detail::argument_error(
        spec.function + " returns " + std::to_string(std::max<std::uint32_t>(1, entry->split_returns)) +
        " object(s) in this worker's binary, but its caller expects " +
        std::to_string(spec.num_returns) + " (the two binaries differ)");
    }
  };
  if (entry->start != nullptr && spec.generator == 0) {
    // A coroutine method: it runs until a co_await parks it, and ends later, resumed.
    std::unique_ptr<detail::coroutine_call> coro;
    try {
      check_returns();
      coro = entry->start(*entry, self, args);
    } catch (...) {
      conclude(spec, *entry, slot, [error = std::current_exception()]() -> std::string {
        std::rethrow_exception(error);
      });
      return;
    }
    auto call = std::make_shared<parked_call>(*this, spec, *entry, slot, pool);
    call->fetched = std::move(fetched);
    call->next = coro->handle();
    call->coro = std::move(coro);
    {
      std::lock_guard lock(coroutines_mutex_);
      coroutines_[spec.id] = call;
    }
    scope.parked = true;  // its slot is the call's now, finished when it ends
    resume(call);
    return;
  }
  conclude(spec, *entry, slot, [&]() -> std::string {
    check_returns();
    if (spec.generator != 0) {
      // A streaming generator: its values go to the owner one by one; its return is their
      // count (the end of the stream).
      if (entry->stream == nullptr) {
        throw detail::argument_error(spec.function + " is not a generator in this worker's binary, but its "
                                                     "caller streams it (the two binaries differ)");
      }
      stream_out out(*this, spec, slot);
      return detail::pack(entry->stream(*entry, self, args, out));
    }
    return entry->call(*entry, self, args);
  });
}

template <class Body>
void worker::conclude(const protocol::task_spec& spec, const detail::remote_entry& entry,
                      running_calls::slot* slot, Body&& body) {
  auto* ctx = current_worker_context();
  const bool plain = spec.kind == protocol::task_kind::normal;
  protocol::object_payload v;
  bool raised = false;
  // A call with several returns: those after the first.
  std::vector<protocol::object_payload> rest;
  try {
    v.payload = body();
    v.ok = true;
    if (slot->cancelled.load(std::memory_order_relaxed)) {
      // Cancelled while it ran: its owner failed the result already and drops this one,
      // so nothing is stored for it.
      v = {};
      v.fail = failure(detail::failure_kind::cancelled, error_code::cancelled, spec.function,
                       spec.function + " was cancelled while it ran");
    } else if (entry.split_returns > 0) {
      // Several returns: each value of the tuple is its own object.
      auto values = split_returns(v.payload, entry.split_returns);
      v = keep_value(spec, 0, std::move(values[0]));
      rest.reserve(values.size() - 1);
      for (std::uint32_t i = 1; i < values.size(); ++i) rest.push_back(keep_value(spec, i, std::move(values[i])));
    } else if (v.payload.size() > static_cast<std::size_t>(knobs().inline_object_bytes) || spec.durable) {
      v = keep_value(spec, 0, std::move(v.payload));
    }
  } catch (const detail::argument_error& e) {
    v.fail = failure(detail::failure_kind::invalid_call, error_code::invalid_argument,
                     spec.function, e.what());
  } catch (const std::exception& e) {
    // As Ray does, the error names the exception's type ("std::invalid_argument: ...").
    v.fail = failure(detail::failure_kind::task_error, error_code::internal, spec.function, e.what());
    v.fail.exception_type = type_name(typeid(e));
    raised = true;
    if (slot->cancelled.load(std::memory_order_relaxed)) {
      // What a cancelled coroutine's co_await threw (or anything thrown after the cancel).
      v = {};
      v.fail = failure(detail::failure_kind::cancelled, error_code::cancelled, spec.function,
                       spec.function + " was cancelled while it ran");
      raised = false;
    }
  } catch (...) {
    v.fail = failure(detail::failure_kind::task_error, error_code::internal, spec.function,
                     "not a std::exception, so it carries no message");
    v.fail.exception_type = current_exception_type();  // "int" for throw 42
    raised = true;
  }
  bool exit = false;
  if (ctx != nullptr) {
    ctx->task = {};
    ctx->attempt = 0;
    if (plain) ctx->resources = nullptr;
    exit = ctx->exit_requested;
    ctx->exit_requested = false;
  }
  send_result(spec, std::move(v), raised, std::move(rest));
  // After its result: the caller has it before anyone hears that the actor ended.
  if (exit && !plain) request_exit(spec.function);
}

void worker::resume(const std::shared_ptr<parked_call>& call) {
  std::unique_lock run(call->run);
  if (call->ended) return;
  if (exiting_.load(std::memory_order_acquire)) {
    // The actor ended itself meanwhile: the call fails as the calls after it do.
    call->ended = true;
    call->coro.reset();
    (void)refuse_after_exit(call->spec);
  } else {
    auto* ctx = current_worker_context();
    if (ctx != nullptr) {
      ctx->task = call->spec.id;
      ctx->function = &call->spec.function;
      ctx->cancelled = &call->slot->cancelled;
      ctx->attempt = call->spec.attempt;
      ctx->blocked = false;
      ctx->exit_requested = false;
      ctx->coroutines = call.get();
    }
    std::exchange(call->next, {}).resume();
    if (ctx != nullptr) {
      ctx->coroutines = nullptr;
      call->exit_requested = call->exit_requested || ctx->exit_requested;
      ctx->exit_requested = call->exit_requested;
    }
    if (!call->coro->handle().done()) {
      if (ctx != nullptr) {  // parked again
        ctx->task = {};
        ctx->function = nullptr;
        ctx->cancelled = nullptr;
        ctx->attempt = 0;
        ctx->exit_requested = false;
      }
      return;
    }
    call->ended = true;
    conclude(call->spec, *call->entry, call->slot, [&] { return call->coro->result(); });
    if (ctx != nullptr) {
      ctx->function = nullptr;
      ctx->cancelled = nullptr;
    }
    call->coro.reset();  // its frames, and what they held
  }
  core_.forget_children(call->slot->task);
  calls_.finish(call->slot);
  run.unlock();
  std::lock_guard lock(coroutines_mutex_);
  coroutines_.erase(call->spec.id);
}


void worker::request_exit(const std::string& function) {
  std::string why = "celer::exit_actor() was called in " + function;
  {
    std::lock_guard lock(exit_mutex_);
    if (exiting_.load(std::memory_order_relaxed)) return;
    exit_why_ = why;
    exiting_.store(true, std::memory_order_release);
    exit_thread_ = std::thread([this, why = std::move(why)]() mutable {
      exit_actor(std::move(why));
      // Its thread (or component) sees that it finished on the next message: this one.
      (void)net_.send(cfg_.self, protocol::worker_wake{});
    });
  }
}

bool worker::refuse_after_exit(const protocol::task_spec& spec) {
  if (!exiting_.load(std::memory_order_acquire)) return false;
  std::string why;
  {
    std::lock_guard lock(exit_mutex_);
    why = exit_why_;
  }
  protocol::object_payload v;
  v.fail = failure(detail::failure_kind::actor_died, error_code::failed_precondition, spec.function,
                   "actor " + actor_.hex() + " exited: " + why);
  send_result(spec, std::move(v));
  return true;
}

void worker::execute(protocol::task_spec& spec) {
  switch (spec.kind) {
    case protocol::task_kind::normal: {
      ctx_.priority = spec.priority;  // what it submits inherits it, and its env_vars
      if (ctx_.env_vars != spec.env_vars) ctx_.env_vars = spec.env_vars;
      if (spec.attempt > 1) {
        CELER_LOG(info, "worker", "runs task " + spec.function + ", attempt " +
                                    std::to_string(spec.attempt) + " (its earlier runs failed)");
      }
      const auto* entry = detail::find_remote(spec.function);
      if (entry == nullptr || entry->kind != detail::remote_kind::function) {
        protocol::object_payload v;
        v.fail = failure(detail::failure_kind::invalid_call, error_code::not_found, spec.function,
                         "function '" + spec.function +
                           "' is not registered in this worker's binary (CELER_REMOTE)");
        send_result(spec, std::move(v));
      } else {
        run_call(spec, entry, nullptr);
      }
      return;
    }
    case protocol::task_kind::actor_creation:
      create_actor(spec);
      return;
    case protocol::task_kind::actor_call: {
      const auto* entry = detail::find_remote(spec.function);
      void* self = nullptr;
      if (spec.actor == actor_ && refuse_after_exit(spec)) return;
      if (spec.actor != actor_ || instance_ == nullptr) {
        protocol::object_payload v;
        v.fail = failure(detail::failure_kind::actor_died, error_code::unavailable, spec.function,
                         "actor " + spec.actor.hex() + " is not running on this worker");
        send_result(spec, std::move(v));
      } else if (entry == nullptr || entry->kind != detail::remote_kind::method ||
                 (self = instance_for(*entry)) == nullptr) {
        protocol::object_payload v;
        v.fail = failure(detail::failure_kind::invalid_call, error_code::not_found, spec.function,
                         not_a_method(spec.function, entry));
        send_result(spec, std::move(v));
      } else if (auto group = group_of(spec); !group.empty()) {
        // A concurrency group's call runs on that group's threads, beside the others.
        std::unique_lock lock(exit_mutex_);
        if (exiting_.load(std::memory_order_relaxed)) {
          lock.unlock();
          (void)refuse_after_exit(spec);
        } else if (auto it = groups_.find(group); it != groups_.end()) {
          it->second->post([this, spec = std::move(spec), entry, self, pool = it->second.get()] {
            run_call(spec, entry, self, pool);
          });
        } else {
          lock.unlock();
          std::vector<std::string> known;
          for (const auto& [name, pool] : groups_) known.push_back(name);
          std::sort(known.begin(), known.end());
          std::string names;
          for (const auto& name : known) names += (names.empty() ? "" : ", ") + name;
          protocol::object_payload v;
          v.fail = failure(detail::failure_kind::invalid_call, error_code::invalid_argument, spec.function,
                           "actor " + actor_.short_hex() + " has no concurrency group '" + group + "' (" +
                             (names.empty() ? std::string("it has none") : "its groups: " + names) + ")");
          send_result(spec, std::move(v));
        }
      } else if (pooled_) {
        // Under exit_mutex_: an exit thread takes the pool away under it.
        std::unique_lock lock(exit_mutex_);
        if (!exiting_.load(std::memory_order_relaxed)) {
          pool_->post([this, spec = std::move(spec), entry, self, pool = pool_.get()] {
            run_call(spec, entry, self, pool);
          });
          return;
        }
        lock.unlock();
        (void)refuse_after_exit(spec);
      } else {
        run_call(spec, entry, self);
      }
      return;
    }
  }
}

void worker::preempted(const protocol::preempt_actor& notice) {
  preemption_board::instance().notify(notice, net_, cfg_.node, cfg_.id);
}

void worker::exit_actor(std::string why) {
  if (exited_.exchange(true)) return;
  {
    // Parked coroutine calls are resumed no more (what they await may still fill).
    std::lock_guard lock(gate_->mutex);
    gate_->host = nullptr;
  }
  // Running calls finish; queued ones still run before the pool drains (refused with why
  // when the actor ended itself).
  std::unique_ptr<call_pool> pool;
  std::unordered_map<std::string, std::unique_ptr<call_pool>> groups;
  {
    std::lock_guard lock(exit_mutex_);
    pool = std::move(pool_);
    groups = std::move(groups_);
  }
  pool.reset();
  groups.clear();
  abandon_coroutines(why);  // their frames go before the instance they point into
  preemption_board::instance().forget(actor_);  // its callback returns first
  instance_.reset();
  (void)net_.send(cfg_.node, protocol::actor_exited{actor_, cfg_.id, {}, std::move(why)});
  finished_ = true;
}

} // namespace celer
