#pragma once
// A core's objects: the values and failures of the objects this process owns (task
// results, puts) and of those it borrowed and read, with the counts that decide when an
// owned object is freed (handles, pending tasks taking it by ref, refs that escaped). It
// answers other processes asking for its objects, and it is where get and wait block.
//
//   reference_table objects(net, self, store, &head);  // null head: embedded
//   auto ref = objects.submit(spec, std::move(args));   // spec.args filled, result owned
//   objects.finish_task(spec.id, result.returns, made);  // on the task's final result
//   auto got = objects.fetch({ref}, std::nullopt);
//
// Lineage: a task output stored in a node's object store is lost if that node dies. While
// it is referenced, the table keeps how to make it again (its task's spec, as sent, with
// the retries it has left), and keeps that task's arguments too. When its node dies
// (on_node_died) it runs the task again through the `rebuilder` the core installs: at once
// for an object this process still holds, on the first ask for one kept only as another
// lineage's argument. Depth and bytes are bounded (lineage_max_depth, lineage_max_bytes).
// A put, an actor method's result, a durable object or a task out of retries is not
// rebuilt: a get fails with object_lost_error naming its origin and why.
//
// Threads: user threads call get/wait/put and drop handles; the core's actor hands it
// replies. mutex_ guards objects_, task_args_, the stop state (stop_) and the lineage kept
// (lineage_); it is never held while a user callback runs or while the node maps a stored
// object. A thread blocked in get or wait is woken once, when what it waits for is ready,
// not on every object that fills. Lock order: a submitter's lock may be held when calling
// in (task_submitter, actor_submitter), never the reverse: this table calls no submitter.

#include "core/head_client.hpp"
#include "core/lineage_ledger.hpp"
#include "core/stop_latch.hpp"
#include "core/store_client.hpp"
#include "protocol/messages.hpp"
#include "transport/transport.hpp"

#include <celer/api.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace celer {

class reference_table {
public:
  /// Where a task's result came from, offered with it when the task is done: how to run the
  /// task again if its stored output is lost (`spec` set), or why it cannot be (`why_not`).
  struct made_by {
    std::string function;
    /// An actor method's result (never made again).
    bool actor_method = false;
    /// The task as sent (arguments on the wire), at its last attempt.
    std::optional<protocol::task_spec> spec;
    /// Retries it has left (-1: without limit), and whether exceptions are retried.
    std::int32_t retries_left = 0;
    exceptions_to_retry retry_exceptions;
    std::string why_not;
  };
  /// A lost output to make again: the task (attempt already counted) and why.
  using rebuild = lineage_rebuild;
  /// Runs lost outputs' tasks again (the core hands them to its task submitter). Called
  /// with no lock of this table held.
  using rebuilder = lineage_ledger::rebuilder;

  /// Objects are owned by `self`; stored ones are read through `store`; in cluster mode
  /// (`head` not null) a stored object whose node is gone is looked for in the head's
  /// directory.
  reference_table(transport& net, address self, store_client& store, head_client* head);
  ~reference_table();
  reference_table(const reference_table&) = delete;
  reference_table& operator=(const reference_table&) = delete;

  /// Throws the stop's error once stopped.
  void check_running() const;

  /// A task's arguments on the wire, and a handle to its result (owned here): fills
  /// `spec.args` from `args`, counting each owned object taken by ref as used by the task
  /// until finish_task or fail_task (an actor creation, spec.id nil: until the job ends).
  /// A task with spec.num_returns > 1 owns that many objects: handles to all of them go
  /// into `all` (each freed on its own); the first is returned. Throws the stop's error
  /// once stopped, invalid_argument for num_returns 0 or above task_spec::max_returns.
  object_ref<void> submit(protocol::task_spec& spec, std::vector<detail::arg_spec> args,
                          std::vector<object_ref<void>>* all = nullptr);
  /// An actor creation's arguments on the wire (its refs are kept until the job ends).
  std::vector<protocol::task_arg> creation_args(std::vector<detail::arg_spec> args);
  /// A ready object owned here (a put), and a handle to it; a durable one is found through
  /// the head's directory after its node dies, not marked lost.
  object_ref<void> put(protocol::object_payload value, bool durable = false);
  /// The same for a small value kept in this process (built in place: puts are a hot path).
  object_ref<void> put(const object_id& id, std::string payload);

  /// A handle to object `id`, owned here, made waiting for its value (fill) when unknown:
  /// a streaming generator's value (generator_streams). Throws the stop's error once
  /// stopped.
  object_ref<void> expect(const object_id& id);

  /// Installs the rebuilder (once, before any task finishes).
  void set_rebuilder(rebuilder r);

