#include "cluster/processes.hpp"

#include "cluster/head_watch.hpp"
#include "cluster/session.hpp"
#include "crash.hpp"
#include "head/head.hpp"
#include "host.hpp"
#include "log.hpp"
#include "node/node_agent.hpp"
#include "node/process_launcher.hpp"
#include "transport/zmq_transport.hpp"
#include "worker/worker.hpp"

#include <celer/version.hpp>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <future>
#include <mutex>
#include <thread>

#include <pthread.h>
#include <unistd.h>

namespace celer::cluster {
namespace {

/// Hands a core the messages addressed to it (the core's own lock orders them). A driver's
/// core also turns its ticks into job heartbeats to the head and, with a head watch, probes
/// the head and fails every wait once it has been silent too long.
struct core_shell {
  core_worker* core;
  transport* net = nullptr;
  head_watch* watch = nullptr;
  void handle(protocol::message& m) {
    if (std::holds_alternative<protocol::tick>(m)) {
      if (net == nullptr || (watch != nullptr && watch->gave_up())) return;
      (void)net->send(core->where().head, protocol::job_heartbeat{core->where().job});
      if (watch != nullptr) on_tick();
    } else if (!std::holds_alternative<protocol::shutdown_component>(m)) {
      core->handle(m);
    }
  }
  void on_tick() {
    auto s = watch->tick(std::chrono::steady_clock::now());
    if (s.probe) (void)net->send(core->where().head, head_watch::probe(core->self()));
    if (!s.say.empty()) CELER_LOG(warn, "driver", s.say);
    if (s.give_up) {
      CELER_LOG(error, "driver", s.why + "; every wait and request fails with unavailable");
      core->stop(s.why + ": the cluster is unreachable", error_code::unavailable);
    }
  }
};

std::string require_env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') {
    throw exception(error_code::invalid_argument,
                    std::string("worker mode: ") + name + " is not set by the node agent");
  }
  return v;
}

unique_id require_id(const char* name) {
  auto id = unique_id::parse(require_env(name));
  if (!id) throw exception(error_code::invalid_argument, std::string("worker mode: bad ") + name);
  return *id;
}

std::string bind_for(const std::string& ip) { return "tcp://" + ip + ":*"; }

/// The largest frame a process accepts: 16 MiB, or an inline value's size and room to
/// spare when inline_object_bytes is raised past it (larger values travel in the store).
std::size_t max_frame_bytes(const knob_values& k) {
  return std::max<std::size_t>(16u << 20, static_cast<std::size_t>(k.inline_object_bytes) + (1u << 20));
}

} // namespace

// ---------------------------------------------------------------- driver / observer

struct cluster_driver::impl {
  component_host host{2};
  std::unique_ptr<zmq_transport> net;
  std::unique_ptr<core_worker> core;
  std::unique_ptr<head_watch> watch;
  address head_addr;
  node_id node;
  role r = role::driver;
  bool stopped = false;
};

