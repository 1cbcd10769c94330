// A node agent: routing messages to its managers, registering with its head (and again
// when the head restarts), watching the head, its tick (the heartbeat, with GPU samples and
// the oldest waiting requests; workers that never came up), a job's end and the node's,
// bundles reserved, and the object store's messages. Workers are the pool's
// (worker_pool.cpp); waiting work, dispatch and preemption the local scheduler's
// (local_scheduler.cpp).
#include "node/node_agent.hpp"

#include "config/knobs.hpp"
#include "log.hpp"
#include "scheduler/cluster_view.hpp"

#include <celer/version.hpp>

#include <algorithm>

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
    memory_({.threshold = cfg_.memory_threshold, .limit_bytes = cfg_.memory_limit_bytes}),
    packages_(net_, cfg_.head, cfg_.id, cfg_.packages_dir),
    pool_(net_, launcher_, room_, packages_, guard_,
          {cfg_.id, cfg_.self, cfg_.head, cfg_.max_idle_workers, cfg_.spill_to_head,
           cfg_.worker_start_timeout, cfg_.now}),
    scheduler_(net_, pool_, room_, guard_,
               {cfg_.id, cfg_.head, cfg_.total, cfg_.labels, cfg_.spill_to_head, cfg_.preemption_grace,
                cfg_.now, std::chrono::milliseconds(knobs().lease_respill_ms)}) {
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
                            "resending " + std::to_string(scheduler_.spilled()) +
                            " lease request(s) spilled to it");
  register_with_head();
  if (store_) store_->announce_durable();
  scheduler_.resend_spilled();
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
      } else if constexpr (requires { scheduler_.on(msg); }) {
        scheduler_.on(msg);
      } else {
        CELER_LOG(warn, "node", std::string("ignored unexpected message ") + protocol::name_of(m));
      }
    },
    m);
}

void node_agent::on(protocol::tick&) {
  if (stopping_ || !watch_head()) return;
  // Store messages expire stuck pulls as they come; a quiet node's expire here.
  if (store_) store_->expire_pulls();
  const auto now = cfg_.now();
  scheduler_.tick(now);
  pool_.kill_slow_starts(now);
  memory_.tick(pool_, launcher_);
  if (log_enabled(log_level::debug)) {
    CELER_LOG(debug, "node", "available " + room_.available().to_string() + ", queued " +
                               std::to_string(scheduler_.queued()) + pool_.describe());
  }
  protocol::heartbeat h;
  h.node = cfg_.id;
  h.available = room_.available();
  pool_.report(h);
  scheduler_.report(h, now);
  if (store_) h.store = store_->stats();
  h.gpu_free = room_.gpus().free();
  h.gpu_samples = gpu_monitor_.samples();
  (void)net_.send(cfg_.head, std::move(h));
}

void node_agent::on(protocol::job_finished& m) {
  pool_.job_finished(m.job);  // first: its workers taken back below retire
  net_.job_ended(m.job);
  // What the job still leases or asks for comes back (its driver is gone or has shut down);
  // its workers retire.
  scheduler_.withdraw_leases(
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

void node_agent::on(protocol::reserve_bundle& m) {
  protocol::bundle_reserved r{m.group, m.index, cfg_.id, false, {}};
  r.why = stopping_ ? "the node is stopping" : room_.reserve(m);
  r.ok = r.why.empty();
  (void)net_.send(cfg_.head, std::move(r));
}

void node_agent::on(protocol::shutdown_component& m) {
  stopping_ = true;
  scheduler_.stop();
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

void node_agent::on(protocol::unsubscribe_cluster& m) {
  // A worker process went away (killed, or retired): it owned tasks as well as ran them.
  scheduler_.withdraw_leases([&](const address& owner, const task_id&, const job_id&) {
    return owner.endpoint == m.endpoint;
  });
  if (store_) store_->process_gone(m.endpoint);
}

} // namespace celer
