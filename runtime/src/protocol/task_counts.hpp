#pragma once
// What a driver's tasks did, as its heartbeats tell the head (protocol::job_heartbeat):
// counts by state, a histogram of scheduling latency, and each task's changes of state.
// Part of the wire: changing a field changes celer::protocol_version.

#include "protocol/decode_budget.hpp"

#include <celer/codec.hpp>
#include <celer/ids.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace celer::protocol {

/// A task as its owner sees it: waiting (submitted, or queued for a retry), running (pushed
/// to a worker), finished, failed (for good).
enum class task_state : std::uint8_t { waiting, running, finished, failed };

} // namespace celer::protocol

MSGPACK_ADD_ENUM(celer::protocol::task_state);

namespace celer::protocol {

/// Upper bounds, in seconds, of the buckets of task_counts::latency (the last bucket, one
/// more, is everything above): Prometheus's histogram of scheduling latency.
inline constexpr std::array<double, 12> scheduling_latency_bounds{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05,
                                                                  0.1,    0.5,    1,     5,     10,   60};
/// The most task changes one heartbeat carries (task_counts::changes).
inline constexpr std::size_t max_task_changes = 20000;

/// One task's new state, as its owner saw it (task_counts::changes).
struct task_event {
  task_id task;
  /// The function's registered name: in the event of its submission only (empty after).
  std::string function;
  task_state state = task_state::waiting;
  std::int32_t attempt = 1;
  /// When: milliseconds since the Unix epoch.
  std::int64_t at_ms = 0;
  /// Running: the node of the worker it was pushed to (its id's short hex). Failed, or
  /// waiting for a retry: why.
  std::string detail;
  CELER_MSGPACK_DEFINE(task, function, state, attempt, at_ms, detail)
};

/// What a process's tasks (not actor calls) have done: totals since it started, and what
/// is waiting and running now.
struct task_counts {
  std::uint64_t submitted = 0;
  std::uint64_t finished = 0;
  /// Failed for good (retries spent, or none allowed).
  std::uint64_t failed = 0;
  /// Attempts that failed and ran again.
  std::uint64_t retried = 0;
  /// Now: waiting for a leased worker (or for a retry), and pushed to one.
  std::uint64_t waiting = 0;
  std::uint64_t running = 0;
  /// Scheduling latency, from submission to being sent to a worker, of each task's first
  /// attempt: counts per bucket of scheduling_latency_bounds (not cumulative; one more
  /// bucket than bounds), and their sum in microseconds.
  std::vector<std::uint64_t> latency;
  std::uint64_t latency_sum_us = 0;
  /// Each task's changes of state since the last heartbeat, oldest first, and how many
  /// more there were than max_task_changes (left out).
  std::vector<task_event> changes;
  std::uint64_t changes_dropped = 0;
  CELER_MSGPACK_DEFINE(submitted, finished, failed, retried, waiting, running, latency, latency_sum_us, changes,
                       changes_dropped)
};

} // namespace celer::protocol
