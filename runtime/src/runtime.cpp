#include "runtime.hpp"

#include "head/head.hpp"
#include "log.hpp"
#include "node/node_agent.hpp"
#include "transport/caf_types.hpp"
#include "transport/tsan.hpp"
#include "worker/worker.hpp"

#include <caf/all.hpp>

#include <celer/api.hpp>

#include <mutex>
#include <thread>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <sys/syscall.h>
#include <unistd.h>

namespace celer {
namespace {

/// Runs a component's `handle` for every protocol message; no exception escapes.
template <class Component>
caf::behavior component_behavior(caf::event_based_actor* self, std::shared_ptr<Component> c,
                                 local_transport* net, unique_id id, const char* what) {
  tsan::acquire(id);  // the spawner released before spawning
  return {
    [=](protocol::message& m) {
      tsan::acquire(id);
      const bool stop = std::holds_alternative<protocol::shutdown_component>(m);
      try {
        c->handle(m);
      } catch (const std::exception& e) {
        CELER_LOG(error, what, std::string("handling ") + protocol::name_of(m) + ": " + e.what());
      }
      bool finished = stop;
      if constexpr (requires { c->finished(); }) finished = finished || c->finished();
      if (finished) {
        net->unbind(id);
        self->quit();
      }
      // The next message may run on another scheduler thread; order it after this one.
      tsan::release(id);
    },
  };
}

double physical_memory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0.0;
}

} // namespace

struct embedded_runtime::impl : worker_launcher {
  std::unique_ptr<caf::actor_system_config> cfg;
  std::unique_ptr<caf::actor_system> sys;
  local_transport net;
  core_worker* core = nullptr;
  address head_addr, node_addr;
  node_id node;
  caf::actor head_actor, node_actor, core_actor;
  /// Kernel thread ids of the detached worker threads, so that stop() can wait until each
  /// has really exited (CAF detaches them and does not join).
  std::mutex threads_mutex;
  std::vector<pid_t> worker_threads;

  address launch(const worker_id& id) override {
    address addr{id, {}};
    worker::config wc{id, addr, node_addr, head_addr, node};
    auto w = std::make_shared<worker>(net, *core, wc);
    tsan::release(id);
    // Arguments go through spawn rather than a capture: CAF 0.17 dereferences a null
    // argument tuple when a spawned function takes none (UBSan reports it).
    auto a = sys->spawn<caf::detached>(worker_behavior, w, this, unique_id(id));
    net.bind(id, a);
    return addr;
  }

  /// A worker's actor: records its thread (it runs on the worker's own thread), then
  /// handles messages.
  static caf::behavior worker_behavior(caf::event_based_actor* self, std::shared_ptr<worker> w,
                                       impl* rt, unique_id id) {
    {
      std::lock_guard lock(rt->threads_mutex);
      rt->worker_threads.push_back(static_cast<pid_t>(::syscall(SYS_gettid)));
    }
    return component_behavior<worker>(self, std::move(w), &rt->net, id, "worker");
  }

  /// Waits (boundedly) until every worker thread has left the process.
  void await_worker_threads() {
    std::lock_guard lock(threads_mutex);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (pid_t tid : worker_threads) {
      const std::string path = "/proc/self/task/" + std::to_string(tid);
      while (::access(path.c_str(), F_OK) == 0 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
    worker_threads.clear();
    // A worker stopped before its thread ran its initialiser is not in the list; CAF names
    // every detached actor's thread "caf.actor", and only this runtime starts them.
    while (detached_threads_alive() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  static bool detached_threads_alive() {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/task", ec)) {
      std::ifstream comm(e.path() / "comm");
      std::string name;
      if (std::getline(comm, name) && name == "caf.actor") return true;
    }
    return false;
  }
};

embedded_runtime::embedded_runtime(const knob_values& k, const init_options& options)
  : impl_(std::make_unique<impl>()) {
  auto& s = *impl_;
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const double cpus = options.num_cpus > 0 ? options.num_cpus
                      : k.num_cpus > 0     ? k.num_cpus
                                           : static_cast<double>(hw);
  const double gpus = options.num_gpus > 0 ? options.num_gpus : k.num_gpus;
  const double memory = options.memory > 0 ? options.memory
                        : k.memory > 0     ? k.memory
                                           : physical_memory();
  auto total = protocol::make_request(cpus, gpus, memory, options.resources);
  if (!total) {
    throw exception(total.error().code(), "celer::init: " + total.error().message());
  }

  s.cfg = std::make_unique<caf::actor_system_config>();
  const int threads = k.scheduler_threads > 0 ? k.scheduler_threads
                                              : static_cast<int>(std::max(2u, hw));
  s.cfg->set("scheduler.max-threads", threads);
  s.cfg->set("logger.verbosity", caf::atom("quiet"));
  s.sys = std::make_unique<caf::actor_system>(*s.cfg);

  node_ = node_id::random();
  s.node = node_;
  s.head_addr = address{unique_id::random(), {}};
  s.node_addr = address{node_, {}};
  const address core_addr{unique_id::random(), {}};
  core_ = std::make_unique<core_worker>(
    s.net, core_worker::endpoints{core_addr, s.node_addr, s.head_addr, node_});
  s.core = core_.get();

  auto h = std::make_shared<head>(s.net, s.head_addr);
  tsan::release(s.head_addr.id);
  s.head_actor = s.sys->spawn(component_behavior<head>, h, &s.net, s.head_addr.id, "head");
  s.net.bind(s.head_addr.id, s.head_actor);

  node_agent::config nc;
  nc.id = node_;
  nc.self = s.node_addr;
  nc.head = s.head_addr;
  nc.total = std::move(*total);
  nc.max_idle_workers =
    k.max_idle_workers > 0 ? k.max_idle_workers : static_cast<int>(2 * std::max(1.0, cpus));
  auto n = std::make_shared<node_agent>(s.net, s, nc);
  n->start();  // queued for the head before anything else can reach it
  tsan::release(node_);
  s.node_actor = s.sys->spawn(component_behavior<node_agent>, n, &s.net, node_, "node");
  s.net.bind(node_, s.node_actor);

  struct core_shell {
    core_worker* core;
    void handle(protocol::message& m) {
      if (!std::holds_alternative<protocol::shutdown_component>(m)) core->handle(m);
    }
  };
  auto cs = std::make_shared<core_shell>(core_shell{core_.get()});
  tsan::release(core_addr.id);
  s.core_actor = s.sys->spawn(component_behavior<core_shell>, cs, &s.net, core_addr.id, "core");
  s.net.bind(core_addr.id, s.core_actor);
}

void embedded_runtime::stop() {
  if (!impl_ || !impl_->sys) return;
  auto& s = *impl_;
  core_->stop("celer::shutdown was called");
  const protocol::shutdown_component bye{"celer::shutdown"};
  (void)s.net.send(s.node_addr, bye);  // the node stops its workers
  (void)s.net.send(s.head_addr, bye);
  (void)s.net.send(core_->self(), bye);
  s.head_actor = nullptr;
  s.node_actor = nullptr;
  s.core_actor = nullptr;
  s.sys->await_all_actors_done();  // running tasks finish; every worker thread exits
  s.net.clear();
  s.sys.reset();  // joins the scheduler's threads
  s.cfg.reset();
  s.await_worker_threads();
}

embedded_runtime::~embedded_runtime() { stop(); }

} // namespace celer