  /// A thread about to wait in get or wait may receive instead, taking its own reply off
  /// the socket (a cluster driver's transport: zmq_transport::receive_until). `receive_until`
  /// returns false when the seat is not to be had, and the thread waits as before; `wake`
  /// makes a receiving thread look again when what it waits for filled on another thread.
  struct receiver_seat {
    std::function<bool(const std::function<bool()>& done, std::chrono::steady_clock::time_point until)>
      receive_until;
    std::function<void()> wake;
  };
  /// Installs the seat (once, before any get).
  void receive_while_waiting(receiver_seat seat) { seat_ = std::move(seat); }

  /// A task's final outcome: stores its returns (once: a later fill of the same object is
  /// ignored) and ends its use of its arguments, unless its output is stored and `made`
  /// can run it again: then the task's spec and arguments are kept as the output's lineage
  /// while the output is referenced (within lineage_max_depth and lineage_max_bytes).
  /// Only a task with one return keeps a lineage. A task with several whose answer failed
  /// (one failure, for its first return) fills all of them with it.
  void finish_task(const task_id& task, std::vector<protocol::object_payload>& returns,
                   made_by made);
  /// finish_task for an output that is never made again (a late result).
  void finish_task(const task_id& task, std::vector<protocol::object_payload>& returns);
  /// A task that finally failed: its result holds `fail`, and its arguments are released.
  void fail_task(const task_id& task, const protocol::failure_info& fail);
  /// Stores an object's value (or failure), once; wakes its waiters and the borrowers that
  /// asked for it.
  void fill(protocol::object_payload value);

  /// Another process asks for an owned object: answered now, or when it is ready.
  void on_get_object(const protocol::get_object& m);
  /// Records another node's copy of an owned object (freed with it).
  void on_copied(const protocol::object_copied& m);
  /// Node `node` died (`reason`): an owned object stored there is read from a copy another
  /// node pulled, if one did; else it is lost. Those with a lineage are made again (at once
  /// when held here, else on their first ask); the others fail with object_lost_error
  /// naming their origin. Reads that failed before this news wake up to it.
  void on_node_died(const node_id& node, const std::string& reason);
  /// Marks a ref to an owned object as serialised, where its holders cannot be counted:
  /// the object is kept until the job ends.
  void escaped(const object_id& id);
  /// The nodes holding `spec`'s stored arguments that this process owns, with their bytes.
  [[nodiscard]] std::vector<protocol::node_bytes> locality_of(const protocol::task_spec& spec) const {
    return locality_of(spec.args);
  }
  [[nodiscard]] std::vector<protocol::node_bytes> locality_of(const std::vector<protocol::task_arg>& args) const;

  /// get: the values (or failures) of `refs`, waiting up to `timeout`. Throws
  /// get_timeout_error, or the stop's error.
  std::vector<detail::fetched> fetch(const std::vector<object_ref<void>>& refs,
                                     timeout_t timeout);
  /// wait: the indices of the refs that are ready once `num_returns` are, or at `timeout`.
  std::vector<std::size_t> wait_ready(const std::vector<object_ref<void>>& refs,
                                      std::size_t num_returns, timeout_t timeout);
  /// A wait that blocks no thread (a coroutine's co_await): false when `ref` is ready now
  /// (or the table stopped), and `then` is not called; else true, and `then` runs once, on
  /// the thread that fills it (with this table's lock held: it must not call back into the
  /// table), or at stop().
  bool when_ready(const object_ref<void>& ref, std::function<void()> then);

  /// How many objects this process owns now (tests, metrics).
  [[nodiscard]] std::size_t owned_objects() const;
  /// Pending tasks that still hold arguments here (tests).
  [[nodiscard]] std::size_t tasks_holding_args() const;
  /// Whether `id` is known here and ready (tests).
  [[nodiscard]] bool ready(const object_id& id) const;
  /// Threads blocked in get or wait now (tests).
  [[nodiscard]] std::size_t blocked() const;
  /// Gets among them that wait for word of a node's death after a failed read (tests).
  [[nodiscard]] std::size_t awaiting_node_news() const;
  /// Lineages kept now, and their bytes (tests, metrics).
  [[nodiscard]] std::size_t lineages() const;
  [[nodiscard]] std::size_t lineage_bytes() const;
  /// Lost outputs sent to be made again so far (tests, metrics).
  [[nodiscard]] std::size_t rebuilt() const;

