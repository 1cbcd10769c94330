#include "cluster/driver.hpp"

#include "protocol/head_watch.hpp"
#include "cluster/process_wiring.hpp"
#include "cluster/session.hpp"
#include "crash.hpp"
#include "host.hpp"
#include "log.hpp"
#include "protocol/env_vars.hpp"
#include "transport/zmq_transport.hpp"

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

namespace celer::cluster {
namespace {

/// The node a driver on `ip` works through: a live node on this machine (the head's own
/// first), else any live one; never `dead`.
const protocol::node_status* pick_local_node(const protocol::status_reply& st, const std::string& ip,
                                             const std::string& head_endpoint, const node_id& dead) {
  const protocol::node_status* pick = nullptr;
  const std::string mine = "tcp://" + ip + ":";
  for (const auto& n : st.nodes) {
    if (!n.alive || n.node == dead) continue;
    const bool local = n.addr.endpoint.rfind(mine, 0) == 0;
    const bool head_node = n.addr.endpoint == head_endpoint;
    if (pick == nullptr || (local && pick->addr.endpoint.rfind(mine, 0) != 0) ||
        (local && head_node)) {
      pick = &n;
    }
  }
  return pick;
}

/// The job this driver speaks as, and its credentials. A driver the head started for a
/// submitted job (docs/jobs.md) has its job's credential alone, in CELER_JOB_ID,
/// CELER_JOB_CREDENTIAL and CELER_CLUSTER_KEY (the head registered the job already); any
/// other driver holds the token and registers a new job in its first hello to the head.
std::pair<job_id, credentials> driver_credentials(const std::string& address, cluster_driver::role r) {
  const char* job_hex = std::getenv("CELER_JOB_ID");
  const char* secret = std::getenv("CELER_JOB_CREDENTIAL");
  const char* cluster_key = std::getenv("CELER_CLUSTER_KEY");
  if (r == cluster_driver::role::driver && job_hex != nullptr && secret != nullptr && cluster_key != nullptr) {
    auto job = job_id::parse(job_hex);
    if (!job) throw exception(error_code::invalid_argument, "CELER_JOB_ID is not a job id (32 hex digits)");
    auto creds = credentials::for_job(*job, secret, cluster_key);
    if (!creds) throw exception(creds.error().code(), "the submitted job's credential: " + creds.error().message());
    return {*job, std::move(*creds)};
  }
  auto token = find_token(address);
  if (!token) throw exception(token.error().code(), token.error().message());
  const job_id job = job_id::random();
  // An observer (celer status, celer list) holds the token and asks as the cluster: a
  // job's connection is answered about its own job only (docs/security.md).
  auto creds = r == cluster_driver::role::observer ? credentials::for_cluster(*token)
                                                   : credentials::for_driver(*token, job);
  if (!creds) throw exception(creds.error().code(), creds.error().message());
  return {job, std::move(*creds)};
}

} // namespace

struct cluster_driver::impl {
  component_host host{2};
  std::unique_ptr<zmq_transport> net;
  std::unique_ptr<core_worker> core;
  std::unique_ptr<head_watch> watch;
  address head_addr;
  std::string ip;
  node_id node;
  role r = role::driver;
  bool stopped = false;
  /// When the local node dies, this thread attaches the core to another one.
  std::thread reattach;
  std::mutex m;
  std::condition_variable cv;
  std::optional<node_id> lost;  // the node that died, until another is attached
  bool stopping = false;

