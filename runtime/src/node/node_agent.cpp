// A node agent: registering with its head (and again when the head restarts), the queues
// of lease requests and actor starts and their dispatch by shape and priority, leases
// withdrawn, its tick (the heartbeat, with GPU samples and the oldest waiting requests;
// workers that never came up) and its end. Workers are the pool's (worker_pool.cpp);
// placement group bundles and preemption are in node_agent_room.cpp.
#include "node/node_agent.hpp"

#include "log.hpp"
#include "scheduler/cluster_view.hpp"

#include <celer/version.hpp>

#include <algorithm>
#include <unordered_set>

namespace celer {

namespace {

/// The config with a device for every GPU the node offers, known or not.
node_agent::config with_every_gpu(node_agent::config c) {
  c.gpus = scheduling::with_count(std::move(c.gpus), static_cast<std::size_t>(std::max(0.0, c.total.get(protocol::gpu))));
  return c;
}

} // namespace

node_agent::node_agent(transport& net, worker_launcher& launcher, config cfg)
  : net_(net),
    launcher_(launcher),
    cfg_(with_every_gpu(std::move(cfg))),
    room_(cfg_.total, cfg_.gpus),
    gpu_monitor_(cfg_.gpus),
    packages_(net_, cfg_.head, cfg_.id, cfg_.packages_dir),
    pool_(net_, launcher_, room_, packages_, guard_,
          {cfg_.id, cfg_.self, cfg_.head, cfg_.max_idle_workers, cfg_.spill_to_head,
           cfg_.worker_start_timeout, cfg_.now}) {
  pool_.when_room_frees([this] { dispatch(); });
  if (cfg_.store_capacity > 0) {
    node_store::config sc{cfg_.id, cfg_.self, cfg_.head, cfg_.store_capacity, cfg_.store_dir,
                          cfg_.store_spill};
    sc.clock = cfg_.now;  // pulls expire by the node's clock (a made-up one in tests)
    sc.lane = cfg_.lane;
    store_ = std::make_unique<node_store>(net_, std::move(sc));
  }
}

template <class M>
  requires requires(node_store& s, M& m) { s.on(m); }
void node_agent::on(M& m) {
  if (store_) {
    store_->on(m);
    return;
  }
  if constexpr (std::is_same_v<M, protocol::store_stats_query>) {
    (void)net_.send(m.reply_to, protocol::store_stats_reply{m.request_id, {}});
  } else if constexpr (requires { m.reply_to; m.request_id; }) {
    protocol::store_reply r;
    r.request_id = m.request_id;
    r.fail = protocol::failure_info::make(detail::failure_kind::object_lost,
                                          error_code::failed_precondition,
                                          "node " + cfg_.id.hex() + " has no object store");
    (void)net_.send(m.reply_to, std::move(r));
  }
}

void node_agent::refuse(const protocol::task_spec& spec, const std::string& why, error_code code) {
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

void node_agent::on(protocol::node_died& m) {
  if (m.node == cfg_.id) {
    // The head declared this node dead (it was silent too long: a partition, a stall): its
    // work has failed over, and its owners were told. It must not go on as if alive: it
    // stops its workers and leaves, like a node whose head is gone (restarted, it joins
    // as a new node and finds its durable objects again).
    if (declared_dead_) return;
    declared_dead_ = true;
    const std::string why = m.reason.empty() ? "the head declared this node dead" : m.reason;
    CELER_LOG(error, "node", why + "; stopping its " + std::to_string(pool_.size()) +
                               " worker(s) and exiting (restart it to rejoin as a new node)");
    protocol::shutdown_component bye{why};
    on(bye);
    if (cfg_.head_lost) cfg_.head_lost(why);
    return;
  }
  if (store_) store_->node_died(m.node);
}

void node_agent::register_with_head() {
  protocol::register_node r;
  r.protocol_version = protocol_version;
  r.node = cfg_.id;
  r.node_address = cfg_.self;
  r.total = cfg_.total;
  r.labels = cfg_.labels;
  r.gpus = cfg_.gpus;
  r.isolation = cfg_.isolation;
  if (!net_.send(cfg_.head, std::move(r))) {
    CELER_LOG(error, "node", "cannot reach the head to register");
  }
}

void node_agent::on(protocol::head_restarted& m) {
  if (stopping_ || declared_dead_) return;
  CELER_LOG(warn, "node", "the head says it restarted (" + m.reason + "); registering again and "
                            "resending " + std::to_string(spilled_.size()) +
                            " lease request(s) spilled to it");
  register_with_head();
  if (store_) store_->announce_durable();
  spilled_.resend(cfg_.now(), [&](const protocol::request_lease& r) { (void)net_.send(cfg_.head, r); });
}

void node_agent::spill(protocol::request_lease m) {
  if (cfg_.spill_to_head) spilled_.remember(m, cfg_.now());
  (void)net_.send(cfg_.head, std::move(m));
}

bool node_agent::holds_request(const task_id& request) const {
  if (queues_.find_if([&](const protocol::task_spec& s) { return s.id == request; }) != nullptr) return true;
  return pool_.any_of([&](const worker_id&, const worker_slot& w) {
    if (w.actor_worker || !w.busy) return false;
    return w.pending ? w.pending->id == request : w.lease_request == request;
  });
}

bool node_agent::holds_actor(const actor_id& actor, std::uint32_t restarts) const {
  const auto* queued = queues_.find_if([&](const protocol::task_spec& s) {
    return s.kind == protocol::task_kind::actor_creation && s.actor == actor && s.restarts >= restarts;
  });
  if (queued != nullptr) return true;
  return pool_.any_of([&](const worker_id&, const worker_slot& w) {
    return w.actor_worker && w.actor == actor && w.restarts >= restarts;
  });
}

void node_agent::start() {
  register_with_head();
  if (store_) store_->announce_durable();
  if (cfg_.head_missing_after.count() > 0 || cfg_.head_timeout.count() > 0) {
    head_watch::config hw;
    hw.head = cfg_.head.endpoint;
    hw.missing_after = cfg_.head_missing_after;
    hw.give_up_after = cfg_.head_timeout;
    hw.give_up_knob = "node_head_timeout_ms";
    head_watch_.emplace(hw, cfg_.now());
  }
}

void node_agent::on(protocol::lookup_actor_reply& m) {
  if (head_watch_ && m.request_id == head_watch::probe_request) head_watch_->heard(cfg_.now());
}

bool node_agent::watch_head() {
  if (!head_watch_) return true;
  auto s = head_watch_->tick(cfg_.now());
  if (s.probe) (void)net_.send(cfg_.head, head_watch::probe(cfg_.self));
  if (!s.say.empty()) CELER_LOG(warn, "node", s.say);
  if (!s.give_up) return true;
  CELER_LOG(error, "node", s.why + "; stopping its " + std::to_string(pool_.size()) +
                             " worker(s) and exiting");
  protocol::shutdown_component bye{s.why};
  on(bye);
  if (cfg_.head_lost) cfg_.head_lost(s.why);
  return false;
}

void node_agent::handle(protocol::message& m) {
  std::visit(
    [&](auto& msg) {
      if constexpr (requires { on(msg); }) {
        on(msg);
      } else if constexpr (requires { pool_.on(msg); }) {
        pool_.on(msg);
      } else {
        CELER_LOG(warn, "node", std::string("ignored unexpected message ") + protocol::name_of(m));
      }
    },
    m);
}

std::string node_agent::never_here(const protocol::task_spec& spec) const {
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

bool node_agent::head_should_place(const protocol::request_lease& m) const {
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

bool node_agent::admissible(const protocol::task_spec& spec) {
  if (auto ok = protocol::validate_amounts(spec.resources, spec.function); !ok) {
    guard_.refused("invalid_argument: " + spec.function + " of job " + spec.job.short_hex() + ": " +
                   ok.error().message() + "; refused");
    refuse(spec, ok.error().message(), error_code::invalid_argument);
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

void node_agent::on(protocol::request_lease& m) {
  if (stopping_) return;
  if (!admissible(m.spec)) return;
  if (m.from_head) {
    spilled_.placed(m.spec.id);  // back here: the head placed it
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

void node_agent::on(protocol::start_actor& m) {
  if (stopping_) return;
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

void node_agent::enqueue(protocol::task_spec spec) {
  queues_.push(std::move(spec), cfg_.now());
}

void node_agent::dispatch() {
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

void node_agent::on(protocol::tick&) {
  if (stopping_ || !watch_head()) return;
  // Store messages expire stuck pulls as they come; a quiet node's expire here.
  if (store_) store_->expire_pulls();
  spilled_.expire(cfg_.now());
  const auto now = cfg_.now();
  pool_.for_each([&](const worker_id& id, worker_slot& w) {
    if (w.preempt_deadline && *w.preempt_deadline <= now) stop_preempted(id, w);
  });
  pool_.kill_slow_starts(now);
  if (log_enabled(log_level::debug)) {
    CELER_LOG(debug, "node", "available " + room_.available().to_string() + ", queued " +
                               std::to_string(queues_.size()) + pool_.describe());
  }
  protocol::heartbeat h;
  h.node = cfg_.id;
  h.available = room_.available();
  h.queued = static_cast<std::uint32_t>(queues_.size());
  pool_.report(h);
  if (store_) h.store = store_->stats();
  h.gpu_free = room_.gpus().free();
  h.gpu_samples = gpu_monitor_.samples();
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
  (void)net_.send(cfg_.head, std::move(h));
}

void node_agent::on(protocol::job_finished& m) {
  pool_.job_finished(m.job);  // first: its workers taken back below retire
  net_.job_ended(m.job);
  // What the job still leases or asks for comes back (its driver is gone or has shut down);
  // its workers retire.
  withdraw_leases(
    [&](const address&, const task_id&, const job_id& job) { return job == m.job; });
  pool_.retire_idle(m.job);
  if (store_) store_->job_finished(m.job);
  packages_.job_finished(m.job);
  launcher_.job_finished(m.job);
}

void node_agent::on(protocol::resource_query& m) {
  protocol::resource_reply r;
  r.request_id = m.request_id;
  r.total = cfg_.total;
  r.available = room_.available();
  (void)net_.send(m.reply_to, std::move(r));
}

void node_agent::on(protocol::shutdown_component& m) {
  stopping_ = true;
  queues_.clear();
  pool_.stop_all(m);
}

void node_agent::on(protocol::gpu_usage& m) {
  if (!m.sender_job.nil()) {
    // It names no worker: a job reports only devices that one of its workers here sees.
    for (auto index : m.devices) {
      if (!pool_.sees(m.sender_job, index)) {
        guard_.refused("permission_denied: job " + m.sender_job.short_hex() +
                       " reported the usage of GPU " + std::to_string(index) +
                       ", which none of its workers here sees; refused");
        return;
      }
    }
  }
  gpu_monitor_.reported(m);
}

std::size_t node_agent::withdraw_leases(const worker_pool::lease_match& match) {
  // Requests spilled to the head are not here: forgotten, but not counted as found.
  spilled_.forget_if(match);
  std::size_t found = queues_.erase_if([&](const protocol::task_spec& s) {
    return s.kind == protocol::task_kind::normal && match(s.owner, s.id, s.job);
  });
  return found + pool_.take_back_if(match);
}

void node_agent::on(protocol::unsubscribe_cluster& m) {
  // A worker process went away (killed, or retired): it owned tasks as well as ran them.
  withdraw_leases([&](const address& owner, const task_id&, const job_id&) {
    return owner.endpoint == m.endpoint;
  });
  if (store_) store_->process_gone(m.endpoint);
}

void node_agent::on(protocol::cancel_lease_requests& m) {
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

void node_agent::on(protocol::kill_actor& m) {
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

} // namespace celer
