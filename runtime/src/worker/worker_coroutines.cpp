// The worker's coroutine calls (worker.hpp): where a parked call's wake-up goes, and what
// becomes of the calls still parked when the actor exits. worker.cpp starts and resumes them.
#include "worker/call_pool.hpp"
#include "worker/parked_call.hpp"
#include "worker/worker.hpp"

namespace celer {

void worker::post_resume(std::shared_ptr<parked_call> call) {
  if (call->pool != nullptr) {
    call->pool->post([this, call = std::move(call)] { resume(call); });
    return;
  }
  bool first = false;
  {
    std::lock_guard lock(coroutines_mutex_);
    first = resumes_.empty();
    resumes_.push_back(std::move(call));
  }
  // One wake for a batch: the worker takes all that are queued when it comes.
  if (!first) return;
  if (wake_) {
    wake_();
  } else {
    (void)net_.send(cfg_.self, protocol::worker_wake{});
  }
}

void worker::run_resumes() {
  std::deque<std::shared_ptr<parked_call>> ready;
  {
    std::lock_guard lock(coroutines_mutex_);
    ready.swap(resumes_);
  }
  for (auto& call : ready) resume(call);
}

void worker::abandon_coroutines(const std::string& why) {
  std::unordered_map<task_id, std::shared_ptr<parked_call>> left;
  {
    std::lock_guard lock(coroutines_mutex_);
    left.swap(coroutines_);
    resumes_.clear();
  }
  for (auto& [task, call] : left) {
    std::lock_guard run(call->run);
    if (call->ended) continue;
    call->ended = true;
    call->coro.reset();
    protocol::object_payload v;
    v.fail = failure(detail::failure_kind::actor_died, error_code::unavailable, call->spec.function,
                     "actor " + actor_.hex() + " exited while " + call->spec.function + " awaited a value" +
                       (why.empty() ? std::string() : ": " + why));
    send_result(call->spec, std::move(v));
    core_.forget_children(call->slot->task);
    calls_.finish(call->slot);
  }
}

} // namespace celer
