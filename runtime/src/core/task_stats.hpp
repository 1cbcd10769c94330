#pragma once
// What a process's tasks have done, in totals: submitted, finished, failed for good, attempts
// retried, and the scheduling latency of each task's first attempt (from its submission to
// its push to a worker) as a histogram over protocol::scheduling_latency_bounds. The task
// submitter counts into it; its counts() copies it into the task_counts a driver's job
// heartbeat carries to the head.
//
//   task_stats stats;
//   stats.count_submitted();
//   stats.count_scheduled(std::chrono::microseconds(300));  // its first attempt was pushed
//   protocol::task_counts c;
//   stats.report(c);  // c.submitted == 1, c.latency[1] == 1, c.latency_sum_us == 300
//
// Threads: none of its own; its owner's lock guards it (task_submitter::mutex_).

#include "protocol/task_counts.hpp"

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace celer {

class task_stats {
public:
  void count_submitted() noexcept { ++submitted_; }
  void count_finished() noexcept { ++finished_; }
  /// A task failed for good (its retries spent, or none allowed).
  void count_failed() noexcept { ++failed_; }
  /// An attempt failed and the task runs again.
  void count_retry() noexcept { ++retries_; }
  /// A task's first attempt was pushed to a worker `waited` after its submission (a wait
  /// below zero, from a clock that stepped back, counts as none).
  void count_scheduled(std::chrono::microseconds waited) noexcept;

  [[nodiscard]] std::uint64_t retries() const noexcept { return retries_; }
  /// Copies the totals and the latency histogram into `c` (its other fields untouched).
  void report(protocol::task_counts& c) const;

  /// Buckets of the latency histogram: one per bound of scheduling_latency_bounds, and one
  /// for everything above the last.
  static constexpr std::size_t latency_buckets = protocol::scheduling_latency_bounds.size() + 1;

private:
  std::uint64_t submitted_ = 0;
  std::uint64_t finished_ = 0;
  std::uint64_t failed_ = 0;
  std::uint64_t retries_ = 0;
  /// Counts per bucket (not cumulative), and the sum of the latencies in microseconds.
  std::array<std::uint64_t, latency_buckets> latency_{};
  std::uint64_t latency_sum_us_ = 0;
};

} // namespace celer
