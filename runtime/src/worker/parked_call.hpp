#pragma once
// A coroutine method's call between its start and its end, and the gate its wake-ups
// pass (the worker's side of <celer/future.hpp>; worker.cpp, worker_coroutines.cpp).

#include "worker/worker.hpp"

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace celer {

struct worker::resume_gate {
  std::mutex mutex;  // guards host
  worker* host = nullptr;
};

class worker::parked_call final : public coroutine_host, public std::enable_shared_from_this<parked_call> {
public:
  parked_call(worker& host, const protocol::task_spec& s, const detail::remote_entry& e, running_calls::slot* sl,
              call_pool* p)
    : spec(s), entry(&e), slot(sl), pool(p), host_(host) {}

  bool suspend(const object_ref<void>& ref, std::coroutine_handle<> h) override {
    next = h;
    const std::uint64_t gen = ++parks_;
    parked.store(gen, std::memory_order_release);
    const bool later = host_.core_.when_ready(ref, [gate = host_.gate_, me = shared_from_this(), gen] {
      std::lock_guard lock(gate->mutex);
      std::uint64_t expected = gen;
      if (gate->host != nullptr && me->parked.compare_exchange_strong(expected, 0)) gate->host->post_resume(me);
    });
    if (!later) {  // ready already: it goes on at once
      parked.store(0, std::memory_order_relaxed);
      next = {};
    }
    return later;
  }

  const protocol::task_spec spec;
  const detail::remote_entry* const entry;
  running_calls::slot* const slot;
  /// The pool it runs on, or null for the worker's own thread.
  call_pool* const pool;
  std::vector<detail::fetched> fetched;
  std::unique_ptr<detail::coroutine_call> coro;
  /// Held while it runs: its resumes never overlap (a pool's threads take turns).
  std::mutex run;
  // Under `run`:
  std::coroutine_handle<> next;  // the frame to resume
  bool ended = false;
  bool exit_requested = false;
  /// Its current park's number, 0 when not parked: the fill of what it awaits and a cancel
  /// race to resume it, and the one that swaps it to 0 does.
  std::atomic<std::uint64_t> parked{0};

private:
  worker& host_;
  std::uint64_t parks_ = 0;
};

} // namespace celer
