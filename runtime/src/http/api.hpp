#pragma once
// celer's HTTP endpoints on the head (docs/dashboard.md), as routes for server.hpp: the
// version, the nodes, actors, placement groups, object stores and task queues, Prometheus
// metrics and the dashboard page. The jobs API is jobs_api.hpp.
//
//   auto routes = http::state_routes({.status = [&] { return gw->status(2s); },
//                                     .responses = [&] { return srv->responses_by_code(); }});

#include "head/head_snapshot.hpp"
#include "http/server.hpp"
#include "protocol/messages.hpp"

#include <celer/error.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace celer::http {

struct api_sources {
  /// The cluster's state (the head's status_reply).
  std::function<expected<protocol::status_reply>()> status;
  /// The HTTP responses sent so far by code (for /metrics); may be empty.
  std::function<std::map<int, std::uint64_t>()> responses;
  /// The jobs running now (for /metrics); may be empty.
  std::function<std::vector<job_id>()> jobs;
  /// The head's latest copy of its actors and groups (null before its first tick); may be
  /// empty.
  std::function<std::shared_ptr<const head_snapshot>()> snapshot;
  /// Submitted jobs by state ("RUNNING": 2, ...), for /metrics; may be empty.
  std::function<std::map<std::string, std::size_t>()> job_states;
  /// Stops an actor (head_gateway::kill_actor): its id, no_restart, why; false when the
  /// head cannot be reached. May be empty (POST /api/actors/<id>/kill then answers 503).
  std::function<bool(const actor_id&, bool, const std::string&)> kill_actor;
};

/// GET /api/version (anyone with a credential), GET /api/nodes and GET /metrics (the
/// admin: a job's credential sees only its own job), and the dashboard: GET / and
/// GET /dashboard.js (anyone with a credential; the page shows what the credential may see).
/// With them, state_list_routes'.
[[nodiscard]] std::vector<route> state_routes(api_sources sources);

/// GET /api/actors, /api/placement_groups (a job's credential: its own), /api/objects and
/// /api/tasks (the admin), and POST /api/actors/<id>/kill (the admin, or the actor's own
/// job): state_api.cpp.
[[nodiscard]] std::vector<route> state_list_routes(std::shared_ptr<api_sources> sources);

/// The dashboard page (GET /) and its script (GET /dashboard.js): dashboard.cpp.
[[nodiscard]] const char* dashboard_html();
[[nodiscard]] const char* dashboard_js();

/// The nodes as /api/nodes writes them.
[[nodiscard]] nlohmann::json nodes_json(const protocol::status_reply& s);
/// The Prometheus exposition /metrics serves.
[[nodiscard]] std::string metrics_text(const protocol::status_reply& s, const std::map<int, std::uint64_t>& responses,
                                       std::size_t jobs_running, const std::map<std::string, std::size_t>& job_states = {},
                                       const head_snapshot* snapshot = nullptr);
/// `j` as JSON text, any invalid UTF-8 in its strings replaced by U+FFFD (never a throw):
/// every JSON the head serves goes through here.
[[nodiscard]] std::string json_text(const nlohmann::json& j);
/// A JSON answer (application/json) with `status`: every route's way to answer.
[[nodiscard]] response json_response(const nlohmann::json& j, int status = 200);
/// Resource amounts as {"CPU": 2, "GPU": 1, ...}.
[[nodiscard]] nlohmann::json resources_json(const protocol::resource_set& s);

/// Tasks by state, as /api/tasks and the jobs API write them.
[[nodiscard]] nlohmann::json task_counts_json(const protocol::task_counts& c);
/// An actor as /api/actors writes it.
[[nodiscard]] nlohmann::json actor_json(const actor_summary& a);

} // namespace celer::http
