// The head's actor directory (actor_directory.hpp).
#include "head/actor_directory.hpp"

#include "log.hpp"
#include "transport/credentials.hpp"

#include <algorithm>

namespace celer {
namespace {

bool placing_now(protocol::actor_state s) {
  return s == protocol::actor_state::pending || s == protocol::actor_state::restarting;
}

} // namespace

actor_directory::actor_directory(transport& net, head_tables* tables, node_table& nodes, placement_groups& groups,
                                 head_guard& guard, head_events& events, placer place)
  : net_(net), tables_(tables), nodes_(nodes), groups_(groups), guard_(guard), place_(std::move(place)) {
  events.on_node_died([this](const node_id& id, const std::string& reason) { node_died(id, reason); });
  events.on_job_ended([this](const job_id& job) { job_ended(job); });
}

// ------------------------------------------------------------------ rows

void actor_directory::persist(const actor& a) {
  // Its row is the actor itself (its spec names it).
  if (tables_ != nullptr) tables_->save_actor(a);
}

void actor_directory::restore(std::vector<actor_row> rows) {
  for (auto& row : rows) {
    const actor_id id = row.spec.actor;
    auto& a = actors_[id];
    a = std::move(row);
    started_ = std::max(started_, a.started);
    if (a.state == protocol::actor_state::dead) continue;
    if (!a.spec.actor_name.empty()) names_[name_key(a.spec.job, a.spec.name_space, a.spec.actor_name)] = id;
    if (a.spec.detached) net_.host_namespace(a.spec.name_space);  // its workers are let in again
    if (a.state == protocol::actor_state::alive && a.spec.preemptible) {
      preemptible_.insert(id);
      preemptible_changed_ = true;
    }
    if (!placing_now(a.state) || !a.node.nil()) continue;
    if (a.spec.where.how == scheduling_strategy::kind::placement_group) {
      groups_.wait_for(a.spec);  // waiting for its group to be created: it waits again
    } else {
      parked_.push_back(id);  // it waited for a live node: it waits again
    }
  }
}

void actor_directory::resend_starts() {
  for (const auto& [id, a] : actors_) {
    if (!placing_now(a.state) || a.node.nil()) continue;
    (void)nodes_.send_to(a.node, protocol::start_actor{a.spec});
  }
}

void actor_directory::save_unsaved() {
  auto ids = std::move(unsaved_);
  unsaved_.clear();
  for (const auto& id : ids) {
    if (auto it = actors_.find(id); it != actors_.end()) persist(it->second);
  }
}

// ------------------------------------------------------------------ placing

bool actor_directory::place(actor& a, std::string& why) {
  switch (place_(a, why)) {
    case placing::started: return true;
    case placing::parked:
      a.node = {};
      parked_.push_back(a.spec.actor);
      return true;
    case placing::queued:
      a.node = {};
      groups_.wait_for(a.spec);  // started once the group is created
      return true;
    case placing::never: return false;
  }
  return false;
}

void actor_directory::unpark() {
  auto ids = std::move(parked_);
  parked_.clear();
  for (const auto& id : ids) {
    auto it = actors_.find(id);
    if (it == actors_.end() || !it->second.node.nil() || !placing_now(it->second.state)) {
      continue;  // killed, or its job ended, while it waited
    }
    auto& a = it->second;
    std::string why;
    if (place(a, why)) {
      persist(a);
    } else {
      mark_dead(id, a,
                protocol::failure_info::make(detail::failure_kind::infeasible, error_code::resource_exhausted,
                                             "actor " + a.spec.function + " can never be placed: " + why,
                                             a.spec.function));
    }
  }
}

void actor_directory::placed_in_group(const protocol::task_spec& spec, node_table::entry* node,
                                      const std::string& why) {
  auto it = actors_.find(spec.actor);
  if (it == actors_.end() || !placing_now(it->second.state)) return;
  if (node == nullptr) {
    fail_creation(spec.actor, protocol::failure_info::make(
                                detail::failure_kind::infeasible, error_code::resource_exhausted,
                                "actor " + spec.function + " can never be placed: " + why, spec.function));
    return;
  }
  it->second.node = node->first;
  it->second.spec = spec;
  persist(it->second);
  (void)net_.send(node->second.addr, protocol::start_actor{spec});
}

void actor_directory::fail_creation(const actor_id& id, protocol::failure_info fail) {
  auto it = actors_.find(id);
  if (it != actors_.end()) mark_dead(id, it->second, std::move(fail));
}

bool actor_directory::restart(const actor_id& id, actor& a, const protocol::failure_info& fail) {
  // Only a system failure restarts it: its process or node died, or it was preempted. A
  // constructor that threw, a refusal or a kill leaves it dead.
  const bool died = fail.kind == detail::failure_kind::actor_died && fail.code == error_code::unavailable;
  if (!died && fail.kind != detail::failure_kind::actor_preempted) return false;
  const auto max = a.spec.max_restarts;
  if (max == 0 || (max > 0 && a.restarts >= static_cast<std::uint32_t>(max))) return false;
  ++a.restarts;
  ++restarts_total_;
  a.spec.restarts = a.restarts;
  a.state = protocol::actor_state::restarting;
  a.worker = {};
  a.gpus.clear();
  a.fail = fail;
  if (preemptible_.erase(id) > 0) preemptible_changed_ = true;
  std::string why;
  if (!place(a, why)) {
    mark_dead(id, a,
              protocol::failure_info::make(detail::failure_kind::actor_died, error_code::unavailable,
                                           fail.message + "; restart " + std::to_string(a.restarts) +
                                             " found no node where it can ever run: " + why,
                                           a.spec.function));
    return true;
  }
  CELER_LOG(warn, "head",
            "actor " + id.short_hex() + " (" + a.spec.function + ") restarting (restart " +
              std::to_string(a.restarts) + (max < 0 ? "" : " of " + std::to_string(max)) + "): " + fail.message);
  persist(a);
  publish(id, a);
  return true;
}

std::optional<std::vector<scheduling::cluster_view::preemptible>> actor_directory::preemptible_if_changed() {
  if (!preemptible_changed_) return std::nullopt;
  std::vector<scheduling::cluster_view::preemptible> list;
  list.reserve(preemptible_.size());
  for (const auto& id : preemptible_) {
    const auto& a = actors_.at(id);
    if (a.spec.where.group.nil()) list.push_back({a.node, a.spec.resources, a.gpus, a.spec.priority, a.started});
  }
  preemptible_changed_ = false;
  return list;
}

// ------------------------------------------------------------------ state and subscribers

protocol::actor_update actor_directory::update_of(const actor_id& id, const actor& a) {
  protocol::actor_update u;
  u.actor = id;
  u.state = a.state;
  u.worker = a.worker;
  u.fail = a.fail;
  u.restarts = a.restarts;
  u.max_task_retries = a.spec.max_task_retries;
  u.max_pending_calls = a.spec.max_pending_calls;
  return u;
}

void actor_directory::publish(const actor_id& id, const actor& a) {
  const auto u = update_of(id, a);
  for (const auto& s : a.subscribers) (void)net_.send(s, u);
}

void actor_directory::mark_dead(const actor_id& id, actor& a, protocol::failure_info fail) {
  a.state = protocol::actor_state::dead;
  if (preemptible_.erase(id) > 0) preemptible_changed_ = true;
  a.fail = std::move(fail);
  if (!a.spec.actor_name.empty()) {
    auto it = names_.find(name_key(a.spec.job, a.spec.name_space, a.spec.actor_name));
    if (it != names_.end() && it->second == id) names_.erase(it);
  }
  persist(a);
  publish(id, a);
}

bool actor_directory::add_subscriber(const actor_id& id, actor& a, const address& subscriber, const job_id& sender,
                                     const char* what) {
  if (std::find(a.subscribers.begin(), a.subscribers.end(), subscriber) != a.subscribers.end()) return true;
  if (!guard_.endpoint_ok(subscriber, sender, what)) return false;
  if (a.subscribers.size() >= max_subscribers) {
    guard_.refused("resource_exhausted: " + std::string(what) + " from job " + sender.short_hex() + ": actor " +
                   id.short_hex() + " has " + std::to_string(a.subscribers.size()) +
                   " subscribers already; refused");
    return false;
  }
  a.subscribers.push_back(subscriber);
  if (guard_.take_write()) {
    persist(a);
  } else {
    unsaved_.insert(id);
  }
  return true;
}

void actor_directory::forget(const std::string& endpoint) {
  const auto at = [&](const address& a) { return a.endpoint == endpoint; };
  for (auto& [id, a] : actors_) {
    if (std::erase_if(a.subscribers, at) > 0) persist(a);
  }
}

std::string actor_directory::name_key(const job_id& job, const std::string& name_space, const std::string& name) {
  // '\n' never occurs in a job's hex; a namespace holding one still cannot reach the job's
  // own namespace, whose key starts "job:".
  return (name_space.empty() ? "job:" + job.hex() : "ns:" + name_space) + "\n" + name;
}

std::string actor_directory::namespace_of(const job_id& job, const std::string& name_space) {
  if (job.nil()) return name_space;
  if (name_space.empty()) {
    auto it = job_namespaces_.find(job);
    return it == job_namespaces_.end() ? std::string() : it->second;
  }
  job_namespaces_.try_emplace(job, name_space);
  return name_space;
}

// ------------------------------------------------------------------ detached actors

bool actor_directory::let_in(const job_id& job, const std::string& name_space) const {
  return job.nil() || job == namespace_job(name_space) || net_.may_enter(job, name_space);
}

bool actor_directory::may_reach(const job_id& sender, const actor& a, const std::string& what) {
  if (sender.nil() || sender == a.spec.job) return true;
  if (a.spec.detached && let_in(sender, a.spec.name_space)) return true;
  return guard_.owned_by_sender(sender, a.spec.job, what);  // refused, and logged
}

expected<void> actor_directory::detach(protocol::task_spec& spec) {
  if (spec.actor_name.empty()) {
    return error(error_code::invalid_argument,
                 "a detached actor needs a name (actor_options::name): later drivers find it by it");
  }
  if (!spec.namespace_named) spec.name_space = namespace_of(spec.job, spec.name_space);
  if (spec.name_space.empty()) {
    return error(error_code::invalid_argument,
                 "a detached actor lives in a shared namespace: name one (actor_options::name_space, or "
                 "CELER_NAMESPACE in the driver's environment)");
  }
  if (!let_in(spec.job, spec.name_space)) {
    guard_.refused("permission_denied: job " + spec.job.short_hex() + " made a detached actor in namespace '" +
                   spec.name_space + "', which it is not let into; refused");
    return error(error_code::permission_denied,
                 "job " + spec.job.short_hex() + " is not let into namespace '" + spec.name_space +
                   "' (a submitted job is let into the namespaces its submission names: celer submit --namespace)");
  }
  spec.job = namespace_job(spec.name_space);  // it runs as its namespace's job
  spec.namespace_named = true;
  net_.host_namespace(spec.name_space);
  return {};
}

// ------------------------------------------------------------------ messages

void actor_directory::on(protocol::create_actor& m) {
  protocol::create_actor_reply reply;
  reply.request_id = m.request_id;
  auto& spec = m.spec;
  auto refuse = [&](error_code code, std::string text) {
    reply.fail =
      protocol::failure_info::make(detail::failure_kind::invalid_call, code, std::move(text), spec.function);
    (void)net_.send(m.reply_to, std::move(reply));
  };
  if (auto ok = guard_.check_amounts(spec.resources, "create_actor " + spec.function, spec.job); !ok) {
    refuse(error_code::invalid_argument, ok.error().message());
    return;
  }
  if (spec.kind != protocol::task_kind::actor_creation || spec.actor.nil()) {
    guard_.refused("invalid_argument: create_actor from job " + spec.job.short_hex() +
                   " is no actor creation; refused");
    refuse(error_code::invalid_argument, "create_actor: the spec is no actor creation");
    return;
  }
  if (!groups_.may_use(spec)) {
    refuse(error_code::permission_denied,
           "placement group " + spec.where.group.short_hex() + " belongs to another job");
    return;
  }
  const job_id creator = spec.job;
  if (spec.detached) {
    if (auto ok = detach(spec); !ok) {
      refuse(ok.error().code(), ok.error().message());
      return;
    }
  }
  if (auto known = actors_.find(spec.actor); known != actors_.end()) {
    // Another job's actor id: refused (it would subscribe the sender to that actor).
    if (!may_reach(creator, known->second, "creating again actor " + spec.actor.short_hex())) {
      refuse(error_code::permission_denied, "actor " + spec.actor.short_hex() + " exists");
      return;
    }
    // A retried request (its reply was lost, or the head restarted): the actor is already
    // registered and placed.
    if (!add_subscriber(spec.actor, known->second, m.reply_to, creator, "create_actor")) {
      refuse(error_code::resource_exhausted, "actor " + spec.actor.short_hex() + " takes no more subscribers");
      return;
    }
    reply.ok = true;
    reply.job = known->second.spec.job;
    (void)net_.send(m.reply_to, std::move(reply));
    return;
  }
  if (spec.name_space.empty()) spec.namespace_named = false;  // the job's own: nothing was named
  if (!spec.actor_name.empty()) {
    // A namespace named in the call is this actor's only; CELER_NAMESPACE's is the job's.
    if (!spec.namespace_named) spec.name_space = namespace_of(spec.job, spec.name_space);
    if (!spec.name_space.empty() && !let_in(spec.job, spec.name_space)) {
      // Nor a plain actor's name: a job not let in cannot squat a name there.
      guard_.refused("permission_denied: job " + spec.job.short_hex() + " named an actor in namespace '" +
                     spec.name_space + "', which it is not let into; refused");
      refuse(error_code::permission_denied,
             "job " + spec.job.short_hex() + " is not let into namespace '" + spec.name_space +
               "' (a submitted job is let into the namespaces its submission names: celer submit --namespace)");
      return;
    }
    if (names_.contains(name_key(spec.job, spec.name_space, spec.actor_name))) {
      reply.fail = protocol::failure_info::make(
        detail::failure_kind::invalid_call, error_code::already_exists,
        "an actor named '" + spec.actor_name + "' already exists" +
          (spec.name_space.empty() ? "" : " in namespace '" + spec.name_space + "'"));
      (void)net_.send(m.reply_to, std::move(reply));
      return;
    }
  }
  actor a;
  a.spec = std::move(spec);
  a.spec.restarts = 0;
  std::string why;
  // Placed before it is in actors_: a group's queue or the parked list names it by id only.
  if (!place(a, why)) {
    reply.fail = protocol::failure_info::make(detail::failure_kind::infeasible, error_code::resource_exhausted,
                                              "actor " + a.spec.function + " can never be placed: " + why,
                                              a.spec.function);
    (void)net_.send(m.reply_to, std::move(reply));
    return;
  }
  a.subscribers.push_back(m.reply_to);
  if (!a.spec.actor_name.empty()) names_[name_key(a.spec.job, a.spec.name_space, a.spec.actor_name)] = a.spec.actor;
  const actor_id id = a.spec.actor;
  reply.job = a.spec.job;
  persist(a);
  actors_.emplace(id, std::move(a));
  reply.ok = true;
  (void)net_.send(m.reply_to, std::move(reply));
}

void actor_directory::on(protocol::actor_started& m) {
  auto it = actors_.find(m.actor);
  if (it != actors_.end() &&
      !guard_.owned_by_sender(m.sender_job, it->second.spec.job, "the start of actor " + m.actor.short_hex())) {
    return;
  }
  if (it != actors_.end() && it->second.state == protocol::actor_state::alive && it->second.worker == m.worker) {
    return;  // said again for a head that restarted; this one had heard
  }
  if (it == actors_.end() || !placing_now(it->second.state)) {
    // Killed while it was starting: stop the worker that just came up.
    (void)net_.send(m.worker, protocol::kill_actor{m.actor, "killed while starting"});
    return;
  }
  auto& a = it->second;
  a.state = protocol::actor_state::alive;
  a.fail = {};
  a.worker = m.worker;
  a.started = ++started_;
  a.gpus = std::move(m.gpus);
  if (a.spec.preemptible) {
    preemptible_.insert(m.actor);
    preemptible_changed_ = true;
  }
  persist(a);
  publish(m.actor, a);
}

void actor_directory::on(protocol::actor_failed& m) {
  auto it = actors_.find(m.actor);
  if (it == actors_.end() || it->second.state == protocol::actor_state::dead) return;
  if (!guard_.owned_by_sender(m.sender_job, it->second.spec.job, "the failure of actor " + m.actor.short_hex())) {
    return;
  }
  // A job's own processes report only that a constructor failed: only the node's word
  // (its process died, or was preempted) restarts an actor.
  if (m.sender_job.nil() && restart(m.actor, it->second, m.fail)) return;
  mark_dead(m.actor, it->second, m.fail);
}

void actor_directory::on(protocol::subscribe_actor& m) {
  auto it = actors_.find(m.actor);
  if (it == actors_.end()) {
    protocol::actor_update u;
    u.actor = m.actor;
    u.state = protocol::actor_state::dead;
    u.fail = protocol::failure_info::make(detail::failure_kind::actor_died, error_code::not_found,
                                          "actor " + m.actor.hex() + " is not known to the cluster");
    (void)net_.send(m.subscriber, std::move(u));
    return;
  }
  auto& a = it->second;
  // Another job's actor: refused, and nothing is sent (the subscriber address is the
  // sender's word: an update could reach the actor's own job as if from the head). A
  // detached actor's namespace is shared with the jobs let into it.
  if (!may_reach(m.sender_job, a, "subscribing to actor " + m.actor.short_hex())) return;
  if (!add_subscriber(m.actor, a, m.subscriber, m.sender_job, "subscribe_actor")) return;
  if (a.state != protocol::actor_state::pending) (void)net_.send(m.subscriber, update_of(m.actor, a));
}

void actor_directory::on(protocol::lookup_actor& m) {
  protocol::lookup_actor_reply reply;
  reply.request_id = m.request_id;
  const bool named = m.namespace_named && !m.name_space.empty();
  const std::string ns = named ? m.name_space : namespace_of(m.job, m.name_space);
  auto it = names_.find(name_key(m.job, ns, m.name));
  if (!m.name.empty() && it != names_.end()) {
    const auto& a = actors_[it->second];
    // A shared namespace's names are found only by the jobs let into it.
    if (ns.empty() || let_in(m.job, ns) || may_reach(m.job, a, "looking up actor '" + m.name + "'")) {
      reply.found = true;
      reply.actor = it->second;
      reply.class_type = a.spec.class_type;
      reply.job = a.spec.job;
    }
  }
  (void)net_.send(m.reply_to, std::move(reply));
}

void actor_directory::on(protocol::kill_actor& m) {
  auto it = actors_.find(m.actor);
  if (it == actors_.end() || it->second.state == protocol::actor_state::dead) return;
  auto& a = it->second;
  if (!may_reach(m.sender_job, a, "killing actor " + m.actor.short_hex())) return;
  // Passed on to its node as the actor's own job's word: the head checked the sender (a
  // job let into a detached actor's namespace is not the actor's job).
  if (!m.sender_job.nil()) m.sender_job = a.spec.job;
  std::string reason = "actor " + m.actor.hex() + " was " + m.reason;
  if (!m.no_restart) {
    const auto max = a.spec.max_restarts;
    const bool restarts_left = max < 0 || a.restarts < static_cast<std::uint32_t>(std::max(max, 0));
    if (restarts_left && a.state == protocol::actor_state::alive) {
      // Killed as its process would die: its node stops the worker and reports the death,
      // and restart() starts it again (counted against max_restarts).
      (void)nodes_.send_to(a.node, m);
      return;
    }
    if (restarts_left) {
      CELER_LOG(info, "head", "actor " + m.actor.short_hex() + " is not running (starting or restarting): " +
                                "celer::kill with no_restart = false leaves it to start");
      return;
    }
    reason += " (no_restart = false, but it has no restarts left: max_restarts " + std::to_string(max) + ")";
    m.no_restart = true;  // its node stops it for good
  }
  mark_dead(m.actor, a,
            protocol::failure_info::make(detail::failure_kind::actor_died, error_code::unavailable,
                                         std::move(reason)));
  (void)nodes_.send_to(a.node, m);
}

// ------------------------------------------------------------------ events

void actor_directory::group_removed(const placement_group_id& group, const std::string& why) {
  for (auto& [aid, a] : actors_) {
    if (a.spec.where.how != scheduling_strategy::kind::placement_group || a.spec.where.group != group ||
        a.state == protocol::actor_state::dead) {
      continue;
    }
    mark_dead(aid, a,
              protocol::failure_info::make(detail::failure_kind::actor_died, error_code::unavailable,
                                           "actor " + aid.hex() + " died: its placement group " +
                                             group.short_hex() + " was " + why));
  }
}

void actor_directory::add_workers_on(const node_id& id, std::vector<std::string>& endpoints) const {
  for (const auto& [aid, a] : actors_) {
    if (a.node == id && !a.worker.endpoint.empty()) endpoints.push_back(a.worker.endpoint);
  }
}

void actor_directory::node_died(const node_id& id, const std::string& reason) {
  // After the groups (node_died's subscribers run in order): an actor restarted in a group
  // waits for it to be reserved again.
  for (auto& [aid, a] : actors_) {
    if (a.node != id || a.state == protocol::actor_state::dead) continue;
    auto fail = protocol::failure_info::make(
      detail::failure_kind::actor_died, error_code::unavailable,
      "actor " + aid.hex() + " died: its node " + id.short_hex() + " died (" + reason + ")", a.spec.function,
      id.short_hex());
    if (!restart(aid, a, fail)) mark_dead(aid, a, std::move(fail));
  }
}

void actor_directory::job_ended(const job_id& job) {
  job_namespaces_.erase(job);
  // Its processes' subscriptions to detached actors (which live on) go: a long-lived actor
  // would otherwise gather every driver that ever called it, up to max_subscribers.
  for (auto& [aid, a] : actors_) {
    if (!a.spec.detached || a.spec.job == job) continue;
    const auto of_job = [&](const address& s) {
      auto parts = split_endpoint(s.endpoint);
      return parts && parts->job == job;
    };
    if (std::erase_if(a.subscribers, of_job) > 0) persist(a);
  }
  for (auto& [aid, a] : actors_) {
    if (a.spec.job != job || a.state == protocol::actor_state::dead) continue;
    mark_dead(aid, a,
              protocol::failure_info::make(detail::failure_kind::actor_died, error_code::unavailable,
                                           "actor " + aid.hex() + " was stopped: its job finished"));
    (void)nodes_.send_to(a.node, protocol::kill_actor{aid, "stopped: its job finished"});
  }
  // Nothing of the job's actors is kept: their rows go too.
  std::erase_if(actors_, [&](const auto& entry) {
    const bool gone = entry.second.spec.job == job && entry.second.state == protocol::actor_state::dead;
    if (gone && tables_ != nullptr) tables_->drop_actor(entry.first);
    return gone;
  });
}

// ------------------------------------------------------------------ queries

const actor_directory::actor* actor_directory::find(const actor_id& id) const {
  auto it = actors_.find(id);
  return it == actors_.end() ? nullptr : &it->second;
}

void actor_directory::count(const job_id& job, std::uint32_t& alive, std::uint32_t& pending) const {
  for (const auto& [aid, a] : actors_) {
    if (!job.nil() && a.spec.job != job) continue;
    if (a.state == protocol::actor_state::alive) ++alive;
    if (placing_now(a.state)) ++pending;
  }
}

void actor_directory::fill(head_snapshot& s) const {
  s.actor_restarts = restarts_total_;
  s.actors.reserve(actors_.size());
  for (const auto& [id, a] : actors_) {
    actor_summary x;
    x.id = id;
    x.name = a.spec.actor_name;
    x.name_space = a.spec.name_space;
    x.class_name = a.spec.class_type.empty() ? a.spec.function : a.spec.class_type;
    x.job = a.spec.job;
    x.state = a.state;
    x.node = a.node;
    x.worker = a.worker.endpoint;
    x.restarts = a.restarts;
    x.max_restarts = a.spec.max_restarts;
    if (a.state == protocol::actor_state::dead) x.death_reason = a.fail.message;
    x.resources = a.spec.resources;
    x.priority = a.spec.priority;
    x.preemptible = a.spec.preemptible;
    x.detached = a.spec.detached;
    s.actors.push_back(std::move(x));
  }
}

} // namespace celer
