#include "head/head.hpp"

#include "log.hpp"

#include <celer/version.hpp>

#include <algorithm>

namespace celer {

head::head(transport& net, std::chrono::milliseconds node_timeout,
           double spread_threshold, clock now, std::unique_ptr<head_tables> tables)
  : net_(net),
    tables_(std::move(tables)),
    liveness_(node_timeout, std::move(now)),
    nodes_(net_, tables_.get(), liveness_.now()),
    view_(spread_threshold),
    objects_(net_, tables_.get(), [this](const node_id& n) { return nodes_.live_address(n); }),
    jobs_(net_, tables_.get(), liveness_.now(), [this](const node_id& n) { return nodes_.live_address(n); }),
    groups_(net_, tables_.get(), nodes_, view_, guard_, events_,
            {.released = [this](auto leases, auto actors) { route_released(std::move(leases), std::move(actors)); },
             .removed = [this](const placement_group_id& g, const std::string& why) { actors_.group_removed(g, why); }}),
    actors_(net_, tables_.get(), nodes_, groups_, guard_, events_,
            [this](actor_directory::actor& a, std::string& why) { return place_actor(a, why); }),
    subscriptions_(net_, tables_.get(), guard_, events_) {
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
      // Each message goes to the manager that owns what it is about; the rest (where work
      // goes, and what every manager reacts to) are the head's own.
      if constexpr (requires { objects_.on(msg); }) {
        objects_.on(msg);
      } else if constexpr (requires { jobs_.on(msg); }) {
        jobs_.on(msg);
      } else if constexpr (requires { actors_.on(msg); }) {
        actors_.on(msg);
      } else if constexpr (requires { groups_.on(msg); }) {
        groups_.on(msg);
      } else if constexpr (requires { subscriptions_.on(msg); }) {
        subscriptions_.on(msg);
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
  const std::size_t actors = actors_.parked();
  if (parked_leases_.empty() && actors == 0) return;
  auto leases = std::move(parked_leases_);
  parked_leases_.clear();
  CELER_LOG(warn, "head", "a node is alive again: placing " + std::to_string(leases.size()) +
                            " lease request(s) and " + std::to_string(actors) +
                            " actor(s) that waited for one");
  for (auto& m : leases) on(m);
  actors_.unpark();
}

node_table::entry* head::pick_node(const protocol::task_spec& spec, std::span<const protocol::node_bytes> locality,
                                   std::string& why) {
  auto d = view_.place(spec.resources, spec.where, locality);
  if (d.never()) {
    why = std::move(d.why);
    return nullptr;
  }
  if (!d.now && actors_.any_preemptible()) {
    // Regrouped only when an actor that opted in starts or dies.
    if (auto list = actors_.preemptible_if_changed()) view_.set_preemptible(*list);
    auto room = view_.preemption_target(spec.resources, spec.where, spec.priority);
    if (room && *room != d.target) {
      view_.move_waiting(d.target, *room, spec.resources);
      d.target = *room;
    }
  }
  return nodes_.find(d.target);
}

actor_directory::placing head::place_actor(actor_directory::actor& a, std::string& why) {
  bool never = true;
  const bool in_group = a.spec.where.how == scheduling_strategy::kind::placement_group;
  auto* target = in_group ? groups_.route(a.spec, why, never) : pick_node(a.spec, {}, why);
  if (target == nullptr && !in_group && no_live_node()) {
    CELER_LOG(warn, "head", "no node is alive: actor " + a.spec.actor.short_hex() + " (" +
                              a.spec.function + ") waits for one");
    return actor_directory::placing::parked;
  }
  if (target == nullptr) return never ? actor_directory::placing::never : actor_directory::placing::queued;
  a.node = target->first;
  (void)net_.send(target->second.addr, protocol::start_actor{a.spec});
  return actor_directory::placing::started;
}

void head::route_released(std::vector<protocol::request_lease> leases, std::vector<protocol::task_spec> actors) {
  for (auto& m : leases) on(m);
  for (auto& spec : actors) {
    std::string why;
    bool never = false;
    auto* target = groups_.route(spec, why, never);
    actors_.placed_in_group(spec, target, why);
  }
}

void head::fail_lease(const protocol::task_spec& spec, const std::string& why) {
  protocol::lease_reply r;
  r.request = spec.id;
  r.fail = protocol::failure_info::make(detail::failure_kind::infeasible, error_code::resource_exhausted, why,
                                        spec.function);
  (void)net_.send(spec.owner, std::move(r));
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
  if (auto ok = guard_.check_amounts(m.spec.resources, "request_lease " + m.spec.function, m.spec.job); !ok) {
    refuse(error_code::invalid_argument, ok.error().message());
    return;
  }
  if (!groups_.may_use(m.spec)) {
    refuse(error_code::permission_denied, "placement group " + m.spec.where.group.short_hex() +
                                            " belongs to another job");
    return;
  }
  if (m.spec.where.how == scheduling_strategy::kind::placement_group) {
    bool never = false;
    auto* node = groups_.route(m.spec, why, never);
    if (node != nullptr) {
      m.from_head = true;
      (void)net_.send(node->second.addr, std::move(m));
    } else if (never) {
      fail_lease(m.spec, why);
    } else {
      groups_.wait_for(std::move(m));  // until it is created
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
    fail_lease(m.spec, why);
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

void head::on(protocol::unsubscribe_cluster& m) {
  forget_subscriber(m.endpoint);
  // Every node takes back what that process leased and drops what it asked for.
  nodes_.send_to_live(m);
}

void head::forget_subscriber(const std::string& endpoint) {
  subscriptions_.forget(endpoint);
  actors_.forget(endpoint);
  net_.forget(endpoint);
}

void head::declare_dead(const node_id& id, const std::string& reason) {
  // Its worker processes died with it (a node's workers die with their node): what they
  // subscribed to forgets them, or every later update would open a connection to each,
  // until the process runs out of sockets: those of its last heartbeat, its actors', and
  // the node's own connection (a zmq socket and its mailbox, reconnecting forever).
  std::vector<std::string> gone = nodes_.mark_dead(id, reason);
  view_.mark_dead(id);
  CELER_LOG(warn, "head", "node " + id.short_hex() + " is dead: " + reason);
  actors_.add_workers_on(id, gone);
  std::sort(gone.begin(), gone.end());
  gone.erase(std::unique(gone.begin(), gone.end()), gone.end());
  for (const auto& endpoint : gone) forget_subscriber(endpoint);
  // Groups laid out again, actors restarted or ended, subscribers told (head_events.hpp).
  events_.node_died(id, reason);
  // Live nodes too: transfers from the dead node fail instead of waiting.
  nodes_.send_to_live(protocol::node_died{id, reason}, id);
}

void head::on(protocol::job_finished& m) {
  // Its actors' rows change together: one write, not two per actor (head_tables::begin_batch).
  struct batch {
    head_tables* t;
    ~batch() { if (t) t->commit_batch(); }
  } rows{tables_.get()};
  if (tables_) tables_->begin_batch();
  jobs_.ended(m.job);
  net_.job_ended(m.job);
  // Its subscriptions, placement groups and actors go (head_events.hpp).
  events_.job_ended(m.job);
  nodes_.send_to_live(m);
}

std::string head::explain(const protocol::resource_set& need, const protocol::placement& where) const {
  if (where.how != scheduling_strategy::kind::placement_group) return view_.explain(need, where);
  return groups_.explain(need, where);
}

void head::on(protocol::explain_placement& m) {
  protocol::placement_explained r;
  r.request_id = m.request_id;
  if (!m.sender_job.nil() && m.where.how == scheduling_strategy::kind::placement_group) {
    const auto* g = groups_.find(m.where.group);
    if (g != nullptr && !guard_.owned_by_sender(m.sender_job, g->job, "placement group " + m.where.group.short_hex())) {
      r.why = "permission_denied: placement group " + m.where.group.short_hex() + " is another job's";
      (void)net_.send(m.reply_to, std::move(r));
      return;
    }
  }
  if (!m.actor.nil()) {
    const auto* a = actors_.find(m.actor);
    if (a != nullptr &&
        !guard_.owned_by_sender(m.sender_job, a->spec.job, "the placement of actor " + m.actor.short_hex())) {
      r.why = "permission_denied: actor " + m.actor.short_hex() + " is another job's";
      (void)net_.send(m.reply_to, std::move(r));
      return;
    }
    if (a != nullptr &&
        (a->state == protocol::actor_state::pending || a->state == protocol::actor_state::restarting)) {
      r.why = explain(a->spec.resources, a->spec.where);
      if (r.why.empty()) r.why = "starting on node " + a->node.short_hex();
    }
  } else {
    r.why = explain(m.need, m.where);
  }
  (void)net_.send(m.reply_to, std::move(r));
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
        const auto* a = actors_.find(p.actor);
        return a == nullptr || a->spec.job != m.sender_job;
      });
    }
    for (auto& w : s.waiting) {
      w.why = explain(w.need, w.where);
      if (w.why.empty()) w.why = "queued behind earlier work on its node";
    }
    r.nodes.push_back(std::move(s));
  }
  actors_.count(m.sender_job, r.actors_alive, r.actors_pending);
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
