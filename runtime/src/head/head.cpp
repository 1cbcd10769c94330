#include "head/head.hpp"

#include "log.hpp"

#include <celer/version.hpp>

namespace celer {

head::head(transport& net, address self, std::chrono::milliseconds node_timeout,
           double spread_threshold)
  : net_(net), self_(std::move(self)), node_timeout_(node_timeout), view_(spread_threshold) {}

void head::handle(protocol::message& m) {
  std::visit(
    [&](auto& msg) {
      if constexpr (requires { on(msg); }) {
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
  auto& n = nodes_[m.node];
  n.addr = m.node_address;
  n.alive = true;
  n.dead_reason.clear();
  n.last_seen = std::chrono::steady_clock::now();
  n.waiting.clear();
  std::string gpus;
  for (const auto& d : m.gpus) gpus += (gpus.empty() ? " (" : ", ") + d.name;
  CELER_LOG(info, "head", "node " + m.node.short_hex() + " joined with " + m.total.to_string() +
                            (gpus.empty() ? "" : gpus + ")"));
  view_.add_node(m.node, m.total, m.labels, m.gpus);
}

std::pair<const node_id, head::node_info>* head::pick_node(
  const protocol::task_spec& spec, std::span<const protocol::node_bytes> locality,
  std::string& why) {
  auto d = view_.place(spec.resources, spec.where, locality);
  if (d.never()) {
    why = std::move(d.why);
    return nullptr;
  }
  auto it = nodes_.find(d.target);
  return it == nodes_.end() ? nullptr : &*it;
}

void head::on(protocol::request_lease& m) {
  std::string why;
  auto* target = pick_node(m.spec, m.locality, why);
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
  // The head does not track where it sent each request: every node drops what it holds.
  m.from_head = true;
  for (const auto& [id, n] : nodes_) {
    if (n.alive) (void)net_.send(n.addr, m);
  }
}

void head::on(protocol::create_actor& m) {
  protocol::create_actor_reply reply;
  reply.request_id = m.request_id;
  const auto& spec = m.spec;
  if (auto known = actors_.find(spec.actor); known != actors_.end()) {
    // A retried request (its reply was lost): the actor is already registered and placed.
    known->second.subscribers.push_back(m.reply_to);
    reply.ok = true;
    (void)net_.send(m.reply_to, std::move(reply));
    return;
  }
  if (!spec.actor_name.empty()) {
    auto it = names_.find(spec.actor_name);
    if (it != names_.end()) {
      reply.fail = protocol::failure_info::make(
        detail::failure_kind::invalid_call, error_code::already_exists,
        "an actor named '" + spec.actor_name + "' already exists");
      (void)net_.send(m.reply_to, std::move(reply));
      return;
    }
  }
  std::string why;
  auto* target = pick_node(spec, {}, why);
  if (target == nullptr) {
    reply.fail = protocol::failure_info::make(
      detail::failure_kind::infeasible, error_code::resource_exhausted,
      "actor " + spec.function + " can never be placed: " + why, spec.function);
    (void)net_.send(m.reply_to, std::move(reply));
    return;
  }
  auto& a = actors_[spec.actor];
  a.spec = spec;
  a.node = target->first;
  a.subscribers.push_back(m.reply_to);
  if (!spec.actor_name.empty()) names_[spec.actor_name] = spec.actor;
  reply.ok = true;
  (void)net_.send(m.reply_to, std::move(reply));
  (void)net_.send(target->second.addr, protocol::start_actor{spec});
}

void head::publish(const actor_id& id, actor_info& a) {
  protocol::actor_update u;
  u.actor = id;
  u.state = a.state;
  u.worker = a.worker;
  u.fail = a.fail;
  for (const auto& s : a.subscribers) (void)net_.send(s, u);
}

void head::mark_dead(const actor_id& id, actor_info& a, protocol::failure_info fail) {
  a.state = protocol::actor_state::dead;
  a.fail = std::move(fail);
  if (!a.spec.actor_name.empty()) {
    auto it = names_.find(a.spec.actor_name);
    if (it != names_.end() && it->second == id) names_.erase(it);
  }
  publish(id, a);
}

void head::on(protocol::actor_started& m) {
  auto it = actors_.find(m.actor);
  if (it == actors_.end() || it->second.state != protocol::actor_state::pending) {
    // Killed while it was starting: stop the worker that just came up.
    (void)net_.send(m.worker, protocol::kill_actor{m.actor, "killed while starting"});
    return;
  }
  it->second.state = protocol::actor_state::alive;
  it->second.worker = m.worker;
  publish(m.actor, it->second);
}

void head::on(protocol::actor_failed& m) {
  auto it = actors_.find(m.actor);
  if (it == actors_.end() || it->second.state == protocol::actor_state::dead) return;
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
  a.subscribers.push_back(m.subscriber);
  if (a.state != protocol::actor_state::pending) {
    protocol::actor_update u;
    u.actor = m.actor;
    u.state = a.state;
    u.worker = a.worker;
    u.fail = a.fail;
    (void)net_.send(m.subscriber, std::move(u));
  }
}

void head::on(protocol::lookup_actor& m) {
  protocol::lookup_actor_reply reply;
  reply.request_id = m.request_id;
  auto it = names_.find(m.name);
  if (it != names_.end()) {
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
  mark_dead(m.actor, a,
            protocol::failure_info::make(detail::failure_kind::actor_died, error_code::unavailable,
                                         "actor " + m.actor.hex() + " was " + m.reason));
  auto n = nodes_.find(a.node);
  if (n != nodes_.end() && n->second.alive) (void)net_.send(n->second.addr, m);
}

void head::on(protocol::heartbeat& m) {
  auto it = nodes_.find(m.node);
  if (it == nodes_.end() || !it->second.alive) return;  // declared dead: stays dead
  auto& n = it->second;
  n.last_seen = std::chrono::steady_clock::now();
  n.workers = m.workers;
  n.store = m.store;
  n.waiting = std::move(m.waiting);
  view_.refresh(m.node, m.available, m.gpu_free, m.queued, m.queued_gpus);
}

void head::on(protocol::job_heartbeat& m) { jobs_[m.job] = std::chrono::steady_clock::now(); }

void head::on(protocol::unsubscribe_cluster& m) {
  std::erase_if(cluster_subscribers_, [&](const address& a) { return a.endpoint == m.endpoint; });
  // Every node takes back what that process leased and drops what it asked for.
  for (const auto& [id, n] : nodes_) {
    if (n.alive) (void)net_.send(n.addr, m);
  }
  net_.forget(m.endpoint);
}

void head::on(protocol::tick&) {
  if (node_timeout_.count() <= 0) return;
  const auto now = std::chrono::steady_clock::now();
  std::vector<job_id> silent;
  for (const auto& [job, seen] : jobs_) {
    if (now - seen > node_timeout_) silent.push_back(job);
  }
  for (const auto& job : silent) {
    CELER_LOG(warn, "head", "the driver of job " + job.short_hex() +
                              " stopped heartbeating; stopping the job's actors and workers");
    protocol::job_finished done{job};
    on(done);
  }
  for (auto& [id, n] : nodes_) {
    if (n.alive && now - n.last_seen > node_timeout_) {
      declare_dead(id, n,
                   "no heartbeat for " +
                     std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      now - n.last_seen)
                                      .count()) +
                     " ms");
    }
  }
}

void head::declare_dead(const node_id& id, node_info& n, const std::string& reason) {
  n.alive = false;
  n.dead_reason = reason;
  n.workers = 0;
  n.waiting.clear();
  view_.mark_dead(id);
  CELER_LOG(warn, "head", "node " + id.short_hex() + " is dead: " + reason);
  for (auto& [aid, a] : actors_) {
    if (a.node != id || a.state == protocol::actor_state::dead) continue;
    mark_dead(aid, a,
              protocol::failure_info::make(detail::failure_kind::actor_died,
                                           error_code::unavailable,
                                           "actor " + aid.hex() + " died: its node " +
                                             id.short_hex() + " died (" + reason + ")",
                                           a.spec.function, id.short_hex()));
  }
  const protocol::node_died died{id, reason};
  for (const auto& s : cluster_subscribers_) (void)net_.send(s, died);
  // Live nodes too: transfers from the dead node fail instead of waiting.
  for (const auto& [nid, other] : nodes_) {
    if (nid != id && other.alive) (void)net_.send(other.addr, died);
  }
}

void head::on(protocol::durable_objects& m) {
  for (const auto& id : m.ids) durable_[id] = m.node;
}

void head::on(protocol::locate_object& m) {
  protocol::object_location r;
  r.request_id = m.request_id;
  if (auto d = durable_.find(m.id); d != durable_.end()) {
    if (auto n = nodes_.find(d->second); n != nodes_.end() && n->second.alive) {
      r.found = true;
      r.node = d->second;
      r.node_addr = n->second.addr;
    }
  }
  (void)net_.send(m.reply_to, std::move(r));
}

void head::on(protocol::explain_placement& m) {
  protocol::placement_explained r;
  r.request_id = m.request_id;
  if (!m.actor.nil()) {
    auto it = actors_.find(m.actor);
    if (it != actors_.end() && it->second.state == protocol::actor_state::pending) {
      r.why = view_.explain(it->second.spec.resources, it->second.spec.where);
      if (r.why.empty()) r.why = "starting on node " + it->second.node.short_hex();
    }
  } else {
    r.why = view_.explain(m.need, m.where);
  }
  (void)net_.send(m.reply_to, std::move(r));
}

void head::on(protocol::subscribe_cluster& m) { cluster_subscribers_.push_back(m.subscriber); }

void head::on(protocol::job_finished& m) {
  jobs_.erase(m.job);
  for (auto& [aid, a] : actors_) {
    if (a.spec.job != m.job || a.state == protocol::actor_state::dead) continue;
    mark_dead(aid, a,
              protocol::failure_info::make(detail::failure_kind::actor_died,
                                           error_code::unavailable,
                                           "actor " + aid.hex() + " was stopped: its job finished"));
    auto n = nodes_.find(a.node);
    if (n != nodes_.end() && n->second.alive) {
      (void)net_.send(n->second.addr, protocol::kill_actor{aid, "stopped: its job finished"});
    }
  }
  // Forget the job's subscribers' interest in actors of the finished job.
  std::erase_if(actors_, [&](const auto& entry) {
    return entry.second.spec.job == m.job && entry.second.state == protocol::actor_state::dead;
  });
  for (const auto& [nid, n] : nodes_) {
    if (n.alive) (void)net_.send(n.addr, m);
  }
}

void head::on(protocol::status_query& m) {
  protocol::status_reply r;
  r.request_id = m.request_id;
  for (const auto& [id, n] : nodes_) {
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
    s.store = n.store;
    s.waiting = n.waiting;
    for (auto& w : s.waiting) {
      w.why = view_.explain(w.need, w.where);
      if (w.why.empty()) w.why = "queued behind earlier work on its node";
    }
    r.nodes.push_back(std::move(s));
  }
  for (const auto& [aid, a] : actors_) {
    if (a.state == protocol::actor_state::alive) ++r.actors_alive;
    if (a.state == protocol::actor_state::pending) ++r.actors_pending;
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
