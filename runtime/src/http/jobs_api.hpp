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

#include <vector>

namespace celer::http {

[[nodiscard]] std::vector<route> job_routes(jobs::job_manager& jobs);

/// A job as the API writes it (Ray's JobDetails fields, plus celer's).
[[nodiscard]] nlohmann::json job_json(const jobs::job_record& r);

} // namespace celer::http
