#pragma once
// A worker runs tasks, or hosts one actor for its lifetime. Its messages wait in its inbox
// (task_inbox: where queued tasks can still be given back) and are handled on its
// own thread (a detached CAF actor in embedded mode, the main thread of a worker process in
// cluster mode), and user code runs on that thread, so a call costs no extra hand-off.
// Actors with max_concurrency above 1 run calls on a small pool of threads instead.
// A coroutine method's call (celer::future<T>) parks at each co_await whose value is not
// there: the thread goes on with other calls, and the call resumes on the thread it started
// on (the worker's own: after a worker_wake; a pool's: posted there) once the value came.
//
// Lock order: the core's reference table (a ref's fill calls the parked call's wake-up),
// then resume_gate's mutex, then coroutines_mutex_, then a pool's or the inbox's. A parked
// call's own `run` mutex is held while it runs, and taken holding none of these.

#include "core/core_worker.hpp"
#include "protocol/messages.hpp"
#include "transport/transport.hpp"
#include "worker/running_calls.hpp"
#include "worker/task_inbox.hpp"

#include <celer/remote.hpp>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

namespace celer {

class worker {
public:
  struct config {
    worker_id id;
    address self;
    address node;
    address head;
    celer::node_id this_node;
    /// The GPUs it was given (device indices on its node).
    std::vector<int> gpu_ids;
    /// Told before its user code waits for a message (worker_context::before_wait).
    std::function<void()> before_wait;
  };
  worker(transport& net, core_worker& core, config cfg);
  ~worker();

  /// Handles a message from its mailbox: worker_wake takes what waits in its inbox.
  void handle(protocol::message& m);
  /// Where messages for the worker arrive first, on the thread that received them: into
  /// its inbox (a withdrawal is answered here). False when `m`, rewritten to worker_wake,
  /// must go to the worker's mailbox to wake it; true when it was taken care of.
  bool front_door(protocol::message& m);
  /// True once the worker should exit (killed, failed to construct, or told to stop).
  [[nodiscard]] bool finished() const noexcept { return finished_; }
  /// celer::cancel of a task or call here (on the thread that receives it): taken out of
  /// the inbox and answered as cancelled, or its flag set while it runs (and, with
  /// `recursive`, what it submitted cancelled). From another job: ignored.
  void cancel(const protocol::cancel_task& c);
  /// How a parked coroutine call's wake-up reaches the worker's own thread from another:
  /// `wake` gives the inbox a worker_wake on the thread user code runs on (a worker process:
  /// its receiver thread). Unset, a worker_wake is sent to the worker (embedded: it reaches
  /// its front door, then its actor's mailbox). Set before it runs calls.
  void on_wake(std::function<void()> wake) { wake_ = std::move(wake); }
  /// A preemption notice for the hosted actor, handled on the thread that receives it
  /// (beside a running call) rather than after the calls queued before it.
  void preempted(const protocol::preempt_actor& notice);

private:
  class call_pool;
  /// A coroutine method's call (it returns celer::future<T>) between its start and its end:
  /// parked at a co_await, or running (worker/parked_call.hpp).
  class parked_call;
  /// Where a parked call's wake-up goes: to the worker while it hosts the actor, nowhere
  /// once it exited (a ref may fill after the worker is gone).
  struct resume_gate;
  /// Where a streaming generator's values go: each to the owner (generator_item), then a
  /// wait while the consumer is a window behind (worker/stream_out.hpp).
  class stream_out;

