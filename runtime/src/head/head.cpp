#include "head/head.hpp"

#include "log.hpp"

#include <celer/version.hpp>

#include <algorithm>

namespace celer {

head::head(transport& net, address self, std::chrono::milliseconds node_timeout,
           double spread_threshold, clock now, std::unique_ptr<head_tables> tables)
  : net_(net),
    tables_(std::move(tables)),
    self_(std::move(self)),
    node_timeout_(node_timeout),
    now_(now ? std::move(now) : clock([] { return std::chrono::steady_clock::now(); })),
    nodes_(net_, tables_.get(), now_),
    view_(spread_threshold),
    objects_(net_, tables_.get(), [this](const node_id& n) { return nodes_.live_address(n); }),
    jobs_(net_, tables_.get(), now_, [this](const node_id& n) { return nodes_.live_address(n); }) {
  if (!tables_) return;
  auto state = tables_->load();
  if (!state) {
    // Unreadable tables: the head starts empty rather than not at all (nodes and drivers
    // of the old cluster then find it knows nothing of them, and say so).
    CELER_LOG(error, "head", "cannot load the head's tables, starting with none: " +
                               state.error().message());
    return;
  }
  restore(std::move(*state));
}

std::vector<job_id> head::jobs() const { return jobs_.jobs(); }

void head::handle(protocol::message& m) {
  std::visit(
    [&](auto& msg) {
      // Each message goes to the manager that owns what it is about; the rest, to the
      // head's own handlers while they are being split into managers.
      if constexpr (requires { objects_.on(msg); }) {
        objects_.on(msg);
      } else if constexpr (requires { jobs_.on(msg); }) {
        jobs_.on(msg);
      } else if constexpr (requires { on(msg); }) {
        on(msg);
      } else {
        CELER_LOG(warn, "head", std::string("ignored unexpected message ") + protocol::name_of(m));
      }
    },
    m);
}

void head::on(protocol::register_node& m) {
  if (m.protocol_version != protocol_version) {
    CELER_LOG(error, "head",
              "refused node " + m.node.short_hex() + ": protocol version " +
                std::to_string(m.protocol_version) + ", expected " +
                std::to_string(protocol_version));
    return;
  }
  if (auto ok = protocol::validate_amounts(m.total, "the resources of node " + m.node.short_hex()); !ok) {
    CELER_LOG(error, "head", "refused node " + m.node.short_hex() + ": invalid_argument: " +
                               ok.error().message());
    return;
  }
  if (nodes_.registered(m) != node_table::registration::joined) return;
  std::string gpus;
  for (const auto& d : m.gpus) gpus += (gpus.empty() ? " (" : ", ") + d.name;
  CELER_LOG(info, "head", "node " + m.node.short_hex() + " joined with " + m.total.to_string() +
                            (gpus.empty() ? "" : gpus + ")"));
  view_.add_node(m.node, m.total, m.labels, m.gpus);
  unpark();
}

void head::unpark() {
  if (parked_leases_.empty() && parked_actors_.empty()) return;
  auto leases = std::move(parked_leases_);
  auto actors = std::move(parked_actors_);
  parked_leases_.clear();
  parked_actors_.clear();
  CELER_LOG(warn, "head", "a node is alive again: placing " + std::to_string(leases.size()) +
                            " lease request(s) and " + std::to_string(actors.size()) +
                            " actor(s) that waited for one");
  for (auto& m : leases) on(m);
  for (const auto& id : actors) {
    auto it = actors_.find(id);
    if (it == actors_.end() || !it->second.node.nil() ||
        (it->second.state != protocol::actor_state::pending &&
         it->second.state != protocol::actor_state::restarting)) {
      continue;  // killed, or its job ended, while it waited
    }
    auto& a = it->second;
    std::string why;
    if (place_actor(a, why)) {
      persist(id, a);
    } else {
      mark_dead(id, a, protocol::failure_info::make(
                         detail::failure_kind::infeasible, error_code::resource_exhausted,
                         "actor " + a.spec.function + " can never be placed: " + why, a.spec.function));
    }
  }
}

node_table::entry* head::pick_node(const protocol::task_spec& spec, std::span<const protocol::node_bytes> locality,
                                   std::string& why) {
  auto d = view_.place(spec.resources, spec.where, locality);
  if (d.never()) {
    why = std::move(d.why);
    return nullptr;
  }
  if (!d.now && !preemptible_.empty()) {
    if (preemptible_changed_) {  // regrouped only when an actor that opted in starts or dies
      std::vector<scheduling::cluster_view::preemptible> list;
      list.reserve(preemptible_.size());
      for (const auto& id : preemptible_) {
        const auto& a = actors_.at(id);
        if (a.spec.where.group.nil()) {
          list.push_back({a.node, a.spec.resources, a.gpus, a.spec.priority, a.started});
        }
      }
      view_.set_preemptible(list);
      preemptible_changed_ = false;
    }
    auto room = view_.preemption_target(spec.resources, spec.where, spec.priority);
    if (room && *room != d.target) {
      view_.move_waiting(d.target, *room, spec.resources);
      d.target = *room;
    }
  }
  return nodes_.find(d.target);
}

void head::on(protocol::request_lease& m) {
  std::string why;
  auto refuse = [&](error_code code, std::string text) {
    protocol::lease_reply r;
    r.request = m.spec.id;
    r.fail = protocol::failure_info::make(detail::failure_kind::invalid_call, code, std::move(text),
                                          m.spec.function);
    (void)net_.send(m.spec.owner, std::move(r));
  };
  if (auto ok = check_amounts(m.spec.resources, "request_lease " + m.spec.function, m.spec.job); !ok) {
    refuse(error_code::invalid_argument, ok.error().message());
    return;
  }
  if (!may_use_group(m.spec)) {
    refuse(error_code::permission_denied, "placement group " + m.spec.where.group.short_hex() +
                                            " belongs to another job");
    return;
  }
  if (m.spec.where.how == scheduling_strategy::kind::placement_group) {
    bool never = false;
    auto* node = route_to_group(m.spec, why, never);
    if (node != nullptr) {
      m.from_head = true;
      (void)net_.send(node->second.addr, std::move(m));
    } else if (never) {
      fail_request(m.spec, why);
    } else {
      groups_.at(m.spec.where.group).leases.push_back(std::move(m));  // until it is created
    }
    return;
  }
  auto* target = pick_node(m.spec, m.locality, why);
  if (target == nullptr && no_live_node()) {
    CELER_LOG(warn, "head", "no node is alive: " + m.spec.function + " waits for one");
    parked_leases_.push_back(std::move(m));
    return;
  }
  if (target == nullptr) {
    protocol::lease_reply r;
    r.request = m.spec.id;
    r.fail = protocol::failure_info::make(detail::failure_kind::infeasible,
                                          error_code::resource_exhausted, why, m.spec.function);
    (void)net_.send(m.spec.owner, std::move(r));
    return;
  }
  m.from_head = true;
  (void)net_.send(target->second.addr, std::move(m));
}

void head::on(protocol::cancel_lease_requests& m) {
  std::erase_if(parked_leases_, [&](const protocol::request_lease& r) {
    return r.spec.owner == m.owner &&
           std::find(m.requests.begin(), m.requests.end(), r.spec.id) != m.requests.end();
  });
  // The head does not track where it sent each request: every node drops what it holds.
  m.from_head = true;
  nodes_.send_to_live(m);
}

void head::on(protocol::create_actor& m) {
  protocol::create_actor_reply reply;
  reply.request_id = m.request_id;
  auto& spec = m.spec;
  auto refuse = [&](error_code code, std::string text) {
    reply.fail = protocol::failure_info::make(detail::failure_kind::invalid_call, code, std::move(text),
                                              spec.function);
    (void)net_.send(m.reply_to, std::move(reply));
  };
  if (auto ok = check_amounts(spec.resources, "create_actor " + spec.function, spec.job); !ok) {
    refuse(error_code::invalid_argument, ok.error().message());
    return;
  }
  if (spec.kind != protocol::task_kind::actor_creation || spec.actor.nil()) {
    denials_.warn("invalid_argument: create_actor from job " + spec.job.short_hex() +
                  " is no actor creation; refused");
    refuse(error_code::invalid_argument, "create_actor: the spec is no actor creation");
    return;
  }
  if (!may_use_group(spec)) {
    refuse(error_code::permission_denied, "placement group " + spec.where.group.short_hex() +
                                            " belongs to another job");
    return;
  }
  if (auto known = actors_.find(spec.actor); known != actors_.end()) {
    // Another job's actor id: refused (it would subscribe the sender to that actor).
    if (!owned_by_sender(spec.job, known->second.spec.job, "creating again actor " + spec.actor.short_hex())) {
      refuse(error_code::permission_denied, "actor " + spec.actor.short_hex() + " exists");
      return;
    }
    // A retried request (its reply was lost, or the head restarted): the actor is already
    // registered and placed.
    if (!add_subscriber(spec.actor, known->second, m.reply_to, spec.job, "create_actor")) {
      refuse(error_code::resource_exhausted, "actor " + spec.actor.short_hex() + " takes no more subscribers");
      return;
    }
    reply.ok = true;
    (void)net_.send(m.reply_to, std::move(reply));
    return;
  }
  if (!spec.actor_name.empty()) {
    spec.name_space = namespace_of(spec.job, spec.name_space);
    auto it = names_.find(name_key(spec.job, spec.name_space, spec.actor_name));
    if (it != names_.end()) {
      reply.fail = protocol::failure_info::make(
        detail::failure_kind::invalid_call, error_code::already_exists,
        "an actor named '" + spec.actor_name + "' already exists" +
          (spec.name_space.empty() ? "" : " in namespace '" + spec.name_space + "'"));
      (void)net_.send(m.reply_to, std::move(reply));
      return;
    }
  }
  actor_info a;
  a.spec = std::move(spec);
  a.spec.restarts = 0;
  std::string why;
  if (!place_actor(a, why)) {
    reply.fail = protocol::failure_info::make(
      detail::failure_kind::infeasible, error_code::resource_exhausted,
      "actor " + a.spec.function + " can never be placed: " + why, a.spec.function);
    (void)net_.send(m.reply_to, std::move(reply));
    return;
  }
  a.subscribers.push_back(m.reply_to);
  if (!a.spec.actor_name.empty()) {
    names_[name_key(a.spec.job, a.spec.name_space, a.spec.actor_name)] = a.spec.actor;
  }
  const actor_id id = a.spec.actor;
  persist(id, a);
  actors_.emplace(id, std::move(a));
  reply.ok = true;
  (void)net_.send(m.reply_to, std::move(reply));
}

bool head::place_actor(actor_info& a, std::string& why) {
  bool never = true;
  const bool in_group = a.spec.where.how == scheduling_strategy::kind::placement_group;
  auto* target = in_group ? route_to_group(a.spec, why, never) : pick_node(a.spec, {}, why);
  if (target == nullptr && !in_group && no_live_node()) {
    CELER_LOG(warn, "head", "no node is alive: actor " + a.spec.actor.short_hex() + " (" +
                              a.spec.function + ") waits for one");
    a.node = {};
    parked_actors_.push_back(a.spec.actor);
    return true;
  }
  if (target == nullptr && never) return false;
  if (target != nullptr) {
    a.node = target->first;
    (void)net_.send(target->second.addr, protocol::start_actor{a.spec});
  } else {
    a.node = {};
    groups_.at(a.spec.where.group).actors.push_back(a.spec);  // started once the group is created
  }
  return true;
}

bool head::restart(const actor_id& id, actor_info& a, const protocol::failure_info& fail) {
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
  if (!place_actor(a, why)) {
    mark_dead(id, a,
              protocol::failure_info::make(
                detail::failure_kind::actor_died, error_code::unavailable,
                fail.message + "; restart " + std::to_string(a.restarts) +
                  " found no node where it can ever run: " + why,
                a.spec.function));
    return true;
  }
  CELER_LOG(warn, "head",
            "actor " + id.short_hex() + " (" + a.spec.function + ") restarting (restart " +
              std::to_string(a.restarts) +
              (max < 0 ? "" : " of " + std::to_string(max)) + "): " + fail.message);
  persist(id, a);
  publish(id, a);
  return true;
}

void head::fail_request(const protocol::task_spec& spec, const std::string& why) {
  auto fail = protocol::failure_info::make(detail::failure_kind::infeasible,
                                           error_code::resource_exhausted, why, spec.function);
  if (spec.kind == protocol::task_kind::actor_creation) {
    auto it = actors_.find(spec.actor);
    if (it != actors_.end()) mark_dead(spec.actor, it->second, std::move(fail));
    return;
  }
  protocol::lease_reply r;
  r.request = spec.id;
  r.fail = std::move(fail);
  (void)net_.send(spec.owner, std::move(r));
}

bool head::owned_by_sender(const job_id& sender, const job_id& owner, const std::string& what) {
  if (sender.nil() || sender == owner) return true;
  denials_.warn("permission_denied: job " + sender.short_hex() + " asked about " + what +
                " of job " + owner.short_hex() + "; refused");
  return false;
}

bool head::may_use_group(const protocol::task_spec& spec) {
  if (spec.where.how != scheduling_strategy::kind::placement_group || spec.job.nil()) return true;
  auto it = groups_.find(spec.where.group);
  // Unknown: route_to_group says so. A group of no job is the cluster's own.
  if (it == groups_.end() || it->second.info.job.nil()) return true;
  return owned_by_sender(spec.job, it->second.info.job, "running " + spec.function + " in placement group " +
                                                          spec.where.group.short_hex());
}

expected<void> head::check_amounts(const protocol::resource_set& s, const std::string& what,
                                   const job_id& sender) {
  auto ok = protocol::validate_amounts(s, what);
  if (!ok) {
    denials_.warn("invalid_argument: " + what + " from job " + sender.short_hex() + ": " +
                  ok.error().message() + "; refused");
  }
  return ok;
}

bool head::endpoint_ok(const address& a, const job_id& sender, const char* what) {
  if (a.endpoint.size() <= max_endpoint_bytes) return true;
  denials_.warn("invalid_argument: " + std::string(what) + " from job " + sender.short_hex() + " gives an address of " +
                std::to_string(a.endpoint.size()) + " bytes (at most " + std::to_string(max_endpoint_bytes) +
                "); refused");
  return false;
}

std::string head::name_key(const job_id& job, const std::string& name_space, const std::string& name) {
  // '\n' never occurs in a job's hex; a namespace holding one still cannot reach the job's
  // own namespace, whose key starts "job:".
  return (name_space.empty() ? "job:" + job.hex() : "ns:" + name_space) + "\n" + name;
}

std::string head::namespace_of(const job_id& job, const std::string& name_space) {
  if (job.nil()) return name_space;
  if (name_space.empty()) {
    auto it = job_namespaces_.find(job);
    return it == job_namespaces_.end() ? std::string() : it->second;
  }
  job_namespaces_.try_emplace(job, name_space);
  return name_space;
}

bool head::add_subscriber(const actor_id& id, actor_info& a, const address& subscriber, const job_id& sender,
                          const char* what) {
  if (std::find(a.subscribers.begin(), a.subscribers.end(), subscriber) != a.subscribers.end()) return true;
  if (!endpoint_ok(subscriber, sender, what)) return false;
  if (a.subscribers.size() >= max_actor_subscribers) {
    denials_.warn("resource_exhausted: " + std::string(what) + " from job " + sender.short_hex() + ": actor " +
                  id.short_hex() + " has " + std::to_string(a.subscribers.size()) + " subscribers already; refused");
    return false;
  }
  a.subscribers.push_back(subscriber);
  if (subscribers_saved_this_tick_ < subscriber_writes_per_tick) {
    ++subscribers_saved_this_tick_;
    persist(id, a);
  } else {
    unsaved_actors_.insert(id);
  }
  return true;
}

protocol::actor_update head::update_of(const actor_id& id, const actor_info& a) {
  protocol::actor_update u;
  u.actor = id;
  u.state = a.state;
  u.worker = a.worker;
  u.fail = a.fail;
  u.restarts = a.restarts;
  u.max_task_retries = a.spec.max_task_retries;
  return u;
}

void head::publish(const actor_id& id, actor_info& a) {
  const auto u = update_of(id, a);
  for (const auto& s : a.subscribers) (void)net_.send(s, u);
}

void head::mark_dead(const actor_id& id, actor_info& a, protocol::failure_info fail) {
  a.state = protocol::actor_state::dead;
  if (preemptible_.erase(id) > 0) preemptible_changed_ = true;
  a.fail = std::move(fail);
  if (!a.spec.actor_name.empty()) {
    auto it = names_.find(name_key(a.spec.job, a.spec.name_space, a.spec.actor_name));
    if (it != names_.end() && it->second == id) names_.erase(it);
  }
  persist(id, a);
  publish(id, a);
}

void head::on(protocol::actor_started& m) {
  auto it = actors_.find(m.actor);
  if (it != actors_.end() &&
      !owned_by_sender(m.sender_job, it->second.spec.job, "the start of actor " + m.actor.short_hex())) {
    return;
  }
  if (it != actors_.end() && it->second.state == protocol::actor_state::alive &&
      it->second.worker == m.worker) {
    return;  // said again for a head that restarted; this one had heard
  }
  if (it == actors_.end() || (it->second.state != protocol::actor_state::pending &&
                              it->second.state != protocol::actor_state::restarting)) {
    // Killed while it was starting: stop the worker that just came up.
    (void)net_.send(m.worker, protocol::kill_actor{m.actor, "killed while starting"});
    return;
  }
  it->second.state = protocol::actor_state::alive;
  it->second.fail = {};
  it->second.worker = m.worker;
  it->second.started = ++started_;
  it->second.gpus = std::move(m.gpus);
  if (it->second.spec.preemptible) {
    preemptible_.insert(m.actor);
    preemptible_changed_ = true;
  }
  persist(m.actor, it->second);
  publish(m.actor, it->second);
}

void head::on(protocol::actor_failed& m) {
  auto it = actors_.find(m.actor);
  if (it == actors_.end() || it->second.state == protocol::actor_state::dead) return;
  if (!owned_by_sender(m.sender_job, it->second.spec.job, "the failure of actor " + m.actor.short_hex())) {
    return;
  }
  // A job's own processes report only that a constructor failed: only the node's word
  // (its process died, or was preempted) restarts an actor.
  if (m.sender_job.nil() && restart(m.actor, it->second, m.fail)) return;
  mark_dead(m.actor, it->second, m.fail);
}

void head::on(protocol::subscribe_actor& m) {
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
  // sender's word: an update could reach the actor's own job as if from the head).
  if (!owned_by_sender(m.sender_job, a.spec.job, "subscribing to actor " + m.actor.short_hex())) return;
  if (!add_subscriber(m.actor, a, m.subscriber, m.sender_job, "subscribe_actor")) return;
  if (a.state != protocol::actor_state::pending) (void)net_.send(m.subscriber, update_of(m.actor, a));
}

void head::on(protocol::lookup_actor& m) {
  protocol::lookup_actor_reply reply;
  reply.request_id = m.request_id;
  auto it = names_.find(name_key(m.job, namespace_of(m.job, m.name_space), m.name));
  if (!m.name.empty() && it != names_.end()) {
    reply.found = true;
    reply.actor = it->second;
    reply.class_type = actors_[it->second].spec.class_type;
  }
  (void)net_.send(m.reply_to, std::move(reply));
}

void head::on(protocol::kill_actor& m) {
  auto it = actors_.find(m.actor);
  if (it == actors_.end() || it->second.state == protocol::actor_state::dead) return;
  auto& a = it->second;
  if (!owned_by_sender(m.sender_job, a.spec.job, "killing actor " + m.actor.short_hex())) return;
  mark_dead(m.actor, a,
            protocol::failure_info::make(detail::failure_kind::actor_died, error_code::unavailable,
                                         "actor " + m.actor.hex() + " was " + m.reason));
  (void)nodes_.send_to(a.node, m);
}

void head::on(protocol::unsubscribe_cluster& m) {
  forget_subscriber(m.endpoint);
  // Every node takes back what that process leased and drops what it asked for.
  nodes_.send_to_live(m);
}

void head::declare_dead(const node_id& id, const std::string& reason) {
  // Its worker processes died with it (a node's workers die with their node): what they
  // subscribed to forgets them below. Those of its last heartbeat, and its own connection.
  std::vector<std::string> gone = nodes_.mark_dead(id, reason);
  view_.mark_dead(id);
  CELER_LOG(warn, "head", "node " + id.short_hex() + " is dead: " + reason);
  // Groups with a bundle there are laid out again (all or nothing), their other bundles
  // given back; a reservation it never answered counts as refused.
  for (auto& [gid, g] : groups_) {
    for (std::size_t i = 0; g.replies_due > 0 && i < g.info.nodes.size(); ++i) {
      if (g.info.nodes[i] == id && !g.answered[i]) {
        protocol::bundle_reserved no{gid, static_cast<std::int32_t>(i), id, false, "its node died"};
        on(no);
      }
    }
    if (g.info.state != protocol::group_state::created) continue;
    if (std::find(g.info.nodes.begin(), g.info.nodes.end(), id) == g.info.nodes.end()) continue;
    std::vector<std::int32_t> others;
    for (std::size_t i = 0; i < g.info.nodes.size(); ++i) {
      if (g.info.nodes[i] != id) others.push_back(static_cast<std::int32_t>(i));
    }
    return_bundles(g, others, "a bundle's node died; the group is reserved again");
    g.info.state = protocol::group_state::pending;
    g.info.nodes.clear();
    g.info.why = "node " + id.short_hex() + " of a bundle died; reserving again";
    persist(g);
  }
  // What its worker processes subscribed to forgets them, or every later update would open a
  // connection to each, until the process runs out of sockets: those of its last
  // heartbeat, its actors', and the node's own connection (a zmq socket and its mailbox,
  // reconnecting forever).
  for (const auto& [aid, a] : actors_) {
    if (a.node == id && !a.worker.endpoint.empty()) gone.push_back(a.worker.endpoint);
  }
  std::sort(gone.begin(), gone.end());
  gone.erase(std::unique(gone.begin(), gone.end()), gone.end());
  for (const auto& endpoint : gone) forget_subscriber(endpoint);
  // After the groups: an actor restarted in a group waits for it to be reserved again.
  for (auto& [aid, a] : actors_) {
    if (a.node != id || a.state == protocol::actor_state::dead) continue;
    auto fail = protocol::failure_info::make(detail::failure_kind::actor_died,
                                             error_code::unavailable,
                                             "actor " + aid.hex() + " died: its node " +
                                               id.short_hex() + " died (" + reason + ")",
                                             a.spec.function, id.short_hex());
    if (!restart(aid, a, fail)) mark_dead(aid, a, std::move(fail));
  }
  const protocol::node_died died{id, reason};
  for (const auto& s : cluster_subscribers_) (void)net_.send(s, died);
  // Live nodes too: transfers from the dead node fail instead of waiting.
  nodes_.send_to_live(died, id);
}

std::string head::explain(const protocol::resource_set& need, const protocol::placement& where) const {
  if (where.how != scheduling_strategy::kind::placement_group) return view_.explain(need, where);
  // Work in a group waits for its group, or for room in its bundle (which the node, not
  // the head, accounts): the nodes' free resources say nothing about it.
  const std::string group = "placement group " + where.group.short_hex();
  const auto it = groups_.find(where.group);
  if (it == groups_.end()) return group + " is not known to the cluster";
  const auto& g = it->second;
  switch (g.info.state) {
    case protocol::group_state::removed: return group + " was " + g.info.why;
    case protocol::group_state::pending:
      return "waits for its " + group + " to be reserved (" + g.info.why + ")";
    case protocol::group_state::created: break;
  }
  if (where.bundle < 0 || static_cast<std::size_t>(where.bundle) >= g.info.bundles.size()) {
    return "waits for room in a bundle of " + group;
  }
  const auto b = static_cast<std::size_t>(where.bundle);
  return "waits for room in bundle " + std::to_string(b) + " of " + group + " on node " +
         g.info.nodes[b].short_hex() + ": it needs " + need.to_string() + " of the " +
         g.info.bundles[b].need.to_string() + " the bundle reserves, and work already in the "
         "bundle holds the rest";
}

void head::on(protocol::explain_placement& m) {
  protocol::placement_explained r;
  r.request_id = m.request_id;
  if (!m.sender_job.nil() && m.where.how == scheduling_strategy::kind::placement_group) {
    auto g = groups_.find(m.where.group);
    if (g != groups_.end() && !owned_by_sender(m.sender_job, g->second.info.job,
                                               "placement group " + m.where.group.short_hex())) {
      r.why = "permission_denied: placement group " + m.where.group.short_hex() + " is another job's";
      (void)net_.send(m.reply_to, std::move(r));
      return;
    }
  }
  if (!m.actor.nil()) {
    auto it = actors_.find(m.actor);
    if (it != actors_.end() && !owned_by_sender(m.sender_job, it->second.spec.job,
                                                "the placement of actor " + m.actor.short_hex())) {
      r.why = "permission_denied: actor " + m.actor.short_hex() + " is another job's";
      (void)net_.send(m.reply_to, std::move(r));
      return;
    }
    if (it != actors_.end() && (it->second.state == protocol::actor_state::pending ||
                                it->second.state == protocol::actor_state::restarting)) {
      r.why = explain(it->second.spec.resources, it->second.spec.where);
      if (r.why.empty()) r.why = "starting on node " + it->second.node.short_hex();
    }
  } else {
    r.why = explain(m.need, m.where);
  }
  (void)net_.send(m.reply_to, std::move(r));
}

void head::on(protocol::job_finished& m) {
  // Its actors' rows change together: one write, not two per actor (head_tables::begin_batch).
  struct batch {
    head_tables* t;
    ~batch() { if (t) t->commit_batch(); }
  } rows{tables_.get()};
  if (tables_) tables_->begin_batch();
  jobs_.ended(m.job);
  job_namespaces_.erase(m.job);
  // Its processes' node-death subscriptions go with it (they stop; a job cannot leave
  // its subscriptions behind to fill the head).
  if (subscriptions_of_.erase(m.job) > 0) {
    std::erase_if(cluster_subscribers_, [&](const address& a) {
      auto j = subscriber_jobs_.find(a.endpoint);
      if (j == subscriber_jobs_.end() || j->second != m.job) return false;
      if (tables_) tables_->drop_subscriber(a.endpoint);
      subscriber_jobs_.erase(j);
      return true;
    });
  }
  net_.job_ended(m.job);
  for (auto& [gid, g] : groups_) {
    if (g.info.job == m.job) remove_group(g, "removed: its job finished");
  }
  std::erase_if(groups_, [&](const auto& entry) {
    const bool gone = entry.second.info.job == m.job && entry.second.replies_due == 0;
    if (gone && tables_) tables_->drop_group(entry.first);
    return gone;
  });
  for (auto& [aid, a] : actors_) {
    if (a.spec.job != m.job || a.state == protocol::actor_state::dead) continue;
    mark_dead(aid, a,
              protocol::failure_info::make(detail::failure_kind::actor_died,
                                           error_code::unavailable,
                                           "actor " + aid.hex() + " was stopped: its job finished"));
    (void)nodes_.send_to(a.node, protocol::kill_actor{aid, "stopped: its job finished"});
  }
  // Forget the job's subscribers' interest in actors of the finished job.
  std::erase_if(actors_, [&](const auto& entry) {
    const bool gone =
      entry.second.spec.job == m.job && entry.second.state == protocol::actor_state::dead;
    if (gone && tables_) tables_->drop_actor(entry.first);
    return gone;
  });
  nodes_.send_to_live(m);
}

void head::on(protocol::status_query& m) {
  protocol::status_reply r;
  r.request_id = m.request_id;
  for (const auto& [id, n] : nodes_.all()) {
    protocol::node_status s;
    s.node = id;
    s.addr = n.addr;
    s.alive = n.alive;
    s.dead_reason = n.dead_reason;
    if (const auto* v = view_.find(id)) {
      s.total = v->total;
      s.available = n.alive ? v->available : protocol::resource_set{};
      s.labels = v->labels;
      s.queued = n.alive ? v->queued : 0;
      s.gpus = v->gpus.devices();
      s.gpu_free = v->gpus.free();
    }
    s.workers = n.workers;
    s.isolation = n.registration.isolation;
    s.store = n.store;
    s.waiting = n.waiting;
    s.gpu_samples = n.alive ? n.gpu_samples : std::vector<gpu::sample>{};
    if (n.alive) s.preempting = n.preempting;
    if (!m.sender_job.nil()) {
      // A job sees the nodes and their totals, and only its own waiting work and actors.
      std::erase_if(s.waiting, [&](const protocol::waiting_request& w) { return w.job != m.sender_job; });
      std::erase_if(s.preempting, [&](const protocol::preemption_state& p) {
        auto a = actors_.find(p.actor);
        return a == actors_.end() || a->second.spec.job != m.sender_job;
      });
    }
    for (auto& w : s.waiting) {
      w.why = explain(w.need, w.where);
      if (w.why.empty()) w.why = "queued behind earlier work on its node";
    }
    r.nodes.push_back(std::move(s));
  }
  for (const auto& [aid, a] : actors_) {
    if (!m.sender_job.nil() && a.spec.job != m.sender_job) continue;
    if (a.state == protocol::actor_state::alive) ++r.actors_alive;
    if (a.state == protocol::actor_state::pending || a.state == protocol::actor_state::restarting) {
      ++r.actors_pending;
    }
  }
  (void)net_.send(m.reply_to, std::move(r));
}

void head::on(protocol::resource_query& m) {
  protocol::resource_reply r;
  r.request_id = m.request_id;
  for (const auto& n : view_.nodes()) {
    if (!n.alive) continue;
    r.total.add(n.total);
    r.available.add(n.available);
  }
  (void)net_.send(m.reply_to, std::move(r));
}

} // namespace celer
