#pragma once
// A core's tasks on their way to workers (Ray's lease design): tasks wait here by resource
// shape (their class), the local node grants a worker for a class or spills the request to
// the head, and tasks are pushed straight to the leased workers, several in flight on one
// worker when their function never waits in get. A lease idle for lease_idle_ms goes back
// to its node.
//
// Retries: a task whose worker process or node died goes back to the front of its class's
// queue and runs again on another lease, up to max_retries times (-1: without limit); with
// retry_exceptions, so does one whose own code threw. Each run is an attempt
// (task_spec::attempt); a result of an attempt that is not the task's current one is
// ignored, so a result is stored once, and the task's arguments are released once, when
// it is finally done. A task that finally fails says how each attempt failed.
//
// Lineage: a task whose output went to a node's object store hands its spec (and retries
// left) to the reference table with the result; if that node dies the table gives it back
// through rebuild(), and it runs again as its next attempt.
//
//   task_submitter tasks(net, objects, ids, {self, node, head, this_node}, clock);
//   tasks.submit(std::move(spec), {.max_retries = 3});  // spec.args on the wire already
//   // on the core's actor: tasks.on_result(r), tasks.on_lease_reply(r), ...
//   auto next = tasks.return_idle(clock());  // the reaper thread, or a test with a fake clock
//
// Threads: user threads submit; the core's actor hands it replies; the reaper thread
// returns idle leases. mutex_ guards everything below it, the pieces it keeps included
// (stats_, events_, functions_, requests_, reaper_, stop_: none has a lock of its own). It
// calls into the reference table (to fail or fill a task's result) with mutex_ held:
// submitter lock before table lock, never the reverse.

