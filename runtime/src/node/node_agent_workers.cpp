// A node agent's workers: starting them and handing them work, lending them to task
// owners and taking them back, blocking in get, and what becomes of them when they exit,
// die or are killed. (node_agent.cpp: the head, the queues and dispatch; node_agent_room.cpp:
// placement group bundles and preemption.)
#include "node/node_agent.hpp"

#include "log.hpp"

#include <algorithm>

namespace celer {

void node_agent::on(protocol::gpu_usage& m) {
  if (!m.sender_job.nil()) {
    // It names no worker: a job reports only devices that one of its workers here sees.
    for (auto index : m.devices) {
      const bool seen = std::any_of(workers_.begin(), workers_.end(), [&](const auto& e) {
        const auto& v = e.second.visible;
        return e.second.job == m.sender_job && std::find(v.begin(), v.end(), index) != v.end();
      });
      if (!seen) {
        denials_.warn("permission_denied: job " + m.sender_job.short_hex() +
                      " reported the usage of GPU " + std::to_string(index) +
                      ", which none of its workers here sees; refused");
        return;
      }
    }
  }
  gpu_monitor_.reported(m);
}

worker_id node_agent::take_worker(const protocol::task_spec& spec, const std::vector<int>& gpus) {
  const bool for_actor = spec.kind == protocol::task_kind::actor_creation;
  if (!for_actor) {
    // The most recently idle worker of the same job that sees the same GPUs (its cache is
    // warmest).
    for (auto it = idle_.rbegin(); it != idle_.rend(); ++it) {
      const auto& w = workers_.at(*it);
      if (w.job == spec.job && w.visible == gpus) {
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
  slot.started = std::chrono::steady_clock::now();
  slot.job = spec.job;
  slot.actor_worker = for_actor;
  workers_.emplace(id, std::move(slot));
  return id;
}

void node_agent::send_work(const worker_id& id, worker_slot& w, protocol::task_spec spec) {
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
    r.node = cfg_.id;
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

void node_agent::release(worker_slot& w) {
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

void node_agent::forget_endpoint(const worker_id& id, const address& worker, bool exited) {
  if (!cfg_.spill_to_head || worker.endpoint.empty()) return;
  (void)net_.send(cfg_.head, protocol::unsubscribe_cluster{worker.endpoint});
  if (exited) {
    net_.forget(worker.endpoint);
  } else {
    exiting_[id] = worker.endpoint;  // forgotten once the process is gone (worker_died)
  }
}

void node_agent::retire(const worker_id& id, const std::string& why) {
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

bool node_agent::owned_by_sender(const job_id& sender, const job_id& owner, const std::string& what) {
  if (sender.nil() || sender == owner) return true;
  denials_.warn("permission_denied: job " + sender.short_hex() + " asked about " + what +
                " of job " + owner.short_hex() + "; refused");
  return false;
}

node_agent::worker_slot* node_agent::worker_of_sender(const worker_id& id, const job_id& sender,
                                                      const char* what) {
  auto it = workers_.find(id);
  if (it == workers_.end()) return nullptr;
  // Every worker has a job from the start: take_worker records the job of the work it is
  // started for, lends it again only to that job (an idle one in the pool included), and
  // process_launcher gives its process that job's credential alone. So only that job (or
  // the cluster) speaks for it.
  if (!owned_by_sender(sender, it->second.job, std::string(what) + " of worker " + id.short_hex())) {
    return nullptr;
  }
  return &it->second;
}

void node_agent::on(protocol::return_lease& m) {
  CELER_LOG(debug, "node", "worker " + m.worker.short_hex() + " returned");
  auto it = workers_.find(m.worker);
  if (it == workers_.end() || it->second.actor_worker || !it->second.busy ||
      it->second.lease_request != m.request) {
    return;  // taken back already (the request was cancelled), maybe lent again since
  }
  if (!owned_by_sender(m.sender_job, it->second.job, "the lease of worker " + m.worker.short_hex())) {
    return;
  }
  reclaim(m.worker, it->second);
}

void node_agent::reclaim(const worker_id& id, worker_slot& w) {
  release(w);
  w.lease_request = {};
  if (stopping_) return;
  if (finished_jobs_.contains(w.job)) {
    retire(id, "its job finished");
  } else if (static_cast<int>(idle_.size()) < cfg_.max_idle_workers) {
    idle_.push_back(id);
  } else {
    retire(id, "too many idle workers");
  }
  dispatch();
}

std::size_t node_agent::withdraw_leases(const lease_match& match) {
  // Requests spilled to the head are not here: forgotten, but not counted as found.
  spilled_.forget_if(match);
  std::size_t found = queues_.erase_if([&](const protocol::task_spec& s) {
    return s.kind == protocol::task_kind::normal && match(s.owner, s.id, s.job);
  });
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
  return found + back.size();
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
             owned_by_sender(m.sender_job, job, "lease request " + request.short_hex());
    });
  if (found < wanted.size() && cfg_.spill_to_head && !m.from_head) {
    (void)net_.send(cfg_.head, std::move(m));  // forwarded: the head asks every node
  }
}

void node_agent::on(protocol::worker_blocked& m) {
  CELER_LOG(debug, "node", "worker " + m.worker.short_hex() + " blocked");
  auto* found = worker_of_sender(m.worker, m.sender_job, "worker_blocked");
  if (found == nullptr || !found->busy || found->blocked) return;
  auto& w = *found;
  w.blocked = true;
  protocol::resource_set lent;
  lent.set(protocol::cpu, w.granted.get(protocol::cpu));
  w.held.subtract(lent);
  room_.account_of(w.in_bundle).add(lent);
  dispatch();
}

void node_agent::on(protocol::worker_unblocked& m) {
  auto* found = worker_of_sender(m.worker, m.sender_job, "worker_unblocked");
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

void node_agent::on(protocol::actor_exited& m) {
  auto* w = worker_of_sender(m.worker, m.sender_job, "actor_exited");
  if (w == nullptr) return;
  release(*w);
  forget_endpoint(m.worker, w->addr, false);
  workers_.erase(m.worker);
  if (!stopping_) dispatch();
}

void node_agent::on(protocol::kill_actor& m) {
  // Not started yet: drop it from the queue.
  const auto* queued = queues_.find_if([&](const protocol::task_spec& s) {
    return s.kind == protocol::task_kind::actor_creation && s.actor == m.actor;
  });
  if (queued != nullptr) {
    if (!owned_by_sender(m.sender_job, queued->job, "actor " + m.actor.short_hex())) return;
    const task_id request = queued->id;
    queues_.erase_if([&](const protocol::task_spec& s) { return s.id == request; });
    return;
  }
  for (auto& [id, w] : workers_) {
    if (w.actor_worker && w.actor == m.actor) {
      if (!owned_by_sender(m.sender_job, w.job, "actor " + m.actor.short_hex())) return;
      launcher_.terminate(id, w.addr, m.actor);
      return;
    }
  }
}

void node_agent::on(protocol::worker_ready& m) {
  // The node sends work, and later shutdown_component, to the address given here: from a
  // job, it must be the worker's own (a worker's address is its id), for a worker of that
  // job, or the job could have another job's worker stopped or handed work.
  if (!m.sender_job.nil() && m.addr.id != m.worker) {
    denials_.warn("permission_denied: job " + m.sender_job.short_hex() + " said worker " +
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
    if (!owned_by_sender(m.sender_job, job, "worker_ready of worker " + m.worker.short_hex())) {
      return;
    }
    if (gone != starting_forgotten_.end()) starting_forgotten_.erase(gone);
    (void)net_.send(m.addr, protocol::shutdown_component{"not needed any more"});
    return;
  }
  if (!owned_by_sender(m.sender_job, it->second.job, "worker_ready of worker " + m.worker.short_hex())) {
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

void node_agent::on(protocol::package_data& m) {
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
    w.started = std::chrono::steady_clock::now();
    if (w.ready) {
      auto spec = std::move(*w.pending);
      w.pending.reset();
      send_work(id, w, std::move(spec));
    }
  }
}

void node_agent::fail_package_wait(const worker_id& id, const std::string& why) {
  auto it = workers_.find(id);
  if (it == workers_.end()) return;
  const std::string digest = std::move(it->second.awaits_package);
  it->second.awaits_package.clear();
  packages_.gave_up(it->second.job, digest, id);
  protocol::worker_died died{id, "could not be started: its job's working directory " + digest + " did not arrive (" + why + ")"};
  on(died);
}

void node_agent::on(protocol::worker_died& m) {
  starting_forgotten_.erase(m.worker);
  if (auto gone = exiting_.find(m.worker); gone != exiting_.end()) {
    net_.forget(gone->second);
    exiting_.erase(gone);
  }
  auto it = workers_.find(m.worker);
  if (it == workers_.end()) return;
  auto& w = it->second;
  if (!w.kill_reason.empty()) m.reason = w.kill_reason;
  if (w.actor_worker) {
    auto f = protocol::failure_info::make(
      detail::failure_kind::actor_died, error_code::unavailable,
      "actor " + w.actor.hex() + " died: its worker process " + m.reason, w.function,
      cfg_.id.short_hex(), m.worker.short_hex());
    (void)net_.send(cfg_.head, protocol::actor_failed{w.actor, std::move(f)});
  } else if (w.pending) {
    // Started for a lease it never got to grant: the owner's waiting tasks fail with why.
    protocol::lease_reply r;
    r.request = w.pending->id;
    r.fail = protocol::failure_info::make(detail::failure_kind::worker_died,
                                          error_code::unavailable, "its worker process " + m.reason,
                                          {}, cfg_.id.short_hex(), m.worker.short_hex());
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
  if (!stopping_) dispatch();
}

} // namespace celer
