#pragma once
// A process's home for components: a CAF actor system, the local_transport that reaches
// them, and the threads the runtime starts (worker threads, the timer). The embedded
// runtime hosts every component in one; in cluster mode each process hosts its own few.

#include "protocol/messages.hpp"
#include "transport/local_transport.hpp"

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

namespace celer {

/// What a host runs: one message at a time, on the host's threads.
class component {
public:
  virtual ~component() = default;
  virtual void handle(protocol::message& m) = 0;
  /// True once the component should stop receiving (its actor quits).
  [[nodiscard]] virtual bool finished() const { return false; }
};

/// Wraps any type with handle(message&) (and optionally finished()) as a component.
template <class C>
std::shared_ptr<component> as_component(std::shared_ptr<C> c) {
  struct adapter final : component {
    std::shared_ptr<C> c;
    explicit adapter(std::shared_ptr<C> x) : c(std::move(x)) {}
    void handle(protocol::message& m) override { c->handle(m); }
    [[nodiscard]] bool finished() const override {
      if constexpr (requires { c->finished(); }) {
        return c->finished();
      } else {
        return false;
      }
    }
  };
  return std::make_shared<adapter>(std::move(c));
}

class component_host {
public:
  /// `scheduler_threads` <= 0 picks max(2, hardware threads).
  explicit component_host(int scheduler_threads);
  ~component_host();
  component_host(const component_host&) = delete;
  component_host& operator=(const component_host&) = delete;

  [[nodiscard]] local_transport& local() noexcept;
  /// Runs `c` on the shared scheduler, reachable at `id`. `what` names it in logs.
  void spawn(const unique_id& id, std::shared_ptr<component> c, const char* what);
  /// Runs `c` on a thread of its own (workers: user code may block). `on_finished` runs on
  /// that thread once the component finished.
  void spawn_detached(const unique_id& id, std::shared_ptr<component> c, const char* what,
                      std::function<void()> on_finished = {});
  /// Sends protocol::tick to each of `targets` every `interval` until stop().
  void start_ticks(std::vector<address> targets, std::chrono::milliseconds interval);
  /// Waits until every component has quit (tell them to first), then joins every thread.
  void stop();

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace celer
