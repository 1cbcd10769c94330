#include "worker/preemption.hpp"

#include "log.hpp"

namespace celer {

preemption_board& preemption_board::instance() {
  static preemption_board board;
  return board;
}

preemption_board::~preemption_board() {
  // Actors forget their entries as they stop; a callback still running at process exit
  // cannot be waited for here.
  for (auto& [id, e] : entries_) {
    if (e.runner.joinable()) e.runner.detach();
  }
}

void preemption_board::run(entry& e) {
  if (!e.cb) {
    if (auto done = std::exchange(e.done, nullptr)) done();
    return;
  }
  e.runner = std::thread([cb = e.cb, notice = *e.notice, ctx = e.ctx,
                          done = std::exchange(e.done, nullptr)]() mutable {
    current_worker_context() = &ctx;
    try {
      cb(notice);
    } catch (const std::exception& ex) {
      CELER_LOG(warn, "worker", std::string("an actor's preemption callback threw: ") + ex.what());
    } catch (...) {
      CELER_LOG(warn, "worker", "an actor's preemption callback threw");
    }
    current_worker_context() = nullptr;
    if (done) done();
  });
}

void preemption_board::set_callback(const actor_id& actor, callback cb, const worker_context& ctx) {
  std::lock_guard lock(mutex_);
  auto& e = entries_[actor];
  e.cb = std::move(cb);
  e.ctx = ctx;
}

void preemption_board::notify(const actor_id& actor, std::chrono::milliseconds grace,
                              std::string reason, std::function<void()> done) {
  std::lock_guard lock(mutex_);
  auto& e = entries_[actor];
  if (e.notice) return;  // told once
  e.notice = preemption{std::chrono::steady_clock::now() + grace, std::move(reason)};
  e.done = std::move(done);
  run(e);
}

void preemption_board::notify(const protocol::preempt_actor& notice, transport& net,
                              const address& node, const worker_id& worker) {
  notify(notice.actor, std::chrono::milliseconds(notice.grace_ms), notice.reason,
         [&net, node, actor = notice.actor, worker] {
           (void)net.send(node, protocol::preempt_ready{actor, worker});
         });
}

std::optional<preemption> preemption_board::notice(const actor_id& actor) const {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(actor);
  return it == entries_.end() ? std::nullopt : it->second.notice;
}

void preemption_board::forget(const actor_id& actor) {
  std::thread runner;
  {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(actor);
    if (it == entries_.end()) return;
    runner = std::move(it->second.runner);
    entries_.erase(it);
  }
  if (runner.joinable()) {
    if (runner.get_id() == std::this_thread::get_id()) {
      runner.detach();  // the callback itself stopped the actor
    } else {
      runner.join();
    }
  }
}

} // namespace celer
