// A node's local scheduler: requests admitted, sent on to the head or queued; dispatch by
// shape and priority onto the pool's workers; leases withdrawn and actors killed before
// they start; placement group bundles given back; the preemption of actors that opted in
// when higher-priority work needs their room; what waits, for the heartbeat.
#include "node/local_scheduler.hpp"

#include "log.hpp"
#include "protocol/env_vars.hpp"
#include "scheduler/cluster_view.hpp"

#include <algorithm>
#include <unordered_set>

namespace celer {

local_scheduler::local_scheduler(transport& net, worker_pool& pool, node_room& room, node_guard& guard,
                                 config cfg)
  : net_(net), pool_(pool), room_(room), guard_(guard), cfg_(std::move(cfg)) {
  pool_.when_room_frees([this] { dispatch(); });
}

bool local_scheduler::admissible(const protocol::task_spec& spec) {
  if (auto ok = protocol::validate_amounts(spec.resources, spec.function); !ok) {
    guard_.refused("invalid_argument: " + spec.function + " of job " + spec.job.short_hex() + ": " +
                   ok.error().message() + "; refused");
    refuse(spec, ok.error().message(), error_code::invalid_argument);
    return false;
  }
  if (auto why = protocol::env_vars_problem(spec.env_vars); !why.empty()) {
    // The API refuses these before sending; a worker must never start with the runtime's
    // own variables (its credential, its node) set by the job.
    guard_.refused("invalid_argument: " + spec.function + " of job " + spec.job.short_hex() + ": " + why + "; refused");
    refuse(spec, spec.function + ": " + why, error_code::invalid_argument);
    return false;
  }
  if (spec.where.group.nil() || spec.job.nil()) return true;
  const auto* b = room_.bundle_of(spec.where);
  // Not reserved here (yet): dispatch checks. A bundle of no job is the cluster's own.
  if (b == nullptr || b->job.nil() || b->job == spec.job) return true;
  (void)guard_.owned_by_sender(spec.job, b->job, "running " + spec.function + " in bundle " +
                                                   std::to_string(spec.where.bundle) + " of placement group " +
                                                   spec.where.group.short_hex());
  refuse(spec, "placement group " + spec.where.group.short_hex() + " belongs to another job",
         error_code::permission_denied);
  return false;
}

void local_scheduler::on(protocol::request_lease& m) {
  if (stopped_) return;
  if (!admissible(m.spec)) return;
  if (m.from_head) {
    spilled_.placed(m.spec.id);  // back here: the head placed it (again, if respilled)
    // A request resent after a head restart that this node already holds (queued, or a
    // worker started or lent for it): the copy is dropped, so that it is granted once.
    if (holds_request(m.spec.id)) return;
  }
  if (!m.from_head && !never_here(m.spec).empty()) {
    // This node can never run it; the head knows whether any node can.
    spill(std::move(m));
    return;
  }
  if (head_should_place(m)) {
    spill(std::move(m));
    return;
  }
  enqueue(std::move(m.spec));
  dispatch();
}

void local_scheduler::on(protocol::start_actor& m) {
  if (stopped_) return;
  if (!admissible(m.spec)) return;
  if (holds_actor(m.spec.actor, m.spec.restarts)) {
    // A head that restarted asks again. If the actor runs, its worker says so once more
    // (what it said may have been lost with the old head); else it is still queued here.
    pool_.for_each([&](const worker_id&, const worker_slot& w) {
      if (w.actor_worker && w.actor == m.spec.actor && w.ready) {
        (void)net_.send(w.addr, protocol::head_restarted{"the head asked to start it again"});
      }
    });
    return;
  }
  enqueue(std::move(m.spec));
  dispatch();
}

std::string local_scheduler::never_here(const protocol::task_spec& spec) const {
  const auto& p = spec.where;
  if (p.how == scheduling_strategy::kind::placement_group) {
    return "its placement group decides where it runs";
  }
  if (p.how == scheduling_strategy::kind::node_affinity && p.node != cfg_.id) {
    return "it asks for node " + p.node.short_hex();
  }
  scheduling::cluster_view::node self;
  self.id = cfg_.id;
  self.total = cfg_.total;
  self.labels = cfg_.labels;
  self.gpus = room_.gpus();
  return scheduling::cluster_view::never_on(self, spec.resources, p);
}

bool local_scheduler::head_should_place(const protocol::request_lease& m) const {
  if (m.from_head || !cfg_.spill_to_head) return false;
  using kind = scheduling_strategy::kind;
  const auto how = m.spec.where.how;
  // Strategies that weigh the whole cluster are the head's to decide.
  if (how == kind::spread || how == kind::speed_weighted) return true;
  // Hard affinity waits here (never_here() checked the node); soft goes elsewhere if busy.
  if (how == kind::node_affinity && !m.spec.where.soft) return false;
  // The default prefers the node holding most of the arguments.
  for (const auto& l : m.locality) {
    if (l.node != cfg_.id && l.bytes > 0) {
      const bool more_here = std::any_of(m.locality.begin(), m.locality.end(), [&](const auto& o) {
        return o.node == cfg_.id && o.bytes >= l.bytes;
      });
      if (!more_here) return true;
    }
  }
  // Busy here: the head places it where resources are free.
  const std::int64_t gpu_units = m.spec.resources.units(protocol::gpu);
  return !(queues_.size() == 0 && room_.available().covers(m.spec.resources) &&
           room_.gpus().fits(gpu_units, m.spec.where));
}

void local_scheduler::spill(protocol::request_lease m) {
  if (cfg_.spill_to_head) spilled_.remember(m, cfg_.now());
  (void)net_.send(cfg_.head, std::move(m));
}

bool local_scheduler::holds_request(const task_id& request) const {
  if (queues_.find_if([&](const protocol::task_spec& s) { return s.id == request; }) != nullptr) return true;
  return pool_.any_of([&](const worker_id&, const worker_slot& w) {
    if (w.actor_worker || !w.busy) return false;
    return w.pending ? w.pending->id == request : w.lease_request == request;
  });
}

bool local_scheduler::holds_actor(const actor_id& actor, std::uint32_t restarts) const {
  const auto* queued = queues_.find_if([&](const protocol::task_spec& s) {
    return s.kind == protocol::task_kind::actor_creation && s.actor == actor && s.restarts >= restarts;
  });
  if (queued != nullptr) return true;
  return pool_.any_of([&](const worker_id&, const worker_slot& w) {
    return w.actor_worker && w.actor == actor && w.restarts >= restarts;
  });
}

void local_scheduler::enqueue(protocol::task_spec spec) {
  queues_.push(std::move(spec), cfg_.now());
}

void local_scheduler::refuse(const protocol::task_spec& spec, const std::string& why, error_code code) {
  const auto kind = code == error_code::resource_exhausted ? detail::failure_kind::infeasible
                                                           : detail::failure_kind::invalid_call;
  auto fail = protocol::failure_info::make(kind, code, why, spec.function, cfg_.id.short_hex());
  if (spec.kind == protocol::task_kind::actor_creation) {
    (void)net_.send(cfg_.head, protocol::actor_failed{spec.actor, std::move(fail)});
  } else {
    protocol::lease_reply r;
    r.request = spec.id;
    r.fail = std::move(fail);
    (void)net_.send(spec.owner, std::move(r));
  }
}

void local_scheduler::dispatch() {
  // Each shape's tasks start in order while its shape fits: a task waiting for 2 CPUs does
  // not hold back tasks that need 1. Higher priorities come first. While requests wait for
  // actors being preempted, what will be free once those stop is held for them: later
  // work starts only where it leaves them room (`held`: that room, less what they need).
  std::optional<std::pair<protocol::resource_set, scheduling::device_pool>> held;
  // Whether any actor here may be (or is being) preempted: asked once, and only if some
  // request waits.
  std::optional<bool> may_preempt;
  for (auto& q : queues_.shapes()) {
    const std::int64_t gpu_units = q.need.units(protocol::gpu);
    const bool node_work = q.where.group.nil();
    auto leaves_room = [&] {
      return !held || !node_work ||
             (held->first.covers(q.need) && held->second.fits(gpu_units, q.where));
    };
    // Work in a placement group draws on its bundle's reservation, other work on the rest.
    auto* available = &room_.available();
    auto* gpus = &room_.gpus();
    job_id bundle_job;
    if (!q.where.group.nil()) {
      auto* b = room_.bundle_of(q.where);
      if (b == nullptr) {
        for (auto& w : queues_.take_all(q)) refuse(w.spec, "its placement group bundle is not reserved here");
        continue;
      }
      available = &b->available;
      gpus = &b->gpus;
      bundle_job = b->job;
    }
    while (!q.tasks.empty() && available->covers(q.need) && gpus->fits(gpu_units, q.where) &&
           leaves_room()) {
      auto spec = queues_.pop(q);
      if (!bundle_job.nil() && !spec.job.nil() && spec.job != bundle_job) {
        // Another job's work (queued before the bundle was reserved here) never runs in it.
        (void)guard_.owned_by_sender(spec.job, bundle_job, "running " + spec.function +
                                                             " in placement group " + q.where.group.short_hex());
        refuse(spec, "placement group " + q.where.group.short_hex() + " belongs to another job",
               error_code::permission_denied);
        continue;
      }
      auto shares = gpus->take(gpu_units, q.where);
      available->subtract(spec.resources);
      if (held && node_work) {
        held->first.subtract(spec.resources);
        (void)held->second.take(gpu_units, q.where);
      }
      const auto grace = spec.preemption_grace_ms > 0 ? std::chrono::milliseconds(spec.preemption_grace_ms)
                                                      : cfg_.preemption_grace;
      (void)pool_.lend(std::move(spec), shares ? std::move(*shares) : std::vector<protocol::gpu_share>{},
                       q.where.group.nil() ? protocol::placement{} : q.where, grace);
    }
    if (q.tasks.empty() || !node_work) continue;
    if (!may_preempt) {
      may_preempt = pool_.any_of([](const worker_id&, const worker_slot& w) {
        return w.preemptible || w.preempt_deadline.has_value();
      });
    }
    if (!*may_preempt) continue;
    if (!held) {
      held.emplace(room_.available(), room_.gpus());
      pool_.for_each([&](const worker_id&, const worker_slot& w) {
        if (!w.preempt_deadline) return;
        held->first.add(w.held);
        held->second.give_back(w.gpus);
      });
    }
    if (!preempt_for(q, held->first, held->second)) continue;
    held->first.subtract(q.need);
    (void)held->second.take(gpu_units, q.where);
  }
  queues_.prune();
}

std::size_t local_scheduler::withdraw_leases(const worker_pool::lease_match& match) {
  // Requests spilled to the head are not here: forgotten, but not counted as found.
  spilled_.forget_if(match);
  std::size_t found = queues_.erase_if([&](const protocol::task_spec& s) {
    return s.kind == protocol::task_kind::normal && match(s.owner, s.id, s.job);
  });
  return found + pool_.take_back_if(match);
}

void local_scheduler::on(protocol::cancel_lease_requests& m) {
  std::unordered_set<task_id> wanted(m.requests.begin(), m.requests.end());
  const std::size_t found =
    withdraw_leases([&](const address& owner, const task_id& request, const job_id& job) {
      return owner == m.owner && wanted.contains(request) &&
             guard_.owned_by_sender(m.sender_job, job, "lease request " + request.short_hex());
    });
  if (found < wanted.size() && cfg_.spill_to_head && !m.from_head) {
    (void)net_.send(cfg_.head, std::move(m));  // forwarded: the head asks every node
  }
}

void local_scheduler::on(protocol::kill_actor& m) {
  if (!m.no_restart) {
    // Killed so that it restarts (celer::kill with no_restart = false): its running worker
    // is stopped, and the head hears of it as of a death (the actor's restarts decide). One
    // not started yet is left to start.
    auto* host = pool_.host_of(m.actor);
    if (host == nullptr || !guard_.owned_by_sender(m.sender_job, host->second.job, "actor " + m.actor.short_hex())) {
      return;
    }
    auto& w = host->second;
    w.kill_reason = "was killed by celer::kill (no_restart = false)";
    w.report_on_exit = protocol::failure_info::make(
      detail::failure_kind::actor_died, error_code::unavailable,
      "actor " + m.actor.hex() + " died: its worker " + w.kill_reason, w.function, cfg_.id.short_hex(),
      host->first.short_hex());
    pool_.terminate(host->first, w);
    return;
  }
  // Not started yet: drop it from the queue.
  const auto* queued = queues_.find_if([&](const protocol::task_spec& s) {
    return s.kind == protocol::task_kind::actor_creation && s.actor == m.actor;
  });
  if (queued != nullptr) {
    if (!guard_.owned_by_sender(m.sender_job, queued->job, "actor " + m.actor.short_hex())) return;
    const task_id request = queued->id;
    queues_.erase_if([&](const protocol::task_spec& s) { return s.id == request; });
    return;
  }
  if (auto* host = pool_.host_of(m.actor)) {
    if (!guard_.owned_by_sender(m.sender_job, host->second.job, "actor " + m.actor.short_hex())) return;
    pool_.terminate(host->first, host->second);
  }
}

void local_scheduler::on(protocol::return_bundles& m) {
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

bool local_scheduler::preempt_for(const scheduling::shape_queues::shape& q, protocol::resource_set& room,
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

void local_scheduler::start_preemption(const worker_id& id, worker_slot& w, const std::string& why) {
  w.preempt_deadline = cfg_.now() + w.grace;
  w.kill_reason = why + " (priority " + std::to_string(w.priority) + ")";
  CELER_LOG(info, "node", "actor " + w.actor.short_hex() + " (" + w.function + ") " + w.kill_reason +
                            "; it has " + std::to_string(w.grace.count()) + " ms to checkpoint");
  protocol::preempt_actor notice{w.actor, w.grace.count(), w.kill_reason};
  pool_.tell_preempted(id, w, std::move(notice));
}

void local_scheduler::stop_preempted(const worker_id& id, worker_slot& w) {
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

void local_scheduler::on(protocol::preempt_ready& m) {
  auto* w = pool_.of_sender(m.worker, m.sender_job, "preempt_ready");
  if (w == nullptr || w->actor != m.actor || !w->preempt_deadline) return;
  stop_preempted(m.worker, *w);
}

void local_scheduler::tick(time_point now) {
  spilled_.expire(now);
  respill(now);
  pool_.for_each([&](const worker_id& id, worker_slot& w) {
    if (w.preempt_deadline && *w.preempt_deadline <= now) stop_preempted(id, w);
  });
}

void local_scheduler::respill(time_point now) {
  if (!cfg_.spill_to_head || cfg_.respill_after.count() <= 0) return;
  std::erase_if(respilled_, [&](const task_id& id) {
    return !spilled_.holds(id) &&
           queues_.find_if([&](const protocol::task_spec& s) { return s.id == id; }) == nullptr;
  });
  if (queues_.size() == 0) return;
  using kind = scheduling_strategy::kind;
  auto back = queues_.take_if([&](const scheduling::shape_queues::waiting& w) {
    const auto& s = w.spec;
    return s.kind == protocol::task_kind::normal && now - w.since >= cfg_.respill_after &&
           s.where.how != kind::placement_group && s.where.how != kind::node_affinity &&
           !respilled_.contains(s.id) && !room_.available().covers(s.resources);
  });
  for (auto& spec : back) {
    CELER_LOG(debug, "node", "sends a lease request for " + spec.function +
                               " back to the head: no room here since it came");
    respilled_.insert(spec.id);
    spill(protocol::request_lease{std::move(spec), false, {}});
  }
}

void local_scheduler::resend_spilled() {
  spilled_.resend(cfg_.now(), [&](const protocol::request_lease& r) { (void)net_.send(cfg_.head, r); });
}

void local_scheduler::stop() {
  stopped_ = true;
  queues_.clear();
}

void local_scheduler::report(protocol::heartbeat& h, time_point now) const {
  h.queued = static_cast<std::uint32_t>(queues_.size());
  // The oldest waiting requests, so the head can say why they wait.
  h.queued_gpus = queues_.gpu_units();
  constexpr std::size_t reported = 20;
  const auto oldest = queues_.oldest(reported);
  for (auto it = oldest.begin(); it != oldest.end(); ++it) {
    const auto& s = (*it)->spec;
    protocol::waiting_request w;
    w.function = s.function;
    w.kind = s.kind;
    w.job = s.job;
    w.need = s.resources;
    w.where = s.where;
    w.waiting_ms = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now - (*it)->since).count());
    w.priority = s.priority;
    h.waiting.push_back(std::move(w));
  }
  pool_.for_each([&](const worker_id&, const worker_slot& w) {
    if (!w.preempt_deadline) return;
    const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(*w.preempt_deadline - now).count();
    h.preempting.push_back({w.actor, w.function, w.priority,
                            w.preempt_stopped ? 0 : std::max<std::int64_t>(0, left), w.kill_reason});
  });
}

} // namespace celer
