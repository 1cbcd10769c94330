#include "node/node_agent.hpp"

#include "log.hpp"

#include <celer/version.hpp>

#include <algorithm>

namespace celer {

node_agent::node_agent(transport& net, worker_launcher& launcher, config cfg)
  : net_(net), launcher_(launcher), cfg_(std::move(cfg)), available_(cfg_.total) {}

void node_agent::start() {
  protocol::register_node r;
  r.protocol_version = protocol_version;
  r.node = cfg_.id;
  r.node_address = cfg_.self;
  r.total = cfg_.total;
  r.labels = cfg_.labels;
  if (!net_.send(cfg_.head, std::move(r))) {
    CELER_LOG(error, "node", "cannot reach the head to register");
  }
}

void node_agent::handle(protocol::message& m) {
  std::visit(
    [&](auto& msg) {
      if constexpr (requires { on(msg); }) {
        on(msg);
      } else {
        CELER_LOG(warn, "node", std::string("ignored unexpected message ") + protocol::name_of(m));
      }
    },
    m);
}

void node_agent::on(protocol::submit_task& m) {
  if (stopping_) return;
  if (!cfg_.total.covers(m.spec.resources)) {
    // This node can never run it; the head knows whether any node can.
    (void)net_.send(cfg_.head, std::move(m));
    return;
  }
  queue_.push_back(std::move(m.spec));
  dispatch();
}

void node_agent::on(protocol::start_actor& m) {
  if (stopping_) return;
  queue_.push_back(std::move(m.spec));
  dispatch();
}

worker_id node_agent::take_worker(bool for_actor) {
  if (!for_actor && !idle_.empty()) {
    worker_id id = idle_.back();
    idle_.pop_back();
    return id;
  }
  worker_id id = worker_id::random();
  worker_slot slot;
  slot.addr = launcher_.launch(id);
  slot.actor_worker = for_actor;
  workers_.emplace(id, std::move(slot));
  return id;
}

void node_agent::dispatch() {
  // Scan in submission order and start everything that fits now: a task waiting for 2 CPUs
  // does not hold back later tasks that need 1.
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (!available_.covers(it->resources)) {
      ++it;
      continue;
    }
    const bool for_actor = it->kind == protocol::task_kind::actor_creation;
    const worker_id wid = take_worker(for_actor);
    auto& w = workers_.at(wid);
    w.busy = true;
    w.task = it->id;
    w.actor = it->actor;
    w.held = it->resources;
    w.granted = it->resources;
    available_.subtract(it->resources);
    if (!net_.send(w.addr, protocol::execute_task{std::move(*it)})) {
      CELER_LOG(error, "node", "worker " + wid.short_hex() + " is unreachable");
    }
    it = queue_.erase(it);
  }
}

void node_agent::release(worker_slot& w) {
  available_.add(w.held);
  w.held = {};
  w.granted = {};
  w.busy = false;
  w.blocked = false;
}

void node_agent::on(protocol::task_done& m) {
  auto it = workers_.find(m.worker);
  if (it == workers_.end()) return;
  release(it->second);
  if (!stopping_) {
    if (static_cast<int>(idle_.size()) < cfg_.max_idle_workers) {
      idle_.push_back(m.worker);
    } else {
      (void)net_.send(it->second.addr, protocol::shutdown_component{"too many idle workers"});
      workers_.erase(it);
    }
    dispatch();
  }
}

void node_agent::on(protocol::worker_blocked& m) {
  auto it = workers_.find(m.worker);
  if (it == workers_.end() || !it->second.busy || it->second.blocked) return;
  auto& w = it->second;
  w.blocked = true;
  protocol::resource_set lent;
  lent.set(protocol::cpu, w.granted.get(protocol::cpu));
  w.held.subtract(lent);
  available_.add(lent);
  dispatch();
}

void node_agent::on(protocol::worker_unblocked& m) {
  auto it = workers_.find(m.worker);
  if (it == workers_.end() || !it->second.blocked) return;
  auto& w = it->second;
  w.blocked = false;
  protocol::resource_set lent;
  lent.set(protocol::cpu, w.granted.get(protocol::cpu));
  // Taken back even if that oversubscribes the node for a while: the worker is running
  // again, and stopping it is worse. Later dispatches wait until usage falls.
  w.held.add(lent);
  available_.subtract(lent);
}

void node_agent::on(protocol::actor_exited& m) {
  auto it = workers_.find(m.worker);
  if (it == workers_.end()) return;
  release(it->second);
  workers_.erase(it);
  if (!stopping_) dispatch();
}

void node_agent::on(protocol::kill_actor& m) {
  // Not started yet: drop it from the queue.
  auto q = std::find_if(queue_.begin(), queue_.end(), [&](const protocol::task_spec& s) {
    return s.kind == protocol::task_kind::actor_creation && s.actor == m.actor;
  });
  if (q != queue_.end()) {
    queue_.erase(q);
    return;
  }
  for (auto& [id, w] : workers_) {
    if (w.actor_worker && w.actor == m.actor) {
      (void)net_.send(w.addr, m);
      return;
    }
  }
}

void node_agent::on(protocol::resource_query& m) {
  protocol::resource_reply r;
  r.request_id = m.request_id;
  r.total = cfg_.total;
  r.available = available_;
  (void)net_.send(m.reply_to, std::move(r));
}

void node_agent::on(protocol::shutdown_component& m) {
  stopping_ = true;
  queue_.clear();
  for (auto& [id, w] : workers_) (void)net_.send(w.addr, m);
  workers_.clear();
  idle_.clear();
}

} // namespace celer
