// A node agent's room held apart: the placement group bundles reserved here, and the
// preemption of actors that opted in when higher-priority work needs their room.
// (node_agent.cpp: the head, the queues and dispatch; node_agent_workers.cpp: workers.)
#include "node/node_agent.hpp"

#include "log.hpp"
#include "scheduler/cluster_view.hpp"

#include <algorithm>

namespace celer {

node_agent::bundle_account* node_agent::bundle_of(const protocol::placement& where) {
  auto it = bundles_.find({where.group, where.bundle});
  return it == bundles_.end() ? nullptr : &it->second;
}

protocol::resource_set& node_agent::account_of(const worker_slot& w) {
  if (!w.in_bundle.group.nil()) {
    if (auto* b = bundle_of(w.in_bundle)) return b->available;
  }
  return available_;
}

void node_agent::on(protocol::reserve_bundle& m) {
  protocol::bundle_reserved r{m.group, m.index, cfg_.id, false, {}};
  const auto& need = m.bundle.need;
  const std::int64_t gpu_units = need.units(protocol::gpu);
  if (stopping_) {
    r.why = "the node is stopping";
  } else if (bundles_.contains({m.group, m.index})) {
    r.ok = true;  // a repeated request
  } else if (auto valid = protocol::validate_amounts(need, "bundle " + std::to_string(m.index)); !valid) {
    r.why = "invalid_argument: " + valid.error().message();
  } else if (!available_.covers(need) || !gpus_.fits(gpu_units, m.bundle.where)) {
    r.why = "it needs " + need.to_string() + ", and " + available_.to_string() + " is free";
  } else {
    bundle_account b;
    b.job = m.job;
    b.reserved = need;
    b.available = need;
    b.shares = *gpus_.take(gpu_units, m.bundle.where);
    std::vector<gpu::device> devices;
    std::vector<std::int64_t> free;
    for (const auto& s : b.shares) {
      for (const auto& d : cfg_.gpus) {
        if (d.index == s.index) devices.push_back(d);
      }
      free.push_back(s.amount);
    }
    b.gpus = scheduling::device_pool(std::move(devices), std::move(free));
    available_.subtract(need);
    bundles_.emplace(bundle_key{m.group, m.index}, std::move(b));
    r.ok = true;
  }
  (void)net_.send(cfg_.head, std::move(r));
}

void node_agent::on(protocol::return_bundles& m) {
  std::vector<bundle_key> gone;
  for (const auto& [key, b] : bundles_) {
    if (key.first != m.group) continue;
    if (m.indices.empty() ||
        std::find(m.indices.begin(), m.indices.end(), key.second) != m.indices.end()) {
      gone.push_back(key);
    }
  }
  const std::string why = "its placement group bundle was given back (" + m.why + ")";
  for (const auto& key : gone) {
    // Waiting work fails; running work is stopped (processes are killed).
    for (auto& q : queues_) {
      if (q.where.group != key.first || q.where.bundle != key.second) continue;
      for (auto& w : q.tasks) refuse(w.spec, why);
      queued_ -= q.tasks.size();
      q.tasks.clear();
    }
    for (auto& [id, w] : workers_) {
      if (w.in_bundle.group != key.first || w.in_bundle.bundle != key.second || !w.busy) continue;
      w.kill_reason = "was stopped: " + why;
      w.in_bundle = {};  // its resources go back with the bundle
      w.held = {};
      w.gpus.clear();
      launcher_.terminate(id, w.addr, w.actor);
    }
    auto& b = bundles_.at(key);
    available_.add(b.reserved);
    gpus_.give_back(b.shares);
    bundles_.erase(key);
  }
  std::erase_if(queues_, [](const shape_queue& q) { return q.tasks.empty(); });
  dispatch();
}

bool node_agent::preempt_for(const shape_queue& q, protocol::resource_set& room,
                             scheduling::device_pool& room_devices) {
  const auto& spec = q.tasks.front().spec;
  const std::int64_t units = q.shape.units(protocol::gpu);
  std::vector<std::pair<const worker_id, worker_slot>*> candidates;
  for (auto& entry : workers_) {
    const auto& w = entry.second;
    if (w.actor_worker && w.busy && w.in_bundle.group.nil() && !w.preempt_deadline &&
        w.preemptible && w.ready && !w.pending && w.priority < spec.priority) {
      candidates.push_back(&entry);
    }
  }
  if (room.covers(q.shape) && room_devices.fits(units, q.where)) {
    return true;  // the actors already told make room
  }
  if (candidates.empty()) return false;
  std::sort(candidates.begin(), candidates.end(), [](const auto* a, const auto* b) {
    if (a->second.priority != b->second.priority) return a->second.priority < b->second.priority;
    return a->second.started > b->second.started;  // the newest loses least work
  });
  protocol::resource_set free;
  std::vector<protocol::gpu_share> shares;
  const auto chosen =
    scheduling::pick_victims(candidates.size(), [&](const std::vector<bool>& set) {
      free = room;
      shares.clear();
      for (std::size_t i = 0; i < set.size(); ++i) {
        if (!set[i]) continue;
        free.add(candidates[i]->second.held);
        const auto& g = candidates[i]->second.gpus;
        shares.insert(shares.end(), g.begin(), g.end());
      }
      return free.covers(q.shape) && room_devices.fits_after(units, q.where, shares);
    });
  if (std::none_of(chosen.begin(), chosen.end(), [](bool b) { return b; })) return false;
  const std::string why =
    "was preempted on node " + cfg_.id.short_hex() + " for " +
    (spec.kind == protocol::task_kind::actor_creation ? "actor " : "task ") + spec.function +
    " of priority " + std::to_string(spec.priority) + ", which needs " + q.shape.to_string();
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (!chosen[i]) continue;
    auto& w = candidates[i]->second;
    room.add(w.held);
    room_devices.give_back(w.gpus);
    start_preemption(candidates[i]->first, w, why);
  }
  return true;
}

void node_agent::start_preemption(const worker_id& id, worker_slot& w, const std::string& why) {
  w.preempt_deadline = std::chrono::steady_clock::now() + w.grace;
  w.kill_reason = why + " (priority " + std::to_string(w.priority) + ")";
  CELER_LOG(info, "node", "actor " + w.actor.short_hex() + " (" + w.function + ") " + w.kill_reason +
                            "; it has " + std::to_string(w.grace.count()) + " ms to checkpoint");
  protocol::preempt_actor notice{w.actor, w.grace.count(), w.kill_reason};
  if (!launcher_.preempt(id, notice)) (void)net_.send(w.addr, std::move(notice));
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
  launcher_.terminate(id, w.addr, w.actor);
}

void node_agent::on(protocol::preempt_ready& m) {
  auto* w = worker_of_sender(m.worker, m.sender_job, "preempt_ready");
  if (w == nullptr || w->actor != m.actor || !w->preempt_deadline) return;
  stop_preempted(m.worker, *w);
}

} // namespace celer
