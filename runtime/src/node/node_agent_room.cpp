// A node agent's room held apart: the placement group bundles reserved here (their
// accounting is node_room's), and the preemption of actors that opted in when
// higher-priority work needs their room.
// (node_agent.cpp: the head, the queues and dispatch; worker_pool.cpp: workers.)
#include "node/node_agent.hpp"

#include "log.hpp"
#include "scheduler/cluster_view.hpp"

#include <algorithm>

namespace celer {

void node_agent::on(protocol::reserve_bundle& m) {
  protocol::bundle_reserved r{m.group, m.index, cfg_.id, false, {}};
  r.why = stopping_ ? "the node is stopping" : room_.reserve(m);
  r.ok = r.why.empty();
  (void)net_.send(cfg_.head, std::move(r));
}

void node_agent::on(protocol::return_bundles& m) {
  const std::string why = "its placement group bundle was given back (" + m.why + ")";
  for (const auto& key : room_.bundles_named(m.group, m.indices)) {
    // Waiting work fails; running work is stopped (processes are killed).
    for (auto& q : queues_.shapes()) {
      if (q.where.group != key.first || q.where.bundle != key.second) continue;
      for (auto& w : queues_.take_all(q)) refuse(w.spec, why);
    }
    pool_.stop_in_bundle(key, why);
    room_.give_back(key);
  }
  queues_.prune();
  dispatch();
}

bool node_agent::preempt_for(const scheduling::shape_queues::shape& q, protocol::resource_set& room,
                             scheduling::device_pool& room_devices) {
  const auto& spec = q.tasks.front().spec;
  const std::int64_t units = q.need.units(protocol::gpu);
  std::vector<std::pair<worker_id, worker_slot*>> candidates;
  pool_.for_each([&](const worker_id& id, worker_slot& w) {
    if (w.actor_worker && w.busy && w.in_bundle.group.nil() && !w.preempt_deadline &&
        w.preemptible && w.ready && !w.pending && w.priority < spec.priority) {
      candidates.emplace_back(id, &w);
    }
  });
  if (room.covers(q.need) && room_devices.fits(units, q.where)) {
    return true;  // the actors already told make room
  }
  if (candidates.empty()) return false;
  std::sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) {
    if (a.second->priority != b.second->priority) return a.second->priority < b.second->priority;
    return a.second->started > b.second->started;  // the newest loses least work
  });
  protocol::resource_set free;
  std::vector<protocol::gpu_share> shares;
  const auto chosen =
    scheduling::pick_victims(candidates.size(), [&](const std::vector<bool>& set) {
      free = room;
      shares.clear();
      for (std::size_t i = 0; i < set.size(); ++i) {
        if (!set[i]) continue;
        free.add(candidates[i].second->held);
        const auto& g = candidates[i].second->gpus;
        shares.insert(shares.end(), g.begin(), g.end());
      }
      return free.covers(q.need) && room_devices.fits_after(units, q.where, shares);
    });
  if (std::none_of(chosen.begin(), chosen.end(), [](bool b) { return b; })) return false;
  const std::string why =
    "was preempted on node " + cfg_.id.short_hex() + " for " +
    (spec.kind == protocol::task_kind::actor_creation ? "actor " : "task ") + spec.function +
    " of priority " + std::to_string(spec.priority) + ", which needs " + q.need.to_string();
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (!chosen[i]) continue;
    auto& w = *candidates[i].second;
    room.add(w.held);
    room_devices.give_back(w.gpus);
    start_preemption(candidates[i].first, w, why);
  }
  return true;
}

void node_agent::start_preemption(const worker_id& id, worker_slot& w, const std::string& why) {
  w.preempt_deadline = cfg_.now() + w.grace;
  w.kill_reason = why + " (priority " + std::to_string(w.priority) + ")";
  CELER_LOG(info, "node", "actor " + w.actor.short_hex() + " (" + w.function + ") " + w.kill_reason +
                            "; it has " + std::to_string(w.grace.count()) + " ms to checkpoint");
  protocol::preempt_actor notice{w.actor, w.grace.count(), w.kill_reason};
  pool_.tell_preempted(id, w, std::move(notice));
}

void node_agent::stop_preempted(const worker_id& id, worker_slot& w) {
  if (w.preempt_stopped) return;
  w.preempt_stopped = true;
  // The head hears why now: the worker's own exit would only say it was stopped.
  auto f = protocol::failure_info::make(detail::failure_kind::actor_preempted,
                                        error_code::unavailable,
                                        "actor " + w.actor.hex() + " " + w.kill_reason, w.function,
                                        cfg_.id.short_hex(), id.short_hex());
  (void)net_.send(cfg_.head, protocol::actor_failed{w.actor, std::move(f)});
  pool_.terminate(id, w);
}

void node_agent::on(protocol::preempt_ready& m) {
  auto* w = pool_.of_sender(m.worker, m.sender_job, "preempt_ready");
  if (w == nullptr || w->actor != m.actor || !w->preempt_deadline) return;
  stop_preempted(m.worker, *w);
}

} // namespace celer
