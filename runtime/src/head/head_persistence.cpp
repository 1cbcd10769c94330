// A head started on the tables of one that ran before: each manager loads its rows, then
// the live nodes are asked for what this head may not have. Part of class head (head.hpp).
// Each manager writes its own rows as its state changes.
#include "head/head.hpp"

#include "log.hpp"

#include <algorithm>

namespace celer {

void head::restore(head_state s) {
  // Everyone recovered reconnects within reconnect_interval_max (sockets back off while it
  // was away), then has node_timeout_ms to heartbeat: as if last heard that far ahead.
  const auto now = liveness_.now()() + reconnect_interval_max;
  subscriptions_.restore(std::move(s.subscribers));
  const std::size_t known_nodes = s.nodes.size();
  // A fresh grace, as if each had just registered. Its free resources come with its
  // heartbeat.
  nodes_.restore(std::move(s.nodes), now);
  std::size_t live_nodes = 0;
  for (const auto& [id, n] : nodes_.all()) {
    view_.add_node(id, n.registration.total, n.registration.labels, n.registration.gpus);
    if (!n.alive) {
      view_.mark_dead(id);
    } else {
      ++live_nodes;
    }
  }
  jobs_.restore(s.jobs, now);  // its driver too must heartbeat in time
  const std::size_t groups = s.groups.size(), actors = s.actors.size();
  const auto live_actors = std::count_if(s.actors.begin(), s.actors.end(), [](const actor_row& a) {
    return a.state != protocol::actor_state::dead;
  });
  groups_.restore(std::move(s.groups));  // before the actors: some wait for their group
  actors_.restore(std::move(s.actors));
  objects_.restore(s.durable);
  // The live nodes resend what this head may not have: what they spilled to the old one
  // that it had not placed yet, and their registration and durable objects (no-ops when
  // the tables had them).
  nodes_.send_to_live(protocol::head_restarted{"it recovered from its tables"});
  // An actor being started when the last head stopped: its start_actor may have been lost
  // with that head.
  actors_.resend_starts();
  if (!no_live_node()) unpark();  // else the first node to register places them
  if (known_nodes == 0 && actors == 0 && s.jobs.empty() && groups == 0) return;
  // Said on the first tick, once the daemon logs to its file.
  recovered_ = "recovered from its tables: " + std::to_string(live_nodes) + " live node(s) (of " +
               std::to_string(known_nodes) + "), " + std::to_string(live_actors) + " actor(s) not dead (of " +
               std::to_string(actors) + "), " + std::to_string(s.jobs.size()) + " job(s), " +
               std::to_string(groups) + " placement group(s), " + std::to_string(s.durable.size()) +
               " durable object location(s)" +
               (s.unreadable > 0 ? "; " + std::to_string(s.unreadable) + " unreadable row(s) skipped" : std::string());
}

} // namespace celer