cluster_driver::cluster_driver(const knob_values& k, const std::string& address, role r)
  : impl_(std::make_unique<impl>()) {
  install_crash_handler();
  auto& s = *impl_;
  s.r = r;
  auto parts = parse_address(address);
  if (!parts) throw exception(parts.error().code(), parts.error().message());
  auto token = find_token(address);
  if (!token) throw exception(token.error().code(), token.error().message());
  const std::string ip = k.node_ip.empty() ? local_ip_towards(parts->host) : k.node_ip;
  // The driver speaks as its job; holding the token, it registers the job with the head
  // in its first hello (the probe below).
  const job_id job = job_id::random();
  auto creds = credentials::for_driver(*token, job);
  if (!creds) throw exception(creds.error().code(), creds.error().message());
  zmq_transport::options zo;
  zo.bind = bind_for(ip);
  zo.creds = std::move(*creds);
  zo.encrypt = k.encryption != 0;
  zo.max_body_bytes = static_cast<std::size_t>(k.max_message_bytes);
  zo.max_frame_bytes = max_frame_bytes(k);
  s.net = std::make_unique<zmq_transport>(s.host.local(), zo);
  s.head_addr = celer::address{head_component, tcp_endpoint(*parts)};
  if (auto ok = s.net->probe(s.head_addr.endpoint, std::chrono::milliseconds(k.connect_timeout_ms));
      !ok) {
    const auto code = ok.error().code();
    s.net->stop();
    throw exception(code, "cannot connect to the cluster at " + address + ": " +
                            ok.error().message());
  }
  core_worker::endpoints where;
  where.self = celer::address{unique_id::random(), s.net->endpoint()};
  where.head = s.head_addr;
  where.job = job;
  where.binary = self_executable();
  where.cluster = true;
  where.priority = k.job_priority;
  s.core = std::make_unique<core_worker>(*s.net, where);
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
  s.host.spawn(where.self.id,
               as_component(std::make_shared<core_shell>(core_shell{
                 s.core.get(), r == role::driver ? s.net.get() : nullptr, s.watch.get()})),
               "core");
  // The head's answers to the watch's probes stop here; the rest is the core's.
  s.net->handle_directly(where.self.id, [core = s.core.get(),
                                         watch = s.watch.get()](protocol::message& m) {
    if (watch != nullptr && head_watch::answers_probe(m)) {
      watch->heard(std::chrono::steady_clock::now());
    } else {
      core->handle(m);
    }
  });
  s.net->start();
  if (r == role::observer) return;
  // The head stops the job's actors and workers when these stop (the driver died).
  (void)s.net->send(s.head_addr, protocol::job_heartbeat{where.job});
  s.host.start_ticks({where.self}, std::chrono::milliseconds(std::max(10, k.heartbeat_ms)));
  (void)s.net->send(s.head_addr, protocol::subscribe_cluster{where.self});
  // The local node: a live node on this machine (the head's own first), else any live one.
  auto st = s.core->query_status();
  const protocol::node_status* pick = nullptr;
  const std::string mine = "tcp://" + ip + ":";
  for (const auto& n : st.nodes) {
    if (!n.alive) continue;
    const bool local = n.addr.endpoint.rfind(mine, 0) == 0;
    const bool head_node = n.addr.endpoint == s.head_addr.endpoint;
    if (pick == nullptr || (local && pick->addr.endpoint.rfind(mine, 0) != 0) ||
        (local && head_node)) {
      pick = &n;
    }
  }
  if (pick == nullptr) {
    stop();
    throw exception(error_code::unavailable,
                    "the cluster at " + address + " has no live node to run work on");
  }
  s.node = pick->node;
  s.core->attach_node(pick->addr, pick->node);
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
  s.core->stop("celer::shutdown was called");
  if (s.r == role::driver) {
    (void)s.net->send(s.head_addr, protocol::job_finished{s.core->where().job});
  }
  (void)s.host.local().send(s.core->self(), protocol::shutdown_component{"shutdown"});
  s.host.stop();
  s.net->stop();  // flushes job_finished to the head
}

// ---------------------------------------------------------------- worker process

bool worker_mode_requested() { return std::getenv("CELER_WORKER_ID") != nullptr; }

struct worker_process::impl {
  component_host host{2};
  std::unique_ptr<zmq_transport> net;
  std::unique_ptr<core_worker> core;
  node_id node;
  worker_id id;
  address self, node_addr, head_addr;
  std::promise<void> finished;
  std::atomic<bool> finished_set{false};
  bool stopped = false;
};