#include "core/function_profiles.hpp"
#include "core/pending_lease_requests.hpp"
#include "core/reaper_alarm.hpp"
#include "core/reference_table.hpp"
#include "core/stop_latch.hpp"
#include "core/task_descriptor.hpp"
#include "core/task_event_log.hpp"
#include "core/task_ids.hpp"
#include "core/task_stats.hpp"
#include "protocol/messages.hpp"
#include "transport/transport.hpp"

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace celer {

class task_submitter {
public:
  using time_point = std::chrono::steady_clock::time_point;
  /// The time leases go idle by (tests pass a made-up one).
  using clock = std::function<time_point()>;
  struct endpoints {
    /// The core: results come back to it.
    address self;
    /// Lease requests go to the local node (to the head once it died).
    address node;
    address head;
    node_id this_node;
    /// Whether leased workers can die (cluster mode: they are processes). Embedded workers
    /// are threads of this process: only retry_exceptions can run a task again there, so
    /// only such a task keeps a copy of its spec while it runs.
    bool workers_may_die = true;
  };

  /// When a task runs again (task_options::max_retries, retry_exceptions).
  struct retry_policy {
    /// Runs after a system failure (its worker or node died); -1: without limit.
    std::int32_t max_retries = 0;
    /// Also after the task's own code threw (all exceptions, or those of listed types),
    /// counted against max_retries.
    exceptions_to_retry retry_exceptions;
  };

  task_submitter(transport& net, reference_table& objects, task_ids& ids, endpoints where,
                 clock now);
  task_submitter(const task_submitter&) = delete;
  task_submitter& operator=(const task_submitter&) = delete;

  /// Queues a task (its arguments already on the wire, its result owned by the reference
  /// table) and pushes it to a leased worker with room, asking for a lease if none has.
  void submit(protocol::task_spec spec, retry_policy retry);
  /// A worker's result for a task pushed from here: stores it (or, for an exception that
  /// is retried, queues the task again), frees the worker's slot and pushes the next task.
  /// A result of an attempt that is not the task's current one is ignored. False when the
  /// task is not one of this submitter's.
  bool on_result(protocol::task_result& r);
  void on_lease_reply(protocol::lease_reply& r);
  /// Tasks a leased worker gave back without running them (a call there blocked in get,
  /// or they were withdrawn): queued again at the front of their class, at the same
  /// attempt, and pushed to a worker that can run them. Those no longer running on that
  /// worker at that attempt are ignored.
  void on_returned(protocol::tasks_returned& m);
  /// Runs a finished task again because its stored output was lost (lineage): queued
  /// first, as its next attempt, with the retries it had left.
  void rebuild(reference_table::rebuild r);
  /// A leased worker (or a node, with every lease on it) died: its tasks run again while
  /// their retries last, and fail after that.
  void on_worker_died(const protocol::worker_died& m);
  void on_node_died(const protocol::node_died& m);

  /// What cancel() found of a task.
  struct cancelled {
    enum class state : std::uint8_t {
      /// Not a task of this submitter in flight (finished, failed, or never one).
      unknown,
      /// It waited here for a worker: taken out.
      queued,
      /// It was pushed to a worker (queued there, or running): tell it (cancel_task).
      pushed,
    };
    state found = state::unknown;
    /// The worker it was pushed to.
    address worker;
    /// With force, when its worker is to be killed now: what to send its node (after the
    /// cancel_task, so that the worker may cancel the task's children first).
    std::optional<protocol::return_lease> kill;
    address node;
  };
  /// celer::cancel: the task's result fails now with `fail` (kind cancelled) and the task
  /// never runs again. Queued here, it is taken out; pushed to a worker, its late result is
  /// ignored, and the caller tells the worker (cancel_task, sent with no lock held: an
  /// embedded worker handles it on the sending thread). With `force`, where workers are
  /// processes and the task is the first on its lease (running, or about to), the worker
  /// is killed once the tasks queued behind it there came back (withdraw_tasks), so that
  /// they run elsewhere, unharmed.
  cancelled cancel(const task_id& id, bool force, const protocol::failure_info& fail);

  /// Returns the leases idle for lease_idle_ms at `now` to their nodes; returns when the
  /// next idle lease is due (time_point::max() when none is idle).
  time_point return_idle(time_point now);
  /// The reaper: return_idle on the real clock until stop (its own thread).
  void run_reaper();

  /// What the task returning `result` waits for, if it waits for a lease (placement
  /// questions for the head); none once it runs or is not a task of this submitter.
  std::optional<protocol::explain_placement> waiting(const object_id& result) const;
  /// Moves to another local node (call before any task is submitted).
  void attach_node(address node, node_id id);
  /// Returns every lease, withdraws every request; later submissions fail.
  void stop(const std::string& reason);

  /// Counts (tests).
  [[nodiscard]] std::size_t leases() const;
  [[nodiscard]] std::size_t queued() const;
  [[nodiscard]] std::size_t running() const;
  [[nodiscard]] std::size_t lease_requests() const;
  /// Task descriptors known (tasks of one function and options share one).
  [[nodiscard]] std::size_t descriptors() const;
  /// Attempts that failed and were retried (tests, metrics).
  [[nodiscard]] std::size_t retries() const;
  /// What this process's tasks have done (a driver's job heartbeats carry it to the head);
  /// with `take_changes`, also each task's changes of state since the last such call.
  [[nodiscard]] protocol::task_counts counts(bool take_changes = false);

  // The records of tasks not finished yet (public for the tests that bound their size).
  /// How a task's earlier attempts failed (kept only once one has).
  struct failure_record {
    /// "attempt 1: ...; attempt 2: ..." (each ends in "; ").
    std::string failures;
    detail::failure_kind last_kind = detail::failure_kind::task_error;
    error_code last_code = error_code::internal;
  };
  /// A task not finished yet: its descriptor (shared with the other tasks of its function
  /// and options), its own fields, and what its earlier attempts came to. Kept small: a
  /// driver may queue millions (docs/benchmarks.md, queued tasks); the unit tests bound
  /// its size.
  struct task_entry {
    std::shared_ptr<const task_descriptor> shape;
    task_id id;
    /// On the wire already. Empty while the task runs, unless it may run again.
    std::vector<protocol::task_arg> args;
    /// When it was submitted (its first attempt's scheduling latency runs from here).
    time_point submitted{};
    std::int32_t attempt = 1;
    /// Retries left (-1: without limit).
    std::int32_t retries_left = 0;
    /// Null on the first attempt: nothing is kept for a task that never failed.
    std::unique_ptr<failure_record> failed;
    [[nodiscard]] bool may_retry() const { return retries_left != 0; }
    [[nodiscard]] const std::string& function() const { return shape->prototype.function; }
    [[nodiscard]] const std::string& failures() const;
    /// The whole spec, as a worker receives it (the arguments moved into it).
    [[nodiscard]] protocol::task_spec take_spec() { return shape->spec_for(id, std::move(args), attempt); }
  };

private:
  /// Tasks of one resource shape (Ray's scheduling class) waiting for a leased worker: one
  /// shape, placement, priority and set of environment variables (its workers start with).
  struct task_class {
    protocol::resource_set shape;
    protocol::placement where;
    std::int32_t priority = 0;
    std::map<std::string, std::string> env_vars;
    std::deque<task_entry> queued;
  };
  /// A worker a node lent this process, and the tasks pushed to it and not finished.
  struct lease {
    address worker;
    node_id node;
    /// node.short_hex(), made once (each task's change to running names it).
    std::string node_hex;
    address node_addr;
    /// The request it was granted for (names the lease to the node).
    task_id request;
    std::size_t cls = 0;
    std::vector<task_id> running;
    /// How many of `running` may wait in get (nothing is queued behind those).
    std::size_t may_block = 0;
    /// Asked to give back the tasks queued behind its first (another lease went idle);
    /// until it answers, it is not asked again.
    bool withdrawing = false;
    /// When it last became idle (nothing running, nothing of its class waiting); an idle
    /// lease goes back to its node after lease_idle_ms.
    time_point idle_since;
    /// A task running there was cancelled with force: the worker is killed once the tasks
    /// queued behind it came back (unless the cancelled one finished first).
    task_id kill_for;
  };
  /// A task pushed to a leased worker. A task that may run again is kept whole here (its
  /// arguments too: a copy of them went to the worker); one that cannot keeps only what its
  /// result and its failure need (its arguments went to the worker).
  struct pushed {
    worker_id worker;
    /// When it was pushed to a worker with nothing else running there (its turnaround is
    /// then its own), else never.
    time_point alone_since{};
    /// Counted in its lease's may_block.
    bool may_block = false;
    /// Kept with its arguments: it may run again.
    bool whole = false;
    /// Cancelled (its result failed already): whatever comes back is dropped, and it never
    /// runs again.
    bool cancelled = false;
    task_entry task;
  };
  /// Splits a whole spec into a task entry (its descriptor found or made).
  task_entry entry_of(protocol::task_spec spec, std::int32_t retries_left,
                      const exceptions_to_retry& retry_exceptions);

  // The following require mutex_.
  /// The class of tasks like `task` (its resources, placement, priority, env_vars).
  std::size_t class_of(const protocol::task_spec& task);
  /// Pushes queued tasks of class `cls` to its leases with room, and asks for more leases
  /// while tasks still wait.
  void pump(std::size_t cls);
  /// A lease of class `cls` is idle and nothing of the class waits: the lease with the
  /// most tasks queued behind its first is asked for the later half of them back.
  void rebalance(std::size_t cls);
  void push(const worker_id& w, lease& l, task_entry task);
  /// Runs the tasks on lease `w` again (or fails those out of retries) and forgets it.
  void drop_lease(const worker_id& w, detail::failure_kind kind, const std::string& why);
  /// Queues `task` again, at the front of class `cls`, after an attempt that failed
  /// (`kind`, `code`) because `why`.
  void retry(std::size_t cls, task_entry task, detail::failure_kind kind, error_code code,
             const std::string& why);
  /// The message of a task that finally failed on attempt `attempt`: its attempts and why
  /// each failed (`failures`: the earlier ones), the last because `last`.
  static std::string final_message(const std::string& function, std::int32_t attempt,
                                   const std::string& failures, const std::string& last);
  /// Withdraws the outstanding lease requests of class `cls` (all classes if none).
  void cancel_requests(std::optional<std::size_t> cls);
  /// Where lease requests go: the local node, or the head once it died.
  [[nodiscard]] const address& lease_target() const {
    return requests_.via_head() ? where_.head : where_.node;
  }
  /// Fails every task waiting in class `cls` with `fail` (its message prefixed per task).
  void fail_queued(task_class& c, const protocol::failure_info& fail, const char* how);
  /// The worker process started for a lease of class `cls` died before it was lent (killed
  /// while it started): no task ran on it. The waiting tasks that may run again ask for
  /// another lease, the attempt counted against max_retries; the others fail with `fail`.
  void lease_lost(std::size_t cls, const protocol::failure_info& fail);
  [[nodiscard]] bool idle(const lease& l) const;
  /// The worker of lease `w` is to be killed for the force-cancelled task it runs (the
  /// others came back): the lease is dropped here; returns what tells its node to kill it.
  protocol::return_lease kill_lease(const worker_id& w, address& node);
  /// `l` went idle at now: the reaper times it.
  void went_idle(lease& l);
  time_point return_idle_locked(time_point now);

  transport& net_;
  reference_table& objects_;
  endpoints where_;
  const clock now_;

  mutable std::mutex mutex_;
  /// When the reaper wakes: the next idle lease's deadline, or a lease going idle.
  reaper_alarm reaper_;
  /// Set by stop(): later submissions fail, with its reason.
  stop_latch stop_;
  /// A deque: a class's queue is not copyable (its tasks own their failure records), and a
  /// vector would copy it when it grows (a deque's move may throw).
  std::deque<task_class> classes_;
  task_descriptors descriptors_;
  std::unordered_map<worker_id, lease> leases_;
  std::unordered_map<task_id, pushed> running_;
  /// Tasks queued again after a failed attempt (a late result of an earlier attempt is
  /// ignored while they wait for a lease).
  std::unordered_set<task_id> retrying_;
  /// What results said of each function: whether its tasks may be pipelined.
  function_profiles functions_;
  /// Lease requests not answered yet, by class, and where they go (the head once the local
  /// node died).
  pending_lease_requests requests_;
  /// counts()'s totals and its latency histogram.
  task_stats stats_;
  /// A task failed for good: counted, then told to the reference table.
  void fail_task(const task_id& id, const protocol::failure_info& f);
  /// Each task's changes of state (counts(true) hands them over).
  task_event_log events_;
};

} // namespace celer