  void reattach_loop();
};

void cluster_driver::impl::reattach_loop() {
  std::unique_lock lock(m);
  while (true) {
    cv.wait(lock, [&] { return stopping || lost.has_value(); });
    if (stopping) return;
    const node_id dead = *lost;
    lock.unlock();
    std::string attached;
    try {
      // The head has just declared it dead: its status lists the others.
      auto st = core->query_status();
      if (const auto* pick = pick_local_node(st, ip, head_addr.endpoint, dead)) {
        core->attach_node(pick->addr, pick->node);
        node = pick->node;
        attached = pick->node.short_hex();
      }
    } catch (const exception& e) {
      CELER_LOG(warn, "driver", std::string("cannot ask the head for another node yet: ") + e.what());
    }
    lock.lock();
    if (!attached.empty()) {
      CELER_LOG(warn, "driver", "its node " + dead.short_hex() + " died; now working through node " +
                                  attached);
      lost.reset();
    } else {
      cv.wait_for(lock, std::chrono::milliseconds(500), [&] { return stopping; });
    }
  }
}

cluster_driver::cluster_driver(const knob_values& k, const std::string& address, role r,
                               const std::map<std::string, std::string>& env_vars)
  : impl_(std::make_unique<impl>()) {
  install_crash_handler();
  auto& s = *impl_;
  s.r = r;
  auto parts = parse_address(address);
  if (!parts) throw exception(parts.error().code(), parts.error().message());
  const std::string ip = k.node_ip.empty() ? local_ip_towards(parts->host) : k.node_ip;
  auto [job, creds] = driver_credentials(address, r);
  auto zo = transport_options(k, bind_for(ip), std::move(creds));
  zo.lend_seat = k.driver_receives_replies != 0;
  // A driver's job may meet a shared namespace's (its detached actors answer its calls):
  // such a key is asked about at the head.
  if (r != role::observer) zo.key_authority = tcp_endpoint(*parts);
  s.net = std::make_unique<zmq_transport>(s.host.local(), std::move(zo));
  s.head_addr = celer::address{head_component, tcp_endpoint(*parts)};
  // An observer (celer status) says at once that nothing listens there; a driver waits
  // connect_timeout_ms for a head that may be starting.
  const auto refused = r == role::observer ? zmq_transport::when_refused::fail
                                           : zmq_transport::when_refused::keep_trying;
  if (auto ok = s.net->probe(s.head_addr.endpoint, std::chrono::milliseconds(k.connect_timeout_ms), refused);
      !ok) {
    const auto code = ok.error().code();
    s.net->stop();
    throw exception(code, "cannot connect to the cluster at " + address + ": " +
                            ok.error().message());
  }
  if (r == role::driver && k.head_timeout_ms > 0) {
    head_watch::config hw;
    hw.head = s.head_addr.endpoint;
    hw.give_up_after = std::chrono::milliseconds(k.head_timeout_ms);
    hw.give_up_knob = "head_timeout_ms";
    hw.missing_after = std::min(std::chrono::milliseconds(std::max(1, k.node_timeout_ms)),
                                hw.give_up_after / 2);
    hw.probe_every = std::min(std::chrono::milliseconds(1000), hw.give_up_after / 4);
    s.watch = std::make_unique<head_watch>(hw, std::chrono::steady_clock::now());
  }
  auto where = core_endpoints(*s.net, s.head_addr, job);
  where.priority = k.job_priority;
  where.env_vars = protocol::merged_env(std::move(where.env_vars), env_vars);
  // An observer's core sends no job heartbeats (it has no job to keep alive).
  s.core = start_core(s.host, *s.net, where, r == role::driver ? s.net.get() : nullptr,
                      s.watch.get());
  // A thread blocked in get takes its reply off the socket itself (no hand-off from the
  // receiver thread).
  s.core->receive_while_waiting(
    {.receive_until = [net = s.net.get()](const std::function<bool()>& done,
                                          std::chrono::steady_clock::time_point until) {
       return net->receive_until(done, until);
     },
     .wake = [net = s.net.get()] { net->wake_receiving(); }});
  s.net->start();
  if (r == role::observer) return;
  // The head stops the job's actors and workers when these stop (the driver died).
  (void)s.net->send(s.head_addr, protocol::job_heartbeat{where.job, {}, where.self});
  s.host.start_ticks({where.self}, std::chrono::milliseconds(std::max(10, k.heartbeat_ms)));
  (void)s.net->send(s.head_addr, protocol::subscribe_cluster{where.self});
  auto st = s.core->query_status();
  const auto* pick = pick_local_node(st, ip, s.head_addr.endpoint, {});
  if (pick == nullptr) {
    stop();
    throw exception(error_code::unavailable,
                    "the cluster at " + address + " has no live node to run work on");
  }
  s.node = pick->node;
  s.ip = ip;
  s.core->attach_node(pick->addr, pick->node);
  s.core->on_local_node_died([&s](const node_id& dead) {
    {
      std::lock_guard lock(s.m);
      s.lost = dead;
    }
    s.cv.notify_all();
  });
  s.reattach = std::thread([&s] { s.reattach_loop(); });
  CELER_LOG(info, "driver", "connected to " + address + "; local node " + s.node.short_hex());
}

cluster_driver::~cluster_driver() { stop(); }

core_worker& cluster_driver::core() noexcept { return *impl_->core; }
const node_id& cluster_driver::node() const noexcept { return impl_->node; }

protocol::status_reply cluster_driver::status() { return impl_->core->query_status(); }

void cluster_driver::stop() {
  auto& s = *impl_;
  if (s.stopped) return;
  s.stopped = true;
  {
    std::lock_guard lock(s.m);
    s.stopping = true;
  }
  s.cv.notify_all();
  s.core->stop("celer::shutdown was called");  // fails a status query under way
  if (s.reattach.joinable()) s.reattach.join();
  if (s.r == role::driver) {
    // Its tasks' last counts, then the end: the head keeps both, in this order.
    (void)s.net->send(s.head_addr, protocol::job_heartbeat{s.core->where().job, s.core->task_counts(true)});
    (void)s.net->send(s.head_addr, protocol::job_finished{s.core->where().job});
  }
  (void)s.host.local().send(s.core->self(), protocol::shutdown_component{"shutdown"});
  s.host.stop();
  s.net->stop();  // flushes job_finished to the head
}

} // namespace celer::cluster
