// A node's worker pool: starting workers and handing them their first work, lending them to
// task owners and taking them back, blocking in get, and what becomes of them when they
// exit, die or are killed. (Which work starts, and preemption: local_scheduler.cpp.)
#include "node/worker_pool.hpp"

#include "log.hpp"

#include <algorithm>

namespace celer {

worker_pool::worker_pool(transport& net, worker_launcher& launcher, node_room& room,
                         package_fetcher& packages, node_guard& guard, config cfg)
  : net_(net), launcher_(launcher), room_(room), packages_(packages), guard_(guard), cfg_(std::move(cfg)) {}

worker_id worker_pool::lend(protocol::task_spec spec, std::vector<protocol::gpu_share> gpus,
                            const protocol::placement& in_bundle, std::chrono::milliseconds grace) {
  std::vector<int> visible;
  for (const auto& s : gpus) visible.push_back(s.index);
  const worker_id id = take_worker(spec, visible);
  auto& w = workers_.at(id);
  w.gpus = std::move(gpus);
  w.busy = true;
  w.actor = spec.actor;
  w.restarts = spec.restarts;
  w.owner = spec.owner;
  w.function = spec.function;
  w.held = spec.resources;
  w.granted = spec.resources;
  w.in_bundle = in_bundle;
  w.priority = spec.priority;
  w.preemptible = spec.kind == protocol::task_kind::actor_creation && spec.preemptible;
  w.grace = grace;
  w.preempt_deadline.reset();
  w.preempt_stopped = false;
  w.report_on_exit.reset();
  w.lent_at = cfg_.now();
  w.retriable = spec.kind == protocol::task_kind::actor_creation
                  ? spec.max_restarts != 0
                  : spec.max_retries < 0 || spec.attempt <= spec.max_retries;
  send_work(id, w, std::move(spec));
  return id;
}

worker_id worker_pool::take_worker(const protocol::task_spec& spec, const std::vector<int>& gpus) {
  const bool for_actor = spec.kind == protocol::task_kind::actor_creation;
  if (!for_actor) {
    // The most recently idle worker of the same job that sees the same GPUs and was
    // started with the same environment variables (its cache is warmest).
    for (auto it = idle_.rbegin(); it != idle_.rend(); ++it) {
      const auto& w = workers_.at(*it);
      if (w.job == spec.job && w.visible == gpus && w.env_vars == spec.env_vars) {
        const worker_id id = *it;
        idle_.erase(std::next(it).base());
        return id;
      }
    }
  }
  worker_id id = worker_id::random();
  worker_slot slot;
  if (packages_.must_wait(spec.job, spec.package)) {
    // It starts once the job's working directory is here (on(package_data)), and the head
    // said that this job was submitted with it. The work waits in `pending` as it would
    // for a process still starting.
    packages_.wait(spec.job, spec.package, id);
    slot.addr = address{id, {}};
    slot.ready = false;
    slot.awaits_package = spec.package;
  } else {
    auto started = launcher_.launch(id, spec, gpus);
    slot.addr = std::move(started.addr);
    slot.ready = started.ready;
  }
  slot.visible = gpus;
  slot.env_vars = spec.env_vars;
  slot.started = cfg_.now();
  slot.job = spec.job;
  slot.actor_worker = for_actor;
  workers_.emplace(id, std::move(slot));
  return id;
}

void worker_pool::send_work(const worker_id& id, worker_slot& w, protocol::task_spec spec) {
  if (!w.ready) {
    w.pending = std::move(spec);
    return;
  }
  if (spec.kind == protocol::task_kind::normal) {
    // A lease: the owner pushes its tasks to the worker until it returns the lease.
    w.lease_request = spec.id;
    protocol::lease_reply r;
    r.request = spec.id;
    r.ok = true;
    r.worker = id;
    r.worker_addr = w.addr;
    r.node = cfg_.node;
    r.node_addr = cfg_.self;
    CELER_LOG(debug, "node", "lends worker " + id.short_hex() + " to " + spec.owner.id.short_hex() +
                               " (" + room_.available().to_string() + " left)");
    if (!net_.send(spec.owner, std::move(r))) {
      CELER_LOG(info, "node", "the owner of a lease request is gone; worker " + id.short_hex() +
                                " goes back to the pool");
      release(w);
      idle_.push_back(id);
    }
    return;
  }
  CELER_LOG(debug, "node", "worker " + id.short_hex() + " starts " + spec.function);
  if (!net_.send(w.addr, protocol::execute_task{std::move(spec)})) {
    CELER_LOG(error, "node", "worker " + id.short_hex() + " is unreachable");
  }
}

void worker_pool::release(worker_slot& w) {
  if (w.in_bundle.group.nil()) {
    room_.available().add(w.held);
    room_.gpus().give_back(w.gpus);
  } else if (auto* b = room_.bundle_of(w.in_bundle)) {
    b->available.add(w.held);
    b->gpus.give_back(w.gpus);
  }  // else its bundle went back whole
  w.in_bundle = {};
  w.gpus.clear();
  w.held = {};
  w.granted = {};
  w.busy = false;
  w.blocked = false;
}

void worker_pool::forget_endpoint(const worker_id& id, const address& worker, bool exited) {
  if (!cfg_.spill_to_head || worker.endpoint.empty()) return;
  (void)net_.send(cfg_.head, protocol::unsubscribe_cluster{worker.endpoint});
  if (exited) {
    net_.forget(worker.endpoint);
  } else {
    exiting_[id] = worker.endpoint;  // forgotten once the process is gone (worker_died)
  }
}

void worker_pool::retire(const worker_id& id, const std::string& why) {
  auto it = workers_.find(id);
  if (it == workers_.end()) return;
  if (it->second.awaits_package.empty()) {
    (void)net_.send(it->second.addr, protocol::shutdown_component{why});
    forget_endpoint(id, it->second.addr, false);
    if (!it->second.ready) starting_forgotten_[id] = it->second.job;
  }  // else no process was started: on(package_data) finds it gone
  workers_.erase(it);
  std::erase(idle_, id);
}

worker_slot* worker_pool::find(const worker_id& id) {
  auto it = workers_.find(id);
  return it == workers_.end() ? nullptr : &it->second;
}

worker_slot* worker_pool::of_sender(const worker_id& id, const job_id& sender, const char* what) {
  auto it = workers_.find(id);
  if (it == workers_.end()) return nullptr;
  // Every worker has a job from the start: take_worker records the job of the work it is
  // started for, lends it again only to that job (an idle one in the pool included), and
  // process_launcher gives its process that job's credential alone. So only that job (or
  // the cluster) speaks for it.
  if (!guard_.owned_by_sender(sender, it->second.job, std::string(what) + " of worker " + id.short_hex())) {
    return nullptr;
  }
  return &it->second;
}

std::pair<const worker_id, worker_slot>* worker_pool::host_of(const actor_id& actor) {
  for (auto& entry : workers_) {
    if (entry.second.actor_worker && entry.second.actor == actor) return &entry;
  }
  return nullptr;
}

void worker_pool::terminate(const worker_id& id, const worker_slot& w) {
  launcher_.terminate(id, w.addr, w.actor);
}

void worker_pool::tell_preempted(const worker_id& id, const worker_slot& w, protocol::preempt_actor notice) {
  if (!launcher_.preempt(id, notice)) (void)net_.send(w.addr, std::move(notice));
}

void worker_pool::stop_in_bundle(const node_room::bundle_key& key, const std::string& why) {
  for (auto& [id, w] : workers_) {
    if (w.in_bundle.group != key.first || w.in_bundle.bundle != key.second || !w.busy) continue;
    w.kill_reason = "was stopped: " + why;
    w.in_bundle = {};  // its resources go back with the bundle
    w.held = {};
    w.gpus.clear();
    launcher_.terminate(id, w.addr, w.actor);
  }
}

void worker_pool::on(protocol::return_lease& m) {
  CELER_LOG(debug, "node", "worker " + m.worker.short_hex() + " returned");
  auto it = workers_.find(m.worker);
  if (it == workers_.end() || it->second.actor_worker || !it->second.busy ||
      it->second.lease_request != m.request) {
    return;  // taken back already (the request was cancelled), maybe lent again since
  }
  if (!guard_.owned_by_sender(m.sender_job, it->second.job, "the lease of worker " + m.worker.short_hex())) {
    return;
  }
  if (m.kill) {
    // celer::cancel with force: the process is killed; its death frees the lease (its
    // owner dropped it already and ignores the worker_died).
    CELER_LOG(info, "node", "kills worker " + m.worker.short_hex() +
                              ": its owner cancelled the task it runs, with force");
    it->second.kill_reason = "was killed: its owner cancelled the task it ran, with force";
    terminate(m.worker, it->second);
    return;
  }
  reclaim(m.worker, it->second);
}

void worker_pool::reclaim(const worker_id& id, worker_slot& w) {
  release(w);
  w.lease_request = {};
  if (finished_jobs_.contains(w.job)) {
    retire(id, "its job finished");
  } else if (static_cast<int>(idle_.size()) < cfg_.max_idle_workers) {
    idle_.push_back(id);
  } else {
    retire(id, "too many idle workers");
  }
  room_freed();
}

std::size_t worker_pool::take_back_if(const lease_match& match) {
  std::vector<worker_id> back;
  for (auto& [id, w] : workers_) {
    if (w.actor_worker || !w.busy) continue;
    // Still starting for the request (it joins the pool once ready), or lent already (a
    // grant the owner may still return unused is ignored then).
    const bool matched = w.pending ? match(w.pending->owner, w.pending->id, w.job)
                                   : match(w.owner, w.lease_request, w.job);
    if (matched) back.push_back(id);
  }
  for (const auto& id : back) {
    auto& w = workers_.at(id);
    w.pending.reset();
    reclaim(id, w);
  }
  return back.size();
}

void worker_pool::on(protocol::worker_blocked& m) {
  CELER_LOG(debug, "node", "worker " + m.worker.short_hex() + " blocked");
  auto* found = of_sender(m.worker, m.sender_job, "worker_blocked");
  if (found == nullptr || !found->busy || found->blocked) return;
  auto& w = *found;
  w.blocked = true;
  protocol::resource_set lent;
  lent.set(protocol::cpu, w.granted.get(protocol::cpu));
  w.held.subtract(lent);
  room_.account_of(w.in_bundle).add(lent);
  room_freed();
}

void worker_pool::on(protocol::worker_unblocked& m) {
  auto* found = of_sender(m.worker, m.sender_job, "worker_unblocked");
  if (found == nullptr || !found->blocked) return;
  auto& w = *found;
  w.blocked = false;
  protocol::resource_set lent;
  lent.set(protocol::cpu, w.granted.get(protocol::cpu));
  // Taken back even if that oversubscribes the node for a while: the worker is running
  // again, and stopping it is worse. Later dispatches wait until usage falls.
  w.held.add(lent);
  room_.account_of(w.in_bundle).subtract(lent);
}

void worker_pool::on(protocol::actor_exited& m) {
  auto* w = of_sender(m.worker, m.sender_job, "actor_exited");
  if (w == nullptr) return;
  if (w->actor_worker && !m.why.empty() && !w->report_on_exit) {
    // The actor ended itself: dead for good (failed_precondition never restarts it). The
    // worker's words are capped; the actor is the slot's, never the message's.
    constexpr std::size_t max_why = 512;
    w->report_on_exit = protocol::failure_info::make(
      detail::failure_kind::actor_died, error_code::failed_precondition,
      "actor " + w->actor.hex() + " exited: " + m.why.substr(0, max_why), w->function,
      cfg_.node.short_hex(), m.worker.short_hex());
  }
  if (w->actor_worker && w->report_on_exit) {
    if (cfg_.spill_to_head && !w->addr.endpoint.empty()) {
      exit_reports_[m.worker] = {w->actor, std::move(*w->report_on_exit)};  // once its process is gone
    } else {
      // A thread of this process: what it sent before is ahead of this in every queue.
      (void)net_.send(cfg_.head, protocol::actor_failed{w->actor, std::move(*w->report_on_exit)});
    }
  }
  release(*w);
  forget_endpoint(m.worker, w->addr, false);
  workers_.erase(m.worker);
  room_freed();
}

void worker_pool::on(protocol::worker_ready& m) {
  // The node sends work, and later shutdown_component, to the address given here: from a
  // job, it must be the worker's own (a worker's address is its id), for a worker of that
  // job, or the job could have another job's worker stopped or handed work.
  if (!m.sender_job.nil() && m.addr.id != m.worker) {
    guard_.refused("permission_denied: job " + m.sender_job.short_hex() + " said worker " +
                   m.worker.short_hex() + " is ready at the address of " + m.addr.id.short_hex() +
                   "; refused");
    return;
  }
  auto it = workers_.find(m.worker);
  if (it == workers_.end()) {
    // Forgotten while it started (its job ended, or the node is stopping): it is told to
    // stop, on the word of its own job. A worker never started here has no job: only the
    // cluster's word counts for it.
    auto gone = starting_forgotten_.find(m.worker);
    const job_id job = gone != starting_forgotten_.end() ? gone->second : job_id{};
    if (!guard_.owned_by_sender(m.sender_job, job, "worker_ready of worker " + m.worker.short_hex())) {
      return;
    }
    if (gone != starting_forgotten_.end()) starting_forgotten_.erase(gone);
    (void)net_.send(m.addr, protocol::shutdown_component{"not needed any more"});
    return;
  }
  if (!guard_.owned_by_sender(m.sender_job, it->second.job, "worker_ready of worker " + m.worker.short_hex())) {
    return;
  }
  auto& w = it->second;
  w.addr = m.addr;
  w.ready = true;
  if (w.pending) {
    auto spec = std::move(*w.pending);
    w.pending.reset();
    send_work(m.worker, w, std::move(spec));
  }
}

void worker_pool::on(protocol::package_data& m) {
  auto answer = packages_.on(m);
  for (const auto& id : answer.workers) {
    auto it = workers_.find(id);
    if (it == workers_.end() || it->second.awaits_package != m.digest) continue;  // gone meanwhile
    auto& w = it->second;
    if (!answer.why.empty() || !w.pending) {
      fail_package_wait(id, answer.why.empty() ? "has no work to start with" : answer.why);
      continue;
    }
    w.awaits_package.clear();
    auto started = launcher_.launch(id, *w.pending, w.visible);
    w.addr = std::move(started.addr);
    w.ready = started.ready;
    w.started = cfg_.now();
    if (w.ready) {
      auto spec = std::move(*w.pending);
      w.pending.reset();
      send_work(id, w, std::move(spec));
    }
  }
}

void worker_pool::fail_package_wait(const worker_id& id, const std::string& why) {
  auto it = workers_.find(id);
  if (it == workers_.end()) return;
  const std::string digest = std::move(it->second.awaits_package);
  it->second.awaits_package.clear();
  packages_.gave_up(it->second.job, digest, id);
  protocol::worker_died died{id, "could not be started: its job's working directory " + digest + " did not arrive (" + why + ")"};
  on(died);
}

void worker_pool::on(protocol::worker_died& m) {
  starting_forgotten_.erase(m.worker);
  if (auto report = exit_reports_.find(m.worker); report != exit_reports_.end()) {
    (void)net_.send(cfg_.head, protocol::actor_failed{report->second.first, std::move(report->second.second)});
    exit_reports_.erase(report);
  }
  if (auto gone = exiting_.find(m.worker); gone != exiting_.end()) {
    net_.forget(gone->second);
    exiting_.erase(gone);
  }
  auto it = workers_.find(m.worker);
  if (it == workers_.end()) return;
  auto& w = it->second;
  if (!w.kill_reason.empty()) m.reason = w.kill_reason;
  if (w.actor_worker && w.report_on_exit) {
    (void)net_.send(cfg_.head, protocol::actor_failed{w.actor, std::move(*w.report_on_exit)});
  } else if (w.actor_worker) {
    auto f = protocol::failure_info::make(
      detail::failure_kind::actor_died, error_code::unavailable,
      "actor " + w.actor.hex() + " died: its worker process " + m.reason, w.function,
      cfg_.node.short_hex(), m.worker.short_hex());
    (void)net_.send(cfg_.head, protocol::actor_failed{w.actor, std::move(f)});
  } else if (w.pending) {
    // Started for a lease it never got to grant: the owner's waiting tasks fail with why.
    protocol::lease_reply r;
    r.request = w.pending->id;
    r.fail = protocol::failure_info::make(detail::failure_kind::worker_died,
                                          error_code::unavailable, "its worker process " + m.reason,
                                          {}, cfg_.node.short_hex(), m.worker.short_hex());
    (void)net_.send(w.owner, std::move(r));
  } else if (w.busy) {
    // Leased: its owner fails the tasks it pushed there.
    (void)net_.send(w.owner, protocol::worker_died{m.worker, m.reason});
  }
  CELER_LOG(info, "node", "worker " + m.worker.short_hex() + " exited: " + m.reason);
  release(w);
  forget_endpoint(m.worker, w.addr, true);
  workers_.erase(it);
  std::erase(idle_, m.worker);
  room_freed();
}

void worker_pool::retire_idle(const job_id& job) {
  std::vector<worker_id> idle_of_job;
  for (const auto& id : idle_) {
    if (workers_.at(id).job == job) idle_of_job.push_back(id);
  }
  for (const auto& id : idle_of_job) retire(id, "its job finished");
}

void worker_pool::kill_slow_starts(time_point now) {
  if (cfg_.start_timeout.count() <= 0) return;
  std::vector<worker_id> unfetched;
  for (auto& [id, w] : workers_) {
    if (w.ready || !w.kill_reason.empty() || now - w.started < cfg_.start_timeout) continue;
    if (!w.awaits_package.empty()) {  // no process yet: nothing to kill
      unfetched.push_back(id);
      continue;
    }
    w.kill_reason = "did not start within " + std::to_string(cfg_.start_timeout.count()) +
                    " ms (does its main call celer::init first?)";
    CELER_LOG(warn, "node", "worker " + id.short_hex() + " " + w.kill_reason + "; killing it");
    launcher_.terminate(id, w.addr, w.actor);
  }
  for (const auto& id : unfetched) {
    fail_package_wait(id, "the head did not send it within " + std::to_string(cfg_.start_timeout.count()) + " ms");
  }
}

void worker_pool::stop_all(const protocol::shutdown_component& m) {
  for (auto& [id, w] : workers_) {
    (void)net_.send(w.addr, m);
    if (!w.ready) starting_forgotten_[id] = w.job;  // told when it says worker_ready
  }
  workers_.clear();
  idle_.clear();
}

bool worker_pool::sees(const job_id& job, int index) const {
  return std::any_of(workers_.begin(), workers_.end(), [&](const auto& e) {
    const auto& v = e.second.visible;
    return e.second.job == job && std::find(v.begin(), v.end(), index) != v.end();
  });
}

void worker_pool::report(protocol::heartbeat& h) const {
  h.workers = static_cast<std::uint32_t>(workers_.size());
  for (const auto& [id, w] : workers_) {
    if (!w.addr.endpoint.empty()) h.worker_endpoints.push_back(w.addr.endpoint);
  }
}

std::string worker_pool::describe() const {
  std::string dump;
  for (const auto& [id, w] : workers_) {
    dump += "\n  " + id.short_hex() + (w.busy ? " busy" : " idle") + (w.blocked ? " blocked" : "") +
            (w.ready ? "" : " starting") + (w.actor_worker ? " actor" : "") + " held " +
            w.held.to_string() + " owner " + w.owner.id.short_hex();
  }
  return dump;
}

} // namespace celer