worker_process::worker_process(const knob_values& k) : impl_(std::make_unique<impl>()) {
  install_crash_handler();
  auto& s = *impl_;
  const worker_id id(require_id("CELER_WORKER_ID"));
  s.node = node_id(require_id("CELER_WORKER_NODE"));
  const address node_addr{s.node, require_env("CELER_WORKER_NODE_ENDPOINT")};
  const address head_addr{head_component, require_env("CELER_WORKER_HEAD_ENDPOINT")};
  const job_id job(require_id("CELER_WORKER_JOB"));
  std::vector<int> gpu_ids;
  if (const char* g = std::getenv("CELER_WORKER_GPUS")) {
    for (const char* p = g; *p != '\0';) {
      char* end = nullptr;
      gpu_ids.push_back(static_cast<int>(std::strtol(p, &end, 10)));
      if (end == p) break;
      p = *end == ',' ? end + 1 : end;
    }
  }
  // The job's credential, never the cluster's secret (process_launcher sets them).
  auto creds = credentials::for_job(job, require_env("CELER_JOB_CREDENTIAL"),
                                    require_env("CELER_CLUSTER_KEY"));
  if (!creds) throw exception(creds.error().code(), "worker mode: " + creds.error().message());
  for (const char* v : {"CELER_WORKER_ID", "CELER_WORKER_NODE", "CELER_WORKER_NODE_ENDPOINT",
                        "CELER_WORKER_HEAD_ENDPOINT", "CELER_WORKER_JOB", "CELER_WORKER_GPUS",
                        "CELER_JOB_CREDENTIAL", "CELER_CLUSTER_KEY"}) {
    ::unsetenv(v);  // not inherited by what user code starts
  }
  zmq_transport::options zo;
  zo.bind = bind_for(k.node_ip.empty() ? "127.0.0.1" : k.node_ip);
  zo.creds = std::move(*creds);
  zo.encrypt = k.encryption != 0;
  zo.max_body_bytes = static_cast<std::size_t>(k.max_message_bytes);
  zo.max_frame_bytes = max_frame_bytes(k);
  s.net = std::make_unique<zmq_transport>(s.host.local(), zo);

  core_worker::endpoints where;
  where.self = address{unique_id::random(), s.net->endpoint()};
  where.node = node_addr;
  where.head = head_addr;
  where.this_node = s.node;
  where.job = job;
  where.binary = self_executable();
  where.cluster = true;
  s.core = std::make_unique<core_worker>(*s.net, where);
  s.host.spawn(where.self.id, as_component(std::make_shared<core_shell>(core_shell{s.core.get()})),
               "core");
  s.net->handle_directly(where.self.id, [core = s.core.get()](protocol::message& m) { core->handle(m); });
  const address self{id, s.net->endpoint()};
  worker::config wc{id, self, node_addr, head_addr, s.node, std::move(gpu_ids)};
  auto hosted = std::make_shared<worker>(*s.net, *s.core, wc);
  // A preemption notice is handled as it arrives, beside the actor's running call; the
  // rest goes to the worker's mailbox, in order.
  s.net->handle_directly(id, [w = hosted.get(), local = &s.host.local(), id](protocol::message& m) {
    if (auto* notice = std::get_if<protocol::preempt_actor>(&m)) {
      w->preempted(*notice);
    } else {
      (void)local->send(address{id, {}}, std::move(m));
    }
  });
  s.host.spawn_detached(id, as_component(std::move(hosted)), "worker",
                        [&s] {
                          if (!s.finished_set.exchange(true)) s.finished.set_value();
                        });
  s.id = id;
  s.self = self;
  s.node_addr = node_addr;
  s.head_addr = head_addr;
}

void worker_process::start() {
  auto& s = *impl_;
  s.net->start();
  (void)s.net->send(s.head_addr, protocol::subscribe_cluster{s.core->self()});
  (void)s.net->send(s.node_addr, protocol::worker_ready{s.id, s.self});
}

worker_process::~worker_process() { stop(); }
core_worker& worker_process::core() noexcept { return *impl_->core; }
const node_id& worker_process::node() const noexcept { return impl_->node; }

void worker_process::wait_until_finished() { impl_->finished.get_future().wait(); }

void worker_process::stop() {
  auto& s = *impl_;
  if (s.stopped) return;
  s.stopped = true;
  s.core->stop("the worker is stopping");
  (void)s.host.local().send(s.core->self(), protocol::shutdown_component{"stop"});
  s.host.stop();
  s.net->stop();
}

// ---------------------------------------------------------------- head and node daemons