  /// Fails every wait from now on; handles stop reaching the table. The first stop's
  /// reason stands.
  void stop(const std::string& reason, std::optional<error_code> code);

private:
  /// A thread blocked in get or wait: each fill of an object it registered on counts down
  /// `needed`, and the fill that reaches 0 wakes it (only it).
  struct waiter {
    std::condition_variable cv;
    std::size_t needed = 0;
    /// The thread waiting receives (receiver_seat) rather than waits on `cv`.
    std::thread::id receiving;
    /// A wait no thread blocks in (when_ready): called instead of waking anyone, and the
    /// waiter (owned by async_waiters_) goes with it.
    std::function<void()> then;
  };
  /// Wakes `w` (mutex_ held): its cv, or its receiving thread when that is another; an
  /// async waiter's `then` is called and the waiter freed (it waits on one object only).
  void wake(waiter& w);
  /// The threads blocked on one object: nearly always none or one, kept without an
  /// allocation; more only when several threads (or one get naming it twice) wait on it.
  class waiter_list {
  public:
    void add(waiter* w) {
      if (first_ == nullptr) {
        first_ = w;
      } else {
        if (!rest_) rest_ = std::make_unique<std::vector<waiter*>>();
        rest_->push_back(w);
      }
    }
    void remove(waiter* w) {
      if (first_ == w) {
        first_ = nullptr;
        if (rest_ && !rest_->empty()) {
          first_ = rest_->back();
          rest_->pop_back();
        }
      }
      if (rest_) std::erase(*rest_, w);
    }
    template <class F>
    void for_each(F&& f) const {
      if (first_ != nullptr) f(first_);
      if (rest_) {
        for (waiter* w : *rest_) f(w);
      }
    }
    void clear() {
      first_ = nullptr;
      rest_.reset();
    }

  private:
    waiter* first_ = nullptr;
    /// The others (made when a second waits).
    std::unique_ptr<std::vector<waiter*>> rest_;
  };
  /// An object's value or failure, boxed: an entry still waiting for its value (a queued
  /// task's result, mostly) holds a null pointer, not a 280-byte payload. Reads of an
  /// empty box see an empty payload (not ok, not stored, nil id).
  class payload_box {
  public:
    const protocol::object_payload& operator*() const { return p_ ? *p_ : empty(); }
    const protocol::object_payload* operator->() const { return &**this; }
    /// The payload to write into, made on first use.
    protocol::object_payload& edit() {
      if (!p_) p_ = std::make_unique<protocol::object_payload>();
      return *p_;
    }
    payload_box& operator=(protocol::object_payload v) {
      if (p_) {
        *p_ = std::move(v);
      } else {
        p_ = std::make_unique<protocol::object_payload>(std::move(v));
      }
      return *this;
    }
    void reset() noexcept { p_.reset(); }

  private:
    static const protocol::object_payload& empty();
    std::unique_ptr<protocol::object_payload> p_;
  };
  /// Who else reads an owned object: borrowers waiting for its value, and other nodes
  /// that pulled a copy of it (made on first use: most results only this process reads).
  struct readers {
    std::vector<address> remote_waiters;
    std::vector<std::pair<node_id, address>> copies;
  };
  /// A stored task output's origin, kept while it is referenced.
  struct origin {
    std::string function;
    bool actor_method = false;
    /// Set while the task can run again (its arguments are kept meanwhile).
    std::optional<protocol::task_spec> spec;
    std::int32_t retries_left = 0;
    exceptions_to_retry retry_exceptions;
    /// Tasks between this output and data that cannot be rebuilt (1: its arguments are
    /// puts or inline values).
    std::uint32_t depth = 1;
    std::size_t bytes = 0;
    std::string why_not;
  };
  /// One object. Kept small (one per queued task's result in a driver that may queue
  /// millions: docs/benchmarks.md, "Queued tasks"): what most objects never need is boxed.
  struct object_entry {
    payload_box value;
    /// Threads of this process blocked on it (once per time a get or wait names it).
    waiter_list waiters;
    /// Borrowers waiting for the value (owned objects only), and, for stored objects, other
    /// nodes that pulled a copy (freed with the object; read in place of the first when its
    /// node dies). Null while there are none.
    std::unique_ptr<readers> others;
    /// A stored task output's origin (null for inline values and puts).
    std::unique_ptr<origin> made;
    /// Owned objects: freed when no handle holds them, no pending task takes them, and no
    /// ref to them has escaped this process.
    int holders = 0;
    int task_uses = 0;
    bool ready = false;
    bool fetch_sent = false;
    bool owned = false;
    bool escaped = false;
    /// Owned: a put (else a task's output); durable (kept on disk by its node).
    bool put = false;
    bool durable = false;
    /// Lost with its node, kept only as a lineage's argument: made again on the first ask.
    bool dormant = false;

    [[nodiscard]] bool has_remote_waiters() const { return others && !others->remote_waiters.empty(); }
    [[nodiscard]] readers& others_made() {
      if (!others) others = std::make_unique<readers>();
      return *others;
    }
  };
  /// Lets handles outlive the table: they reach it through this while it lives.
  struct link {
    std::mutex m;
    reference_table* table = nullptr;
  };

public:
  /// Bytes of one object's entry (tests bound it: a queued task's result has one).
  static constexpr std::size_t entry_bytes = sizeof(object_entry);

private:

  // The following require mutex_.
  void check_running_locked() const;
  std::vector<protocol::task_arg> to_wire(std::vector<detail::arg_spec> args, const task_id& task);
  /// A ref to an owned object, counted as a holder.
  object_ref<void> owned_ref(const object_id& id);
  void fill_locked(protocol::object_payload value);
  void release_args(const task_id& task);
  /// Adds a failure for each of a task's `count` returns that `returns` lacks: the call's
  /// own failure when it failed, else a complaint that it answered too few.
  static void fill_missing_returns(const task_id& task, std::uint32_t count,
                                   std::vector<protocol::object_payload>& returns);
  /// Frees `id` if nothing keeps it.
  void maybe_free(const object_id& id);
  /// Registers interest in `refs` (asks their owners for the ones borrowed) and `w` on
  /// each that is not ready; returns how many are ready.
  std::size_t prepare(const std::vector<object_ref<void>>& refs, waiter& w);
  /// One round of fetch (mutex_ not held). `read_at[i]`: the node refs[i] was read from
  /// (nil unless it was stored; `read_at` stays empty when none was).
  std::vector<detail::fetched> fetch_once(const std::vector<object_ref<void>>& refs,
                                          timeout_t timeout, std::vector<node_id>& read_at);
  /// Blocks (mutex_ held via `lock`) until w.needed reaches 0, the stop, or the deadline;
  /// lends the worker's CPUs meanwhile. True when what it needed filled.
  bool block_until(std::unique_lock<std::mutex>& lock, waiter& w, timeout_t timeout);
  /// Blocks (mutex_ held via `lock`) on `cv` until `done`, the stop, or `timeout`, lending
  /// the worker's CPUs meanwhile (counted in blocked_). Returns done().
  template <class Done>
  bool block_on(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                timeout_t timeout, Done done);
  /// fetch: owned objects at `unheard` whose reads failed, though no node death moved them:
  /// waits until the head's word that their node died arrives, or for as long as the head
  /// takes to declare a node dead (node_timeout_ms and two heartbeats), within `timeout`.
  void await_node_news(std::unique_lock<std::mutex>& lock,
                       const std::vector<std::pair<object_id, node_id>>& unheard,
                       timeout_t timeout);
  /// `w` is no longer registered on any of `refs`.
  void forget(const std::vector<object_ref<void>>& refs, waiter& w);

  void release_hold(const object_id& id);
  /// on_get_object without handing over the rebuild it may start.
  void answer_get_object(const protocol::get_object& m);
  /// Keeps `made` as the lineage of stored output `id` if the bounds allow; else records
  /// why not. Returns whether the task's arguments are kept with it.
  bool keep_lineage(object_entry& e, made_by made);
  /// Drops e's lineage: its bytes, and its task's hold on the arguments.
  void drop_lineage(object_entry& e);
  /// Starts making lost output `id` again (its lineage is taken): queued for the rebuilder.
  void start_rebuild(const object_id& id, object_entry& e, const std::string& why);
  /// Hands queued rebuilds to the rebuilder; call without mutex_ held.
  void run_rebuilds();
  /// The failure of an object lost with its node: its origin, and why it is not rebuilt.
  [[nodiscard]] protocol::failure_info lost_failure(const object_id& id, const object_entry& e,
                                                    const std::string& node,
                                                    const std::string& reason) const;

  transport& net_;
  const address self_;
  store_client& store_;
  head_client* const head_;

  mutable std::mutex mutex_;
  /// Set by stop(): every wait fails from then on, with its reason and code.
  stop_latch stop_;
  std::size_t blocked_ = 0;
  std::size_t awaiting_node_news_ = 0;
  /// Notified when a node's death has been applied (await_node_news).
  std::condition_variable node_news_;
  std::unordered_map<object_id, object_entry> objects_;
  /// when_ready's waiters, until their object fills or the table stops.
  std::unordered_map<waiter*, std::unique_ptr<waiter>> async_waiters_;
  /// Owned objects passed by ref to a task still pending, by task.
  std::unordered_map<task_id, std::vector<object_id>> task_args_;
  /// Pending tasks with more than one return, and how many (a failure fills them all).
  std::unordered_map<task_id, std::uint32_t> several_returns_;
  receiver_seat seat_;
  /// The lineages kept, within their bounds, and the rebuilds decided under mutex_ (handed
  /// over once it is released).
  lineage_ledger lineage_;
  std::shared_ptr<link> link_;
};

} // namespace celer
