#pragma once
// A core's calls to actors: each call goes straight to the worker hosting the actor, in
// the order this process made them; calls made before the actor's address is known, or
// while it restarts, wait here, in order, and are sent when the head says it is alive.
// When it restarts, the calls it died running are sent again first if max_task_retries
// allows, and fail otherwise. When the head says the actor died (or celer::kill kills it),
// its waiting and unanswered calls fail with why.
//
//   actor_submitter actors(net, objects, requests, {self, head});
//   const actor_id a = actors.create(std::move(msg));   // asks the head, waits for its answer
//   actors.call(std::move(spec));                       // spec.args already on the wire
//   // on the core's actor: actors.on_result(r), actors.on_update(u)
//
// Threads: user threads create, call and kill; the core's actor hands it replies and
// updates. mutex_ guards actors_ and call_actor_; calls are sent under it, so that they
// leave in order. It calls into the reference table with mutex_ held: submitter lock
// before table lock, never the reverse.

#include "core/reference_table.hpp"
#include "core/request_table.hpp"
#include "protocol/messages.hpp"
#include "transport/transport.hpp"

#include <atomic>
#include <cstddef>
#include <deque>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace celer {

class actor_submitter {
public:
  struct endpoints {
    /// The core: results and actor updates come back to it.
    address self;
    /// Actors are created and watched through the head.
    address head;
  };

  actor_submitter(transport& net, reference_table& objects, request_table& requests,
                  endpoints where);
  actor_submitter(const actor_submitter&) = delete;
  actor_submitter& operator=(const actor_submitter&) = delete;

  /// Asks the head to create the actor `msg` describes (its arguments already on the
  /// wire, its max_task_retries set) and waits for the answer; throws the head's error.
  actor_id create(protocol::create_actor msg);
  /// Sends a call (its arguments on the wire, its result owned by the reference table), or
  /// queues it until the actor is alive, or fails it if the actor is dead.
  void call(protocol::task_spec spec);
  /// Throws resource_exhausted when this process has the actor's max_pending_calls calls
  /// on it pending (waiting here or sent, not answered): a new one (of `method`) may not
  /// be made. Known for an actor created here at once, for others from the head's first
  /// word on it.
  void admit(const actor_id& actor, const std::string& method) const;
  /// celer::kill: the actor is dead from here on; its calls fail. With `no_restart` false
  /// the head restarts it if it has restarts left (its calls then fare as after a death:
  /// max_task_retries), and nothing is failed here.
  void kill(const actor_id& actor, bool no_restart = true);
  /// celer::cancel of call `id`: its result fails now with `fail`, and it is never sent
  /// again. Waiting here, it is taken out (nothing is returned); sent, it is forgotten (a
  /// late result is dropped) and the actor's worker is returned, to be told (cancel_task,
  /// with no lock held). False when it is not a call of this submitter in flight.
  bool cancel(const task_id& id, const protocol::failure_info& fail, address& worker);
  /// Whether `id` is a call of this submitter not answered yet.
  [[nodiscard]] bool knows_call(const task_id& id) const;
  /// The result of a call made from here: stores it. False when the task is not a call
  /// this submitter waits for (costs no lock while no call is in flight).
  bool on_result(protocol::task_result& r);
  /// The head's news of an actor: alive at an address (queued calls go), or dead.
  void on_update(const protocol::actor_update& m);
  /// Whether `actor` is known here to be alive or dead (not pending).
  [[nodiscard]] bool placed(const actor_id& actor) const;
  /// `actor` runs as another job (a detached actor of a shared namespace, found by name):
  /// its calls carry values only (protocol::task_spec::max_guest_value_bytes).
  void note_guest(const actor_id& actor);
  /// Whether `actor` is known to run as another job (note_guest, or its address says so).
  [[nodiscard]] bool guest(const actor_id& actor) const;

  /// Calls sent and not answered (tests).
  [[nodiscard]] std::size_t in_flight() const;

private:
  struct actor_entry {
    protocol::actor_state state = protocol::actor_state::pending;
    address worker;
    protocol::failure_info fail;
    bool subscribed = false;
    /// Calls made before the actor's address was known, in submission order.
    std::deque<protocol::task_spec> queued;
    /// Calls sent and not yet answered.
    std::unordered_set<task_id> in_flight;
    /// With max_task_retries: the calls sent and not yet answered, in order (sent again,
    /// first, once the actor has restarted), and how often each was sent again.
    std::int32_t max_task_retries = 0;
    std::deque<protocol::task_spec> unanswered;
    /// actor_options::max_pending_calls (-1: no limit).
    std::int32_t max_pending_calls = -1;
    std::unordered_map<task_id, std::int32_t> resent;
    /// The worker a send failed to reach: it is gone, and the head's word on what became
    /// of the actor (restarting, or dead and why) is on its way. Calls wait in `queued`
    /// until it comes, rather than fail with a reason the head has not given yet.
    address gone;
    /// It runs as another job (note_guest): a call passing an object ref, or streaming,
    /// fails at once (no store or stream crosses jobs).
    bool guest = false;
  };

  // The following require mutex_.
  actor_entry& actor_slot(const actor_id& id);
  void send_call(actor_entry& actor, protocol::task_spec spec);
  void fail_actor_calls(actor_entry& actor);
  /// The actor died and is restarting: its unanswered calls that may be retried go first
  /// into its queue, the others fail.
  void requeue_actor_calls(actor_entry& actor, const actor_id& id);

  transport& net_;
  reference_table& objects_;
  request_table& requests_;
  const endpoints where_;

  mutable std::mutex mutex_;
  std::unordered_map<actor_id, actor_entry> actors_;
  std::unordered_map<task_id, actor_id> call_actor_;
  /// call_actor_.size(), readable without mutex_: a task result is looked up here only
  /// while some call is in flight.
  std::atomic<std::size_t> calls_in_flight_{0};
};

} // namespace celer
