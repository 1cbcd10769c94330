#pragma once
// Each job's recent tasks as the head knows them: drivers' heartbeats carry their tasks'
// changes of state (protocol::task_counts::changes), the head applies them here, and
// /api/tasks and `celer list tasks` page through them. Bounded: the most recent
// `per_job` tasks of each job, and the lists of the `ended_jobs` jobs that ended last.
// Thread-safe: the head writes, the HTTP server reads.

#include "protocol/messages.hpp"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace celer {

class task_table {
public:
  struct row {
    task_id task;
    job_id job;
    std::string function;
    protocol::task_state state = protocol::task_state::waiting;
    std::int32_t attempt = 1;
    std::int64_t submitted_ms = 0;
    std::int64_t updated_ms = 0;
    /// The node it runs or ran on (short hex), as far as known.
    std::string node;
    /// Failed, or waiting for a retry: why.
    std::string error;
  };
  struct query {
    /// A job id's hex digits, or its first 8; empty: every job.
    std::string job;
    std::optional<protocol::task_state> state;
    std::size_t offset = 0;
    std::size_t limit = 100;
  };
  struct page {
    /// Rows matching the query, newest submission first, from `offset`.
    std::vector<row> rows;
    /// How many match in all.
    std::size_t total = 0;
    /// Changes drivers left out of their heartbeats, and rows dropped here for the bounds.
    std::uint64_t changes_dropped = 0;
    std::uint64_t rows_dropped = 0;
  };

  explicit task_table(std::size_t per_job = 10000, std::size_t ended_jobs = 20);

  /// A heartbeat's changes for `job` (a task first seen in a later state is listed too,
  /// its function unknown).
  void apply(const job_id& job, const std::vector<protocol::task_event>& changes, std::uint64_t dropped);
  /// The job ended: its list is kept among the last `ended_jobs`.
  void ended(const job_id& job);
  [[nodiscard]] page list(const query& q) const;

private:
  struct job_tasks {
    /// Rows by order of first sight (larger is newer), and where each task's row is.
    std::map<std::uint64_t, row> rows;
    std::unordered_map<task_id, std::uint64_t> by_task;
  };
  mutable std::mutex mutex_;
  std::size_t per_job_, ended_jobs_;
  std::uint64_t next_ = 0;
  std::unordered_map<job_id, job_tasks> jobs_;
  std::deque<job_id> ended_;
  std::uint64_t changes_dropped_ = 0, rows_dropped_ = 0;
};

/// "WAITING", "RUNNING", "FINISHED", "FAILED".
[[nodiscard]] const char* task_state_name(protocol::task_state s) noexcept;
/// The state a name gives (as task_state_name writes it, any case); none when unknown.
[[nodiscard]] std::optional<protocol::task_state> task_state_named(std::string name);

} // namespace celer