  /// One message, on the worker's thread.
  void handle_one(protocol::message& m);
  /// A call starts or stops waiting in get: the plain tasks queued behind it go back.
  void on_block(bool blocked);
  /// Sends tasks it will not run back to their owners: `blocked` when a call waits (named
  /// by `blocked_function` when it waits in get), not when they were withdrawn.
  void give_back(std::vector<protocol::task_spec> tasks, bool blocked,
                 const std::string& blocked_function);
  void execute(protocol::task_spec& spec);
  void create_actor(protocol::task_spec& spec);
  /// Runs the restarted actor's restore hook (spec.restore_method); false, with `fail`, when
  /// it is not a method of the actor taking nothing, or it threw.
  bool restore(const protocol::task_spec& spec, protocol::failure_info& fail);
  /// The concurrency group call `spec` runs in: its own (call_options), else its method's;
  /// empty for none.
  [[nodiscard]] std::string group_of(const protocol::task_spec& spec) const;
  /// Runs one call (task or actor method; `self` its actor instance, as the method's class)
  /// and sends its result to the owner.
  /// `pool`: the threads it runs on, null for the worker's own (where a coroutine call
  /// resumes).
  void run_call(const protocol::task_spec& spec, const detail::remote_entry* entry, void* self,
                call_pool* pool = nullptr);
  /// The end of a call that ran: `body()` gives its packed value or throws what it threw;
  /// its result goes to the owner (and the actor ends after it when the call asked).
  template <class Body>
  void conclude(const protocol::task_spec& spec, const detail::remote_entry& entry,
                running_calls::slot* slot, Body&& body);
  /// Runs coroutine call `call` from where it is parked (on its thread) until it parks
  /// again or ends; an ended one's result is sent. A call of an actor that is exiting fails.
  void resume(const std::shared_ptr<parked_call>& call);
  /// Sends a parked call whose value came (or that was cancelled) to its thread to go on:
  /// its pool's, or the worker's own (run_resumes, after a worker_wake).
  void post_resume(std::shared_ptr<parked_call> call);
  void run_resumes();
  /// Ends the coroutine calls still parked when the actor exits: each fails, its frames go.
  void abandon_coroutines(const std::string& why);
  /// The hosted instance as an object of `method`'s class: itself for the factory's class,
  /// the base subobject for a method of a base class (found once per method, then kept);
  /// null when the method's class is not an unambiguous public base of the actor's.
  void* instance_for(const detail::remote_entry& method);
  /// Why `entry` (found under `name`, or null) cannot be called on the hosted actor.
  std::string not_a_method(const std::string& name, const detail::remote_entry* entry) const;
  /// Resolves the arguments (fetching references); false and `fail` set when one failed.
  /// The call's arguments: views of the spec's inline values, of fetched values (kept in
  /// `fetched`), or of the object store (kept mapped by each arg's keep).
  bool resolve_args(const protocol::task_spec& spec, std::vector<detail::fetched>& fetched,
                    std::vector<detail::arg_bytes>& out,
                    protocol::failure_info& fail);
  /// Answers `spec` as cancelled by `who` without running it.
  void send_cancelled(const protocol::task_spec& spec, const std::string& who);
  /// `raised`: the task's own code threw (see task_result::raised). `v` is its first return;
  /// `rest` the others of a call with several.
  void send_result(const protocol::task_spec& spec, protocol::object_payload v, bool raised = false,
                   std::vector<protocol::object_payload> rest = {});
  /// Return `index` of `spec`, `packed`: carried in the reply, or, when large (or durable),
  /// written to this node's store for the caller.
  protocol::object_payload keep_value(const protocol::task_spec& spec, std::uint32_t index,
                                      std::string packed);
  /// The same for object `id` (a generator's value).
  protocol::object_payload keep_value(const protocol::task_spec& spec, const object_id& id,
                                      std::string packed);
  /// A generator's consumer took values (generator_ack, on the thread that received it).
  void acked(const protocol::generator_ack& a);
  protocol::failure_info failure(detail::failure_kind kind, error_code code,
                                 const std::string& function, std::string message) const;
  /// Ends the hosted actor: running calls finish, its instance goes, its node is told (with
  /// `why` when the actor ended itself, celer::exit_actor).
  void exit_actor(std::string why = {});
  /// A call asked for the actor to end itself (after its result was sent): later calls
  /// fail with why, and a thread of its own ends the actor once the running calls return
  /// (not the calling thread: a pool thread cannot join its pool), then wakes the worker,
  /// which then finishes. Any thread running a call.
  void request_exit(const std::string& function);
  /// Fails an actor call that comes after the actor ended itself; false when it has not.
  bool refuse_after_exit(const protocol::task_spec& spec);

  transport& net_;
  core_worker& core_;
  config cfg_;
  worker_context ctx_;
  /// Read by the threads that deliver its messages; set by its own or its exit thread.
  std::atomic<bool> finished_{false};
  task_inbox inbox_;
  /// The calls running now, with their cancel flags.
  running_calls calls_;
  /// The function of the call running on the worker's thread, and whether it is still
  /// fetching its arguments (a wait then says nothing about the function).
  std::string running_function_;
  bool resolving_ = false;
  // The hosted actor, if any.
  actor_id actor_;
  /// The factory that made the instance (an object of its class).
  const detail::remote_entry* factory_ = nullptr;
  std::shared_ptr<void> instance_;
  /// instance_for's answers for methods of other classes than the factory's. Touched by
  /// the worker's thread only (execute and restore run there; the pool gets the pointer).
  std::unordered_map<const detail::remote_entry*, void*> bases_;
  /// Calls run on a pool (max_concurrency > 1); exit_mutex_ guards pool_ once the actor
  /// runs (an exit thread takes it away).
  bool pooled_ = false;
  std::unique_ptr<call_pool> pool_;
  /// Its concurrency groups (task_spec::concurrency_groups): a pool each, guarded as pool_,
  /// and which method runs in which (set once, at creation).
  std::unordered_map<std::string, std::unique_ptr<call_pool>> groups_;
  std::map<std::string, std::string> method_groups_;
  /// What the actor was given (worker_context::resources points here for its calls).
  protocol::resource_set actor_resources_;
  /// Set once a call asked the actor to end itself (celer::exit_actor): why, and whether
  /// (exit_mutex_ guards exit_why_; exiting_ is read without it by calls that start).
  std::mutex exit_mutex_;
  std::string exit_why_;
  std::atomic<bool> exiting_{false};
  /// Ends the actor after an exit request (joined by the destructor); exit_actor runs once.
  std::thread exit_thread_;
  std::atomic<bool> exited_{false};
  /// Its coroutine calls not ended yet, by task, and those whose values came, to resume
  /// on the worker's own thread; coroutines_mutex_ guards both (taken after the gate's).
  std::mutex coroutines_mutex_;
  std::unordered_map<task_id, std::shared_ptr<parked_call>> coroutines_;
  std::deque<std::shared_ptr<parked_call>> resumes_;
  std::shared_ptr<resume_gate> gate_;
  std::function<void()> wake_;
  /// What it told the head once its actor started (said again to a head that restarted
  /// before it heard).
  std::optional<protocol::actor_started> started_;
};

} // namespace celer
