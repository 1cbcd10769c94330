#pragma once
// The jobs API on the head (docs/jobs.md), shaped like Ray's so that a Ray user's curl
// commands work with the port changed:
//
//   POST   /api/jobs/                 submit: {"entrypoint": "...", "runtime_env": {...}, ...}
//   GET    /api/jobs/                 every job the credential may see
//   GET    /api/jobs/{id}             one (by submission id or job id)
//   GET    /api/jobs/{id}/logs        {"logs": "..."}
//   GET    /api/jobs/{id}/logs/tail   the log as it grows, streamed until the job ends
//   POST   /api/jobs/{id}/stop        {"stopped": true|false}
//   DELETE /api/jobs/{id}             {"deleted": true} (an ended job: record, log, folder)
//   GET    /api/packages/{digest}     200 if the head holds the working directory, else 404
//   PUT    /api/packages/{digest}     upload one (jobs/package.hpp's format)
//
// The admin (the token) may do all of it; a job's credential sees and stops its own job.

#include "http/server.hpp"
#include "jobs/job_manager.hpp"

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <vector>

namespace celer::http {

/// What a job's driver last said its tasks did (null when it said nothing: not a celer
/// program, not connected yet, or ended).
using task_counts_source = std::function<std::optional<protocol::task_counts>(const job_id&)>;

[[nodiscard]] std::vector<route> job_routes(jobs::job_manager& jobs, task_counts_source tasks = {});

/// A job as the API writes it (Ray's JobDetails fields, plus celer's: with `tasks`, its
/// tasks by state).
[[nodiscard]] nlohmann::json job_json(const jobs::job_record& r, const std::optional<protocol::task_counts>& tasks = {});

} // namespace celer::http
