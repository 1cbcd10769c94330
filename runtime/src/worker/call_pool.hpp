#pragma once
// The threads of an actor with max_concurrency above 1 or concurrency groups (worker.cpp):
// its calls, and its parked coroutine calls' resumptions, are posted to them.

#include "worker/worker.hpp"

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace celer {

/// Threads that run an actor's calls concurrently (max_concurrency > 1).
class worker::call_pool {
public:
  call_pool(int threads, worker_context ctx) {
    for (int i = 0; i < threads; ++i) {
      threads_.emplace_back([this, ctx]() mutable {
        current_worker_context() = &ctx;
        for (;;) {
          std::function<void()> job;
          {
            std::unique_lock lock(mutex_);
            cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
            if (jobs_.empty()) return;  // stop_ and drained
            job = std::move(jobs_.front());
            jobs_.pop_front();
          }
          job();
        }
      });
    }
  }
  ~call_pool() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  void post(std::function<void()> job) {
    {
      std::lock_guard lock(mutex_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }

private:
  std::mutex mutex_;  // guards jobs_, stop_
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

} // namespace celer
