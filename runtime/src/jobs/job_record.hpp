#pragma once
// A submitted job as the head keeps it (jobs/job_manager.hpp) and writes it to its tables:
// fields are only ever appended, so a row an older head wrote still reads.

#include "protocol/messages.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace celer::jobs {

/// Ray's job states, with Ray's names (job_state_name).
enum class job_state : std::uint8_t { pending = 0, running, succeeded, failed, stopped };

/// "PENDING", "RUNNING", "SUCCEEDED", "FAILED", "STOPPED".
[[nodiscard]] const char* job_state_name(job_state s) noexcept;
[[nodiscard]] inline bool terminal(job_state s) noexcept { return s >= job_state::succeeded; }

struct job_record {
  job_id id;
  std::string submission_id;
  std::uint8_t state = 0;  // a job_state
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> metadata;
  double num_cpus = 0;
  double num_gpus = 0;
  std::int32_t priority = 0;
  /// The working directory's package digest, or empty.
  std::string package;
  /// Milliseconds since the Unix epoch; 0 while it has not happened.
  std::int64_t submitted_ms = 0;
  std::int64_t started_ms = 0;
  std::int64_t ended_ms = 0;
  /// The driver's exit status when it exited by itself; -1 otherwise (killed, never started).
  std::int32_t exit_code = -1;
  /// Why it is in its state ("exited with status 3", "stopped by the admin").
  std::string message;
  std::int32_t pid = 0;
  /// A stop was asked for (the exit then makes it STOPPED).
  bool stop_requested = false;
  /// Order of submission on this head and those before it (1, 2, ...).
  std::uint64_t sequence = 0;
  /// The placement group holding the entrypoint's resources, and its node (nil: none).
  placement_group_id group;
  node_id entrypoint_node;
  /// The shared namespaces the job is let into (celer submit --namespace); the first is
  /// its default (CELER_NAMESPACE).
  std::vector<std::string> namespaces;
  CELER_MSGPACK_DEFINE(id, submission_id, state, argv, env, metadata, num_cpus, num_gpus, priority, package,
                       submitted_ms, started_ms, ended_ms, exit_code, message, pid, stop_requested, sequence, group,
                       entrypoint_node, namespaces)

  [[nodiscard]] job_state status() const noexcept { return static_cast<job_state>(state); }
};

} // namespace celer::jobs