int run_daemon(const knob_values& k, const daemon_options& o,
               const std::function<void(const expected<std::string>&)>& ready) {
  // Signals are taken by sigwait below; every thread started from here inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  install_crash_handler();

  std::string head_host;
  std::string cluster_address;
  if (o.head) {
    head_host = o.node_ip.empty() ? local_ip_towards("127.0.0.1") : o.node_ip;
    cluster_address = head_host + ":" + std::to_string(o.port);
  } else {
    auto parts = parse_address(o.head_address);
    if (!parts) {
      ready(parts.error());
      return 2;
    }
    cluster_address = parts->host + ":" + std::to_string(parts->port);
  }
  std::string token;
  std::filesystem::path session_dir;
  std::string ip;
  try {
    if (o.head) {
      // The session directory is made once the port is bound: a head that cannot start
      // leaves the running cluster's session_latest alone.
      token = k.token.empty() ? make_token() : k.token;  // celer start's --token-file etc.
      ip = head_host;
    } else {
      auto t = find_token(o.head_address);
      if (!t) {
        ready(t.error());
        return 2;
      }
      token = *t;
      session_dir = session_for_joining(o.head_address);
      auto parts = parse_address(o.head_address);
      ip = o.node_ip.empty() ? local_ip_towards(parts->host) : o.node_ip;
    }
  } catch (const exception& e) {
    ready(error(e.code(), e.what()));
    return 1;
  }

  component_host host(k.scheduler_threads > 0 ? k.scheduler_threads : 2);
  zmq_transport::options zo;
  zo.bind = o.head && o.port > 0 ? "tcp://" + ip + ":" + std::to_string(o.port) : bind_for(ip);
  auto creds = credentials::for_cluster(token);
  if (!creds) {
    ready(creds.error());
    return 2;
  }
  zo.creds = *creds;
  zo.encrypt = k.encryption != 0;
  // A node asks the head whose a job's key is; the head knows (drivers register with it).
  if (!o.head) zo.key_authority = "tcp://" + cluster_address;
  zo.max_body_bytes = static_cast<std::size_t>(k.max_message_bytes);
  zo.max_frame_bytes = max_frame_bytes(k);
  std::unique_ptr<zmq_transport> net;
  try {
    net = std::make_unique<zmq_transport>(host.local(), zo);
  } catch (const exception& e) {
    ready(error(e.code(), e.what()));
    return 1;
  }
  if (o.head) {
    cluster_address = net->endpoint().substr(6);  // the real port when --port 0
    try {
      session_dir = create_session(cluster_address, token).dir;
    } catch (const exception& e) {
      ready(error(e.code(), e.what()));
      return 1;
    }
  }
  const address head_addr{head_component, o.head ? net->endpoint() : "tcp://" + cluster_address};
  if (!o.head) {
    if (auto ok = net->probe(head_addr.endpoint, std::chrono::milliseconds(k.connect_timeout_ms));
        !ok) {
      ready(error(ok.error().code(), "cannot join the cluster at " + cluster_address + ": " +
                                       ok.error().message()));
      return 1;
    }
  }
  std::vector<address> tick_targets;
  if (o.head) {
    host.spawn(head_addr.id,
               as_component(std::make_shared<head>(
                 *net, head_addr, std::chrono::milliseconds(k.node_timeout_ms),
                 k.spread_threshold)),
               "head");
    tick_targets.push_back(head_addr);
  }
  std::unique_ptr<process_launcher> launcher;
  std::shared_ptr<node_agent> agent;
  struct lost_head {
    std::mutex mutex;
    std::string why;
  };
  auto head_lost = std::make_shared<lost_head>();
  node_id nid;
  if (!o.head || o.with_node) {
    nid = node_id::random();
    const address node_addr{nid, net->endpoint()};
    node_agent::config nc;
    nc.id = nid;
    nc.self = node_addr;
    nc.head = head_addr;
    try {
      nc.gpus = node_gpus(o.num_gpus, o.gpus.empty() ? k.gpus : o.gpus);
      nc.total = node_resources(k, o.num_cpus, static_cast<double>(nc.gpus.size()), o.memory,
                                o.resources);
      nc.total.set(node_resource_name(nid), 1);
    } catch (const exception& e) {
      ready(error(e.code(), e.what()));
      return 2;
    }
    nc.labels = o.labels;
    nc.spill_to_head = true;
    nc.worker_start_timeout = std::chrono::milliseconds(k.worker_start_timeout_ms);
    const double cpus = nc.total.get(protocol::cpu);
    nc.max_idle_workers =
      k.max_idle_workers > 0 ? k.max_idle_workers : static_cast<int>(2 * std::max(1.0, cpus));
    nc.store_capacity = object_store_capacity(k);
    nc.store_spill = k.object_spilling != 0;
    nc.preemption_grace = std::chrono::milliseconds(std::max(0, k.preemption_grace_ms));
    if (!o.head) {
      // A node whose head is gone says so, and stops after node_head_timeout_ms: the
      // signal below wakes this thread, which stops the workers and exits.
      nc.head_missing_after = std::chrono::milliseconds(std::max(1, k.node_timeout_ms));
      nc.head_timeout = std::chrono::milliseconds(std::max(0, k.node_head_timeout_ms));
      nc.head_lost = [lost = head_lost](const std::string& why) {
        {
          std::lock_guard lock(lost->mutex);
          lost->why = why;
        }
        ::kill(::getpid(), SIGTERM);
      };
    }
    launcher = std::make_unique<process_launcher>(
      *net, process_launcher::config{nid, node_addr, head_addr, *creds, k.encryption != 0, ip,
                                     session_dir / "logs", !nc.gpus.empty()});
    // The disk tier: object_store_dir, else the first of <session>/objects/0, 1, ... that no
    // other node on this machine holds (a node restarted here takes its old one back, and
    // finds its durable objects again).
    for (int slot = 0;; ++slot) {
      nc.store_dir = k.object_store_dir.empty()
                       ? (session_dir / "objects" / std::to_string(slot)).string()
                       : k.object_store_dir;
      std::error_code ec;
      std::filesystem::create_directories(nc.store_dir, ec);
      try {
        agent = std::make_shared<node_agent>(*net, *launcher, nc);
        break;
      } catch (const exception& e) {
        const bool held = std::string_view(e.what()).find("lock") != std::string_view::npos;
        if (!k.object_store_dir.empty() || !held || slot >= 63) {
          ready(error(e.code(), e.what()));
          return 1;
        }
      }
    }
    agent->start();
    host.spawn(nid, as_component(agent), "node");
    tick_targets.push_back(node_addr);
  }
  host.start_ticks(tick_targets, std::chrono::milliseconds(std::max(10, k.heartbeat_ms)));
  net->start();
  const auto pid_file =
    write_pid_file(session_dir, o.head ? "head" : "node-" + nid.short_hex());
  const auto log_file =
    session_dir / "logs" / (o.head ? std::string("head.log") : "node-" + nid.short_hex() + ".log");
  ready(cluster_address + " " + session_dir.string() + " " + log_file.string());
  CELER_LOG(warn, o.head ? "head" : "node",
            std::string(o.head ? "head" : "node") + " serving at " + net->endpoint() +
              (nid.nil() ? "" : ", node " + nid.hex()) + ", session " + session_dir.string());

  int sig = 0;
  while (sigwait(&stop_signals, &sig) != 0) {
  }
  std::string lost;
  {
    std::lock_guard lock(head_lost->mutex);
    lost = head_lost->why;
  }
  CELER_LOG(warn, o.head ? "head" : "node",
            lost.empty() ? std::string("stopping (signal ") + std::to_string(sig) + ")"
                         : "stopping: " + lost);
  const protocol::shutdown_component bye{"the daemon is stopping"};
  if (agent) (void)host.local().send(address{nid, {}}, bye);  // tells its workers to stop
  if (o.head) (void)host.local().send(head_addr, bye);
  if (launcher) launcher->stop(std::chrono::seconds(5));
  host.stop();
  net->stop();
  std::error_code ec;
  std::filesystem::remove(pid_file, ec);
  return lost.empty() ? 0 : 3;
}

} // namespace celer::cluster
