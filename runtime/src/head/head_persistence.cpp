// The head's rows in its tables: written as actors and groups change (nodes: node_table),
// and loaded once when a head starts on the tables of one that ran before. Part of class head (head.hpp);
// split from head.cpp by responsibility.
#include "head/head.hpp"

#include "log.hpp"

#include <celer/version.hpp>

#include <algorithm>

namespace celer {

void head::persist(const actor_id& id, const actor_info& a) {
  if (!tables_) return;
  actor_row r;
  r.spec = a.spec;
  r.spec.actor = id;
  r.state = a.state;
  r.worker = a.worker;
  r.node = a.node;
  r.fail = a.fail;
  r.subscribers = a.subscribers;
  r.started = a.started;
  r.gpus = a.gpus;
  r.restarts = a.restarts;
  tables_->save_actor(r);
}

void head::persist(const group_info& g) {
  if (tables_) tables_->save_group(g.info);
}

void head::restore(head_state s) {
  // Everyone recovered reconnects within reconnect_interval_max (sockets back off while it
  // was away), then has node_timeout_ms to heartbeat: as if last heard that far ahead.
  const auto now = now_() + reconnect_interval_max;
  cluster_subscribers_ = std::move(s.subscribers);
  // A job's process listens at "...#job=<hex>": its subscriptions count against its job.
  for (const auto& a : cluster_subscribers_) {
    job_id job;
    if (const auto at = a.endpoint.rfind("#job="); at != std::string::npos) {
      job = job_id::parse(std::string_view(a.endpoint).substr(at + 5)).value_or(job_id{});
    }
    if (subscriber_jobs_.emplace(a.endpoint, job).second && !job.nil()) ++subscriptions_of_[job];
  }
  std::size_t live_nodes = 0, live_actors = 0;
  const std::size_t known_nodes = s.nodes.size();
  // A fresh grace, as if each had just registered. Its free resources come with its
  // heartbeat.
  nodes_.restore(std::move(s.nodes), now);
  for (const auto& [id, n] : nodes_.all()) {
    view_.add_node(id, n.registration.total, n.registration.labels, n.registration.gpus);
    if (!n.alive) {
      view_.mark_dead(id);
    } else {
      ++live_nodes;
    }
  }
  jobs_.restore(s.jobs, now);  // its driver too must heartbeat in time
  for (auto& info : s.groups) {
    auto& g = groups_[info.id];
    g.info = std::move(info);
    if (g.info.state != protocol::group_state::pending) continue;
    // It was being reserved when the last head stopped: nodes may hold some of its
    // bundles. They give them back (a node that holds none ignores this), and the group
    // is laid out again on the next tick.
    nodes_.send_to_live(protocol::return_bundles{g.info.id, {}, "the head restarted while reserving it"});
    g.info.nodes.clear();
  }
  for (auto& row : s.actors) {
    const actor_id id = row.spec.actor;
    auto& a = actors_[id];
    a.spec = std::move(row.spec);
    a.state = row.state;
    a.worker = row.worker;
    a.node = row.node;
    a.fail = std::move(row.fail);
    a.subscribers = std::move(row.subscribers);
    a.started = row.started;
    a.gpus = std::move(row.gpus);
    a.restarts = row.restarts;
    started_ = std::max(started_, a.started);
    if (a.state == protocol::actor_state::dead) continue;
    ++live_actors;
    if (!a.spec.actor_name.empty()) names_[name_key(a.spec.job, a.spec.name_space, a.spec.actor_name)] = id;
    if (a.state == protocol::actor_state::alive && a.spec.preemptible) {
      preemptible_.insert(id);
      preemptible_changed_ = true;
    }
    const bool placing = a.state == protocol::actor_state::pending ||
                         a.state == protocol::actor_state::restarting;
    if (placing && a.node.nil() && a.spec.where.how == scheduling_strategy::kind::placement_group) {
      // Waiting for its group to be created: it waits again.
      auto g = groups_.find(a.spec.where.group);
      if (g != groups_.end()) g->second.actors.push_back(a.spec);
    } else if (placing && a.node.nil()) {
      parked_actors_.push_back(id);  // it waited for a live node: it waits again
    }
  }
  objects_.restore(s.durable);
  // The live nodes resend what this head may not have: what they spilled to the old one
  // that it had not placed yet, and their registration and durable objects (no-ops when
  // the tables had them).
  nodes_.send_to_live(protocol::head_restarted{"it recovered from its tables"});
  // An actor being started when the last head stopped: its start_actor may have been lost
  // with that head. Its node is asked again; one that has it already ignores the resend.
  for (const auto& [id, a] : actors_) {
    const bool placing = a.state == protocol::actor_state::pending ||
                         a.state == protocol::actor_state::restarting;
    if (!placing || a.node.nil()) continue;
    (void)nodes_.send_to(a.node, protocol::start_actor{a.spec});
  }
  if (!no_live_node()) unpark();  // else the first node to register places them
  if (known_nodes == 0 && s.actors.empty() && s.jobs.empty() && s.groups.empty()) return;
  // Said on the first tick, once the daemon logs to its file.
  recovered_ = "recovered from its tables: " + std::to_string(live_nodes) + " live node(s) (of " +
               std::to_string(known_nodes) + "), " + std::to_string(live_actors) +
               " actor(s) not dead (of " + std::to_string(s.actors.size()) + "), " +
               std::to_string(s.jobs.size()) + " job(s), " + std::to_string(s.groups.size()) +
               " placement group(s), " + std::to_string(s.durable.size()) +
               " durable object location(s)" +
               (s.unreadable > 0 ? "; " + std::to_string(s.unreadable) + " unreadable row(s) skipped"
                                 : std::string());
}

} // namespace celer
