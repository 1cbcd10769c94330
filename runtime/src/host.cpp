#include "host.hpp"

#include "log.hpp"
#include "transport/caf_types.hpp"
#include "transport/tsan.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

#include <sys/syscall.h>
#include <unistd.h>

namespace celer {
namespace {

/// Runs a component's `handle` for every protocol message; no exception escapes.
caf::behavior component_behavior(caf::event_based_actor* self, std::shared_ptr<component> c,
                                 local_transport* net, unique_id id, const char* what,
                                 std::function<void()> on_finished) {
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
      if (stop || c->finished()) {
        net->unbind(id);
        self->quit();
        if (on_finished) on_finished();
      }
      // The next message may run on another scheduler thread; order it after this one.
      tsan::release(id);
    },
  };
}

} // namespace

struct component_host::impl {
  std::unique_ptr<caf::actor_system_config> cfg;
  std::unique_ptr<caf::actor_system> sys;
  local_transport net;
  /// Kernel thread ids of the detached threads, so that stop() can wait until each has
  /// really exited (CAF detaches them and does not join).
  std::mutex threads_mutex;
  std::vector<pid_t> detached_threads;
  std::size_t detached_spawned = 0;  // guarded by threads_mutex
  std::mutex ticks_mutex;  // guards ticks_stop
  std::condition_variable ticks_cv;
  bool ticks_stop = false;
  std::thread ticker;

  static caf::behavior detached_behavior(caf::event_based_actor* self,
                                         std::shared_ptr<component> c, impl* host, unique_id id,
                                         const char* what, std::function<void()> on_finished) {
    {
      std::lock_guard lock(host->threads_mutex);
      host->detached_threads.push_back(static_cast<pid_t>(::syscall(SYS_gettid)));
    }
    return component_behavior(self, std::move(c), &host->net, id, what, std::move(on_finished));
  }

  /// Waits (boundedly) until every detached thread has left the process.
  void await_detached_threads() {
    std::lock_guard lock(threads_mutex);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (pid_t tid : detached_threads) {
      const std::string path = "/proc/self/task/" + std::to_string(tid);
      while (::access(path.c_str(), F_OK) == 0 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
    const bool spawned_any = detached_spawned > 0;
    detached_threads.clear();
    detached_spawned = 0;
    if (!spawned_any) return;  // other hosts' threads in this process are not ours to await
    // A component stopped before its thread ran its initialiser is not in the list, and a
    // thread can linger briefly after its actor finished; CAF names every detached actor's
    // thread "caf.actor".
    while (caf_threads_alive() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  static bool caf_threads_alive() {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/task", ec)) {
      std::ifstream comm(e.path() / "comm");
      std::string name;
      if (std::getline(comm, name) && name == "caf.actor") return true;
    }
    return false;
  }
};

component_host::component_host(int scheduler_threads) : impl_(std::make_unique<impl>()) {
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  impl_->cfg = std::make_unique<caf::actor_system_config>();
  impl_->cfg->set("scheduler.max-threads", scheduler_threads > 0
                                             ? scheduler_threads
                                             : static_cast<int>(std::max(2u, hw)));
  impl_->cfg->set("logger.verbosity", caf::atom("quiet"));
  // Work sharing waits on a condition variable when idle; work stealing polls, which costs
  // an idle daemon a few percent of a CPU.
  impl_->cfg->set("scheduler.policy", caf::atom("sharing"));
  impl_->sys = std::make_unique<caf::actor_system>(*impl_->cfg);
}

component_host::~component_host() { stop(); }

local_transport& component_host::local() noexcept { return impl_->net; }

void component_host::spawn(const unique_id& id, std::shared_ptr<component> c, const char* what) {
  tsan::release(id);
  auto a = impl_->sys->spawn(component_behavior, std::move(c), &impl_->net, id, what,
                             std::function<void()>{});
  impl_->net.bind(id, std::move(a));
}

void component_host::spawn_detached(const unique_id& id, std::shared_ptr<component> c,
                                    const char* what, std::function<void()> on_finished) {
  tsan::release(id);
  {
    std::lock_guard lock(impl_->threads_mutex);
    ++impl_->detached_spawned;
  }
  // Arguments go through spawn rather than a capture: CAF 0.17 dereferences a null
  // argument tuple when a spawned function takes none (UBSan reports it).
  auto a = impl_->sys->spawn<caf::detached>(impl::detached_behavior, std::move(c), impl_.get(),
                                            id, what, std::move(on_finished));
  impl_->net.bind(id, std::move(a));
}

void component_host::start_ticks(std::vector<address> targets, std::chrono::milliseconds interval) {
  impl_->ticker = std::thread([this, targets = std::move(targets), interval] {
    std::unique_lock lock(impl_->ticks_mutex);
    while (!impl_->ticks_cv.wait_for(lock, interval, [&] { return impl_->ticks_stop; })) {
      for (const auto& t : targets) (void)impl_->net.send(t, protocol::tick{});
    }
  });
}

void component_host::stop() {
  auto& s = *impl_;
  if (!s.sys) return;
  {
    std::lock_guard lock(s.ticks_mutex);
    s.ticks_stop = true;
  }
  s.ticks_cv.notify_all();
  if (s.ticker.joinable()) s.ticker.join();
  s.sys->await_all_actors_done();  // running calls finish; every detached thread exits
  s.net.clear();
  s.sys.reset();  // joins the scheduler's threads
  s.cfg.reset();
  s.await_detached_threads();
}

} // namespace celer
