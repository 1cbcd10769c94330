#include "head/head.hpp"

#include "log.hpp"

#include <celer/version.hpp>

namespace celer {

head::head(transport& net, address self) : net_(net), self_(std::move(self)) {}

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
  nodes_[m.node] = node_info{m.node_address, m.total, m.labels};
  CELER_LOG(info, "head", "node " + m.node.short_hex() + " joined with " + m.total.to_string());
}

const std::pair<const node_id, head::node_info>* head::feasible_node(
  const protocol::resource_set& need, std::string& why) const {
  for (const auto& entry : nodes_) {
    if (entry.second.total.covers(need)) return &entry;
  }
  if (nodes_.empty()) {
    why = "the cluster has no nodes";
    return nullptr;
  }
  // Name the largest node's amount of the first resource that nothing offers enough of.
  const std::string short_of = nodes_.begin()->second.total.first_short(need);
  double best = 0;
  for (const auto& [nid, n] : nodes_) best = std::max(best, n.total.get(short_of));
  why = "it needs " + need.to_string() + ", but no node has enough " + short_of +
        " (the most any of the " + std::to_string(nodes_.size()) + " node(s) has is " +
        protocol::format_amount(best) + ")";
  return nullptr;
}

void head::on(protocol::submit_task& m) {
  std::string why;
  const auto* target = feasible_node(m.spec.resources, why);
  if (target == nullptr || m.from_head) {
    protocol::task_result r;
    r.task = m.spec.id;
    protocol::object_payload v;
    v.id = m.spec.return_id();
    v.fail.kind = detail::failure_kind::infeasible;
    v.fail.code = error_code::resource_exhausted;
    v.fail.function = m.spec.function;
    v.fail.message = "task " + m.spec.function + " can never run: " +
                     (target == nullptr ? why : "its node rejected it");
    r.returns.push_back(std::move(v));
    (void)net_.send(m.spec.owner, std::move(r));
    return;
  }
  m.from_head = true;
  (void)net_.send(target->second.addr, std::move(m));
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
      reply.fail.kind = detail::failure_kind::invalid_call;
      reply.fail.code = error_code::already_exists;
      reply.fail.message = "an actor named '" + spec.actor_name + "' already exists";
      (void)net_.send(m.reply_to, std::move(reply));
      return;
    }
  }
  std::string why;
  const auto* target = feasible_node(spec.resources, why);
  if (target == nullptr) {
    reply.fail.kind = detail::failure_kind::infeasible;
    reply.fail.code = error_code::resource_exhausted;
    reply.fail.function = spec.function;
    reply.fail.message = "actor " + spec.function + " can never be placed: " + why;
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
    u.fail.kind = detail::failure_kind::actor_died;
    u.fail.code = error_code::not_found;
    u.fail.message = "actor " + m.actor.hex() + " is not known to the cluster";
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
  protocol::failure_info fail;
  fail.kind = detail::failure_kind::actor_died;
  fail.code = error_code::unavailable;
  fail.message = "actor " + m.actor.hex() + " was " + m.reason;
  mark_dead(m.actor, a, std::move(fail));
  auto n = nodes_.find(a.node);
  if (n != nodes_.end()) (void)net_.send(n->second.addr, m);
}

} // namespace celer
