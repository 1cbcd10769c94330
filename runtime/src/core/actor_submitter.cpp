#include "core/actor_submitter.hpp"

#include "transport/credentials.hpp"

#include <algorithm>
#include <string>

namespace celer {
namespace {

/// Why call `spec` cannot go to an actor of another job, or empty when it can.
std::string guest_refusal(const protocol::task_spec& spec) {
  const std::string to = spec.function + ": actor " + spec.actor.short_hex() +
                         " runs as another job (a detached actor of a shared namespace), ";
  if (spec.generator != 0) return to + "and a streaming generator does not cross jobs: return the values instead";
  for (const auto& a : spec.args) {
    if (a.is_ref) {
      return to + "so its calls take values, not object refs (celer::get the value and pass it; "
                  "an argument above " + std::to_string(protocol::task_spec::max_guest_value_bytes >> 20) +
             " MiB does not cross jobs)";
    }
  }
  return {};
}

/// The job an endpoint names (nil for none, or a malformed one).
job_id job_of(const std::string& endpoint) {
  auto parts = split_endpoint(endpoint);
  return parts ? parts->job : job_id{};
}

} // namespace

actor_submitter::actor_submitter(transport& net, reference_table& objects,
                                 request_table& requests, endpoints where)
  : net_(net), objects_(objects), requests_(requests), where_(std::move(where)) {}

actor_id actor_submitter::create(protocol::create_actor msg) {
  const actor_id id = msg.spec.actor;
  {
    std::lock_guard lock(mutex_);
    auto& a = actors_[id];
    a.subscribed = true;  // the head tells the creator about its actor
    a.max_task_retries = msg.spec.max_task_retries;
    a.max_pending_calls = msg.spec.max_pending_calls;
  }
  msg.reply_to = where_.self;
  msg.request_id = requests_.next_id();
  const auto rid = msg.request_id;
  const job_id creator = msg.spec.job;
  // Resent while unanswered (the head may be restarting): the head creates it once.
  auto reply = requests_.request_again(where_.head, std::move(msg), rid);
  auto& r = std::get<protocol::create_actor_reply>(reply);
  if (!r.ok) {
    std::lock_guard lock(mutex_);
    actors_.erase(id);
    detail::throw_failure(r.fail.to_failure());
  }
  // A detached actor runs as its namespace's job: on a cluster (an endpoint of this
  // process's own), another process of another job.
  if (!where_.self.endpoint.empty() && !r.job.nil() && r.job != creator) note_guest(id);
  return id;
}

void actor_submitter::note_guest(const actor_id& actor) {
  std::lock_guard lock(mutex_);
  actors_[actor].guest = true;
}

bool actor_submitter::guest(const actor_id& actor) const {
  std::lock_guard lock(mutex_);
  auto it = actors_.find(actor);
  return it != actors_.end() && it->second.guest;
}

void actor_submitter::admit(const actor_id& actor, const std::string& method) const {
  std::lock_guard lock(mutex_);
  auto it = actors_.find(actor);
  if (it == actors_.end() || it->second.max_pending_calls < 0) return;
  const auto& a = it->second;
  const std::size_t pending = a.queued.size() + a.in_flight.size();
  if (pending >= static_cast<std::size_t>(a.max_pending_calls)) {
    throw exception(error_code::resource_exhausted,
                    method + ": actor " + actor.short_hex() + " has " + std::to_string(pending) +
                      " calls from this process pending, its max_pending_calls; wait for some "
                      "to finish (celer::get or celer::wait on their refs) and call again");
  }
}

actor_submitter::actor_entry& actor_submitter::actor_slot(const actor_id& id) {
  auto& a = actors_[id];
  if (!a.subscribed) {
    a.subscribed = true;
    if (!net_.send(where_.head, protocol::subscribe_actor{id, where_.self})) {
      a.state = protocol::actor_state::dead;
      a.fail = protocol::failure_info::make(detail::failure_kind::actor_died, error_code::unavailable,
                                            "actor " + id.hex() + ": the head is unreachable");
    }
  }
  return a;
}

void actor_submitter::call(protocol::task_spec spec) {
  // Sent under mutex_ so that calls from this process leave in submission order, and
  // queued calls are flushed (in on_update) before any later call is sent.
  std::lock_guard lock(mutex_);
  send_call(actor_slot(spec.actor), std::move(spec));
}

void actor_submitter::send_call(actor_entry& actor, protocol::task_spec spec) {
  switch (actor.state) {
    case protocol::actor_state::pending:
    case protocol::actor_state::restarting:
      actor.queued.push_back(std::move(spec));
      return;
    case protocol::actor_state::dead:
      objects_.fail_task(spec.id, actor.fail);
      return;
    case protocol::actor_state::alive: {
      if (!actor.gone.nil() && actor.gone == actor.worker) {
        actor.queued.push_back(std::move(spec));
        return;
      }
      if (actor.guest) {
        if (auto why = guest_refusal(spec); !why.empty()) {
          objects_.fail_task(spec.id, protocol::failure_info::make(detail::failure_kind::invalid_call,
                                                                   error_code::invalid_argument, why, spec.function));
          return;
        }
      }
      const task_id id = spec.id;
      actor.in_flight.insert(id);
      call_actor_[id] = spec.actor;
      calls_in_flight_.store(call_actor_.size(), std::memory_order_release);
      // A call that may be sent again is kept (and sent as it is: over the wire, its
      // encoding, with no copy).
      const bool keep = actor.max_task_retries != 0;
      protocol::message msg = protocol::execute_task{std::move(spec)};
      const bool sent = keep ? net_.send_copy(actor.worker, msg)
                             : net_.send(actor.worker, std::move(msg));
      if (!sent) {
        // Not delivered, so it may go again whatever max_task_retries says: it waits for
        // the head's word (the actor is subscribed), which restarts or fails it.
        actor.in_flight.erase(id);
        call_actor_.erase(id);
        calls_in_flight_.store(call_actor_.size(), std::memory_order_release);
        actor.gone = actor.worker;
        actor.queued.push_back(std::move(std::get<protocol::execute_task>(msg).spec));
      } else if (keep) {
        actor.unanswered.push_back(std::move(std::get<protocol::execute_task>(msg).spec));
      }
      return;
    }
  }
}

void actor_submitter::fail_actor_calls(actor_entry& actor) {
  for (auto& spec : actor.queued) objects_.fail_task(spec.id, actor.fail);
  actor.queued.clear();
  for (const auto& t : actor.in_flight) {
    objects_.fail_task(t, actor.fail);
    call_actor_.erase(t);
  }
  actor.in_flight.clear();
  actor.unanswered.clear();
  actor.resent.clear();
  calls_in_flight_.store(call_actor_.size(), std::memory_order_release);
}

void actor_submitter::requeue_actor_calls(actor_entry& actor, const actor_id& id) {
  std::deque<protocol::task_spec> again;
  for (auto& spec : actor.unanswered) {
    if (!actor.in_flight.contains(spec.id)) continue;
    auto& times = actor.resent[spec.id];
    if (actor.max_task_retries >= 0 && times >= actor.max_task_retries) continue;
    ++times;
    actor.in_flight.erase(spec.id);
    call_actor_.erase(spec.id);
    again.push_back(std::move(spec));
  }
  actor.unanswered.clear();
  for (const auto& t : actor.in_flight) {
    const auto tries = actor.resent.find(t);
    const std::string retried =
      tries == actor.resent.end() || tries->second == 0
        ? "its calls are not sent again (max_task_retries is 0)"
        : "it was sent " + std::to_string(tries->second + 1) + " times (max_task_retries " +
            std::to_string(actor.max_task_retries) + ")";
    objects_.fail_task(t, protocol::failure_info::make(
                            detail::failure_kind::actor_died, error_code::unavailable,
                            "actor " + id.hex() + " died while running this call, and " +
                              retried + ": " + actor.fail.message));
    call_actor_.erase(t);
    actor.resent.erase(t);
  }
  actor.in_flight.clear();
  calls_in_flight_.store(call_actor_.size(), std::memory_order_release);
  // Sent again first, in their order, before the calls made since.
  for (auto& spec : actor.queued) again.push_back(std::move(spec));
  actor.queued = std::move(again);
}

void actor_submitter::kill(const actor_id& actor, bool no_restart) {
  if (!no_restart) {
    // The head decides: a restart (the update says restarting), or dead when none is left.
    protocol::kill_actor m{actor, "killed by celer::kill"};
    m.no_restart = false;
    (void)net_.send(where_.head, std::move(m));
    return;
  }
  {
    std::lock_guard lock(mutex_);
    auto& a = actors_[actor];
    a.subscribed = true;  // nothing more to learn: it is dead from here on
    if (a.state != protocol::actor_state::dead) {
      a.state = protocol::actor_state::dead;
      a.fail = protocol::failure_info::make(detail::failure_kind::actor_died, error_code::unavailable,
                                            "actor " + actor.hex() + " was killed by celer::kill");
      fail_actor_calls(a);
    }
  }
  (void)net_.send(where_.head, protocol::kill_actor{actor, "killed by celer::kill"});
}

bool actor_submitter::cancel(const task_id& id, const protocol::failure_info& fail,
                             address& worker) {
  std::lock_guard lock(mutex_);
  // fail.message says how: "was cancelled by ...".
  const auto failure_of = [&](const std::string& function, const actor_id& actor) {
    auto f = fail;
    f.function = function;
    f.message = (function.empty() ? "a call" : "call " + function) + " of actor " +
                actor.short_hex() + " " + fail.message;
    return f;
  };
  if (auto it = call_actor_.find(id); it != call_actor_.end()) {
    const actor_id aid = it->second;
    auto& actor = actors_.at(aid);
    call_actor_.erase(it);
    calls_in_flight_.store(call_actor_.size(), std::memory_order_release);
    actor.in_flight.erase(id);
    actor.resent.erase(id);
    std::string function;  // known when the call is kept to be sent again
    auto u = std::find_if(actor.unanswered.begin(), actor.unanswered.end(),
                          [&](const protocol::task_spec& s) { return s.id == id; });
    if (u != actor.unanswered.end()) {
      function = u->function;
      actor.unanswered.erase(u);
    }
    objects_.fail_task(id, failure_of(function, aid));
    worker = actor.worker;
    return true;
  }
  for (auto& [aid, actor] : actors_) {
    auto q = std::find_if(actor.queued.begin(), actor.queued.end(),
                          [&](const protocol::task_spec& s) { return s.id == id; });
    if (q == actor.queued.end()) continue;
    const auto f = failure_of(q->function, aid);
    actor.queued.erase(q);
    objects_.fail_task(id, f);
    worker = {};
    return true;
  }
  return false;
}

bool actor_submitter::knows_call(const task_id& id) const {
  std::lock_guard lock(mutex_);
  if (call_actor_.contains(id)) return true;
  for (const auto& [aid, actor] : actors_) {
    for (const auto& s : actor.queued) {
      if (s.id == id) return true;
    }
  }
  return false;
}

bool actor_submitter::on_result(protocol::task_result& r) {
  // A call's result comes after the call was recorded (the send happened after it), so
  // while none is in flight this is not one: no lock for task results.
  if (calls_in_flight_.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard lock(mutex_);
  auto it = call_actor_.find(r.task);
  if (it == call_actor_.end()) return false;
  if (auto a = actors_.find(it->second); a != actors_.end()) {
    auto& actor = a->second;
    actor.in_flight.erase(r.task);
    if (!actor.unanswered.empty()) {
      // Answers come in order unless calls run concurrently: the front, mostly.
      auto u = std::find_if(actor.unanswered.begin(), actor.unanswered.end(),
                            [&](const protocol::task_spec& s) { return s.id == r.task; });
      if (u != actor.unanswered.end()) actor.unanswered.erase(u);
      actor.resent.erase(r.task);
    }
  }
  const actor_id actor = it->second;
  call_actor_.erase(it);
  calls_in_flight_.store(call_actor_.size(), std::memory_order_release);
  reference_table::made_by made;
  if (std::any_of(r.returns.begin(), r.returns.end(), [](const auto& v) { return v.stored; })) {
    made.function = "actor " + actor.short_hex();
    made.actor_method = true;
    made.why_not = "an actor method's result is not made again (return it from a task, or put "
                   "it with durable=true)";
  }
  objects_.finish_task(r.task, r.returns, std::move(made));
  return true;
}

void actor_submitter::on_update(const protocol::actor_update& m) {
  std::lock_guard lock(mutex_);
  auto& a = actors_[m.actor];
  a.subscribed = true;
  if (a.state == protocol::actor_state::dead) return;
  a.max_task_retries = m.max_task_retries;
  a.max_pending_calls = m.max_pending_calls;
  if (!a.guest && m.state == protocol::actor_state::alive) {
    const job_id theirs = job_of(m.worker.endpoint), ours = job_of(where_.self.endpoint);
    a.guest = !theirs.nil() && !ours.nil() && theirs != ours;
  }
  // Alive where a send found no one: the head has not heard yet, and its word will follow.
  if (m.state == protocol::actor_state::alive && !a.gone.nil() && m.worker == a.gone) return;
  a.gone = {};
  if (m.state == protocol::actor_state::restarting) {
    if (a.state == protocol::actor_state::alive) {
      a.state = protocol::actor_state::restarting;
      net_.forget(a.worker.endpoint);  // its process died: the connection to it goes
      a.worker = {};
      a.fail = m.fail;
      requeue_actor_calls(a, m.actor);
    }
    a.state = protocol::actor_state::restarting;
  } else if (m.state == protocol::actor_state::alive) {
    a.state = protocol::actor_state::alive;
    a.worker = m.worker;
    auto queued = std::move(a.queued);
    a.queued.clear();
    for (auto& spec : queued) send_call(a, std::move(spec));
  } else if (m.state == protocol::actor_state::dead) {
    a.state = protocol::actor_state::dead;
    a.fail = m.fail;
    fail_actor_calls(a);
    if (!a.worker.endpoint.empty()) net_.forget(a.worker.endpoint);
  }
}

bool actor_submitter::placed(const actor_id& actor) const {
  std::lock_guard lock(mutex_);
  auto it = actors_.find(actor);
  return it != actors_.end() && it->second.state != protocol::actor_state::pending;
}

std::size_t actor_submitter::in_flight() const {
  std::lock_guard lock(mutex_);
  return call_actor_.size();
}

} // namespace celer
