#include "runtime.hpp"

#include "core_shell.hpp"
#include "head/head.hpp"
#include "host.hpp"
#include "node/node_agent.hpp"
#include "node/node_config.hpp"
#include "worker/preemption.hpp"
#include "worker/worker.hpp"

#include <algorithm>
#include <filesystem>

#include <cerrno>
#include <csignal>
#include <cstdlib>

#include <unistd.h>

namespace celer {

namespace {

/// Removes the scratch disk tiers of embedded runtimes whose process is gone (killed before
/// its shutdown could remove them): `embedded-<pid>-<node>` under `temp_dir`.
void remove_stale_scratch(const std::filesystem::path& temp_dir) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(temp_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with("embedded-")) continue;
    const auto dash = name.find('-', 9);
    if (dash == std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::atol(name.substr(9, dash - 9).c_str()));
    if (pid <= 0 || (::kill(pid, 0) != 0 && errno == ESRCH)) {
      std::error_code ignored;
      std::filesystem::remove_all(e.path(), ignored);
    }
  }
}

} // namespace

struct embedded_runtime::impl : worker_launcher {
  component_host host;
  /// The embedded node's disk tier (removed at shutdown: nothing outlives this process
  /// here to find its objects again), unless object_store_dir names one.
  std::filesystem::path scratch;
  core_worker* core = nullptr;
  address head_addr, node_addr;
  node_id node;

  explicit impl(int threads) : host(threads) {}

  launched launch(const worker_id& id, const protocol::task_spec&,
                  const std::vector<int>& gpus) override {
    address addr{id, {}};
    worker::config wc{id, addr, node_addr, head_addr, node, gpus};
    auto w = std::make_shared<worker>(host.local(), *core, wc);
    host.spawn_detached(id, as_component(w), "worker");
    // Its messages go to its inbox first (where queued tasks can be given back).
    host.local().set_front_door(id, [w](protocol::message& m) { return w->front_door(m); });
    return {addr, true};
  }

  void terminate(const worker_id& id, const address& addr, const actor_id& actor) override {
    // A thread cannot be killed: ask the actor to stop (a running call finishes first).
    (void)id;
    (void)host.local().send(addr, protocol::kill_actor{actor, "killed"});
  }

  bool preempt(const worker_id& id, const protocol::preempt_actor& notice) override {
    // The worker's thread may be in a long call: the callback runs beside it.
    preemption_board::instance().notify(notice, host.local(), node_addr, id);
    return true;
  }
};

embedded_runtime::embedded_runtime(const knob_values& k, const init_options& options)
  : impl_(std::make_unique<impl>(k.scheduler_threads)) {
  auto& s = *impl_;
  node_ = node_id::random();
  s.node = node_;
  s.head_addr = address{unique_id::random(), {}};
  s.node_addr = address{node_, {}};
  // First, as it throws on bad options: nothing is started yet.
  auto nc = node_config(k, node_, s.node_addr, s.head_addr,
                        node_offer{.num_cpus = options.num_cpus > 0 ? options.num_cpus : -1,
                                   .num_gpus = options.num_gpus > 0 ? options.num_gpus : k.num_gpus,
                                   .gpus = options.gpus,
                                   .memory = options.memory,
                                   .resources = options.resources});
  if (options.object_store_memory > 0) {
    nc.store_capacity = static_cast<std::size_t>(options.object_store_memory);
  }
  auto& net = s.host.local();
  const address core_addr{unique_id::random(), {}};
  core_ = std::make_unique<core_worker>(
    net, core_worker::endpoints{.self = core_addr,
                                .node = s.node_addr,
                                .head = s.head_addr,
                                .this_node = node_,
                                .priority = k.job_priority,
                                .env_vars = options.env_vars});
  s.core = core_.get();

  s.host.spawn(s.head_addr.id,
               as_component(std::make_shared<head>(net, std::chrono::milliseconds(0), k.spread_threshold)),
               "head");

  if (!k.object_store_dir.empty()) {
    nc.store_dir = k.object_store_dir;
  } else {
    remove_stale_scratch(k.temp_dir);
    s.scratch = std::filesystem::path(k.temp_dir) /
                ("embedded-" + std::to_string(::getpid()) + "-" + node_.short_hex());
    nc.store_dir = (s.scratch / "objects").string();
  }
  std::error_code ec;
  std::filesystem::create_directories(nc.store_dir, ec);
  if (ec) {
    throw exception(error_code::unavailable,
                    "celer: cannot create the object store's directory " + nc.store_dir + ": " +
                      ec.message());
  }
  auto n = std::make_shared<node_agent>(net, s, nc);
  n->start();  // queued for the head before anything else can reach it
  s.host.spawn(node_, as_component(n), "node");

  spawn_core_shell(s.host, *core_);
  // The node reports its free resources and waiting work to the head (so that the head's
  // view and its reasons stay true), and the head retries pending placement groups.
  // In-process messages cost little: more often than a cluster's heartbeat. The core's
  // ticks count out the lines celer::print's dedup folded.
  s.host.start_ticks({s.head_addr, s.node_addr, core_addr},
                     std::chrono::milliseconds(std::clamp(k.heartbeat_ms, 10, 100)));
}

void embedded_runtime::stop() {
  if (!impl_) return;
  auto& s = *impl_;
  core_->stop("celer::shutdown was called");
  const protocol::shutdown_component bye{"celer::shutdown"};
  auto& net = s.host.local();
  (void)net.send(s.node_addr, bye);  // the node stops its workers
  (void)net.send(s.head_addr, bye);
  (void)net.send(core_->self(), bye);
  s.host.stop();
  if (!s.scratch.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(s.scratch, ec);
  }
}

embedded_runtime::~embedded_runtime() { stop(); }

} // namespace celer
