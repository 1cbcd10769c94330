// celer's HTTP endpoints on the head (api.hpp).
#include "http/api.hpp"

#include "http/prometheus.hpp"

#include <celer/version.hpp>

namespace celer::http {
namespace {

response admin_only(const request& r) {
  return json_response({{"error", "this endpoint needs the cluster's token; " + r.who.describe() + "'s credential sees only its own job"}},
                       403);
}

} // namespace

std::string json_text(const nlohmann::json& j) {
  // Job-supplied strings (task names, messages, logs) may hold any bytes: invalid UTF-8
  // becomes U+FFFD rather than an exception and a 500.
  return j.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

response json_response(const nlohmann::json& j, int status) { return {.status = status, .body = json_text(j)}; }

nlohmann::json resources_json(const protocol::resource_set& s) {
  auto j = nlohmann::json::object();
  for (const auto& [name, _] : s.amounts) j[name] = s.get(name);
  return j;
}

nlohmann::json nodes_json(const protocol::status_reply& s) {
  auto nodes = nlohmann::json::array();
  for (const auto& n : s.nodes) {
    nlohmann::json node{{"node_id", n.node.hex()},
                        {"address", n.addr.endpoint},
                        {"state", n.alive ? "ALIVE" : "DEAD"},
                        {"total", resources_json(n.total)},
                        {"available", resources_json(n.available)},
                        {"labels", n.labels},
                        {"workers", n.workers},
                        {"queued", n.queued},
                        {"object_store", {{"capacity_bytes", n.store.capacity},
                                          {"memory_bytes", n.store.bytes_in_memory},
                                          {"spilled_bytes", n.store.spilled_bytes},
                                          {"restored_bytes", n.store.restored_bytes}}}};
    if (!n.alive) node["dead_reason"] = n.dead_reason;
    auto gpus = nlohmann::json::array();
    for (std::size_t i = 0; i < n.gpus.size(); ++i) {
      const auto& d = n.gpus[i];
      nlohmann::json g{{"index", d.index}, {"model", d.model}, {"memory_bytes", d.memory_bytes}, {"declared", d.declared}};
      for (const auto& sample : n.gpu_samples)
        if (sample.index == d.index) {
          g["utilisation"] = sample.utilisation;
          g["memory_used_bytes"] = sample.memory_used_bytes;
          g["temperature_c"] = sample.temperature_c;
        }
      gpus.push_back(std::move(g));
    }
    node["gpus"] = std::move(gpus);
    nodes.push_back(std::move(node));
  }
  return nodes;
}

std::string metrics_text(const protocol::status_reply& s, const std::map<int, std::uint64_t>& responses,
                         std::size_t jobs_running, const std::map<std::string, std::size_t>& job_states,
                         const head_snapshot* snapshot) {
  prometheus::exposition e;
  double alive = 0, dead = 0;
  for (const auto& n : s.nodes) (n.alive ? alive : dead) += 1;
  e.gauge("celer_nodes", "Nodes the head knows, by state", {{{{"state", "alive"}}, alive}, {{{"state", "dead"}}, dead}});
  std::vector<prometheus::sample> up, total, available, workers, queued, memory, spilled, restored, capacity;
  std::vector<prometheus::sample> util, gpu_mem, temp;
  for (const auto& n : s.nodes) {
    const std::string id = n.node.short_hex();
    up.push_back({{{"node", id}}, n.alive ? 1.0 : 0.0});
    if (!n.alive) continue;
    for (const auto& [name, _] : n.total.amounts) total.push_back({{{"node", id}, {"resource", name}}, n.total.get(name)});
    for (const auto& [name, _] : n.available.amounts) available.push_back({{{"node", id}, {"resource", name}}, n.available.get(name)});
    workers.push_back({{{"node", id}}, static_cast<double>(n.workers)});
    queued.push_back({{{"node", id}}, static_cast<double>(n.queued)});
    capacity.push_back({{{"node", id}}, static_cast<double>(n.store.capacity)});
    memory.push_back({{{"node", id}}, static_cast<double>(n.store.bytes_in_memory)});
    spilled.push_back({{{"node", id}}, static_cast<double>(n.store.spilled_bytes)});
    restored.push_back({{{"node", id}}, static_cast<double>(n.store.restored_bytes)});
    for (const auto& g : n.gpu_samples) {
      const std::map<std::string, std::string> labels{{"node", id}, {"gpu", std::to_string(g.index)}};
      util.push_back({labels, g.utilisation});
      gpu_mem.push_back({labels, static_cast<double>(g.memory_used_bytes)});
      temp.push_back({labels, g.temperature_c});
    }
  }
  e.gauge("celer_node_up", "1 while the node is alive", up);
  e.gauge("celer_node_resource", "A live node's resources", total);
  e.gauge("celer_node_resource_available", "A live node's resources not held by tasks or actors", available);
  e.gauge("celer_node_workers", "Worker processes a node runs", workers);
  e.gauge("celer_node_queued", "Tasks and actors waiting in a node's queue", queued);
  e.gauge("celer_object_store_capacity_bytes", "A node's object store memory", capacity);
  e.gauge("celer_object_store_memory_bytes", "Bytes of objects in a node's store memory", memory);
  e.counter("celer_object_store_spilled_bytes_total", "Bytes a node's store spilled to disk", spilled);
  e.counter("celer_object_store_restored_bytes_total", "Bytes a node's store restored from disk", restored);
  e.gauge("celer_gpu_utilisation_ratio", "A GPU's busy fraction over the last sample period", util);
  e.gauge("celer_gpu_memory_used_bytes", "A GPU's memory in use", gpu_mem);
  e.gauge("celer_gpu_temperature_celsius", "A GPU's temperature", temp);
  if (snapshot != nullptr) {
    std::map<std::string, double> by_state{{"PENDING", 0}, {"ALIVE", 0}, {"RESTARTING", 0}, {"DEAD", 0}};
    for (const auto& a : snapshot->actors) by_state[actor_state_name(a.state)] += 1;
    std::vector<prometheus::sample> actors;
    for (const auto& [state, n] : by_state) actors.push_back({{{"state", state}}, n});
    e.gauge("celer_actors", "Actors by state", actors);
    e.counter("celer_actor_restarts_total", "Actor restarts since the head started",
              {{{}, static_cast<double>(snapshot->actor_restarts)}});
    const auto& hb = snapshot->heartbeats;
    const std::vector<double> hb_bounds(hb.bounds.begin(), hb.bounds.end());
    std::vector<std::uint64_t> hb_cumulative;
    std::uint64_t below = 0;
    for (std::size_t i = 0; i < hb.bounds.size(); ++i) hb_cumulative.push_back(below += hb.counts[i]);
    e.histogram("celer_head_heartbeat_seconds",
                "The head's time to handle one node heartbeat (its handler, after the transport decoded it)", {},
                hb_bounds, hb_cumulative, static_cast<double>(hb.sum_ns) / 1e9, hb.count);
  } else {
    e.gauge("celer_actors", "Actors by state", {{{{"state", "ALIVE"}}, static_cast<double>(s.actors_alive)},
                                                {{{"state", "PENDING"}}, static_cast<double>(s.actors_pending)}});
  }
  if (snapshot != nullptr) {
    const auto t = snapshot->all_tasks();
    auto d = [](std::uint64_t v) { return static_cast<double>(v); };
    e.gauge("celer_tasks", "Drivers' tasks now: WAITING for a leased worker, RUNNING on one",
            {{{{"state", "WAITING"}}, d(t.waiting)}, {{{"state", "RUNNING"}}, d(t.running)}});
    e.counter("celer_tasks_total", "Drivers' tasks by outcome: SUBMITTED, FINISHED, FAILED (for good)",
              {{{{"state", "SUBMITTED"}}, d(t.submitted)}, {{{"state", "FINISHED"}}, d(t.finished)},
               {{{"state", "FAILED"}}, d(t.failed)}});
    e.counter("celer_task_retries_total", "Task attempts that failed and ran again", {{{}, d(t.retried)}});
    std::vector<double> bounds(protocol::scheduling_latency_bounds.begin(), protocol::scheduling_latency_bounds.end());
    std::vector<std::uint64_t> cumulative;
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < bounds.size(); ++i) cumulative.push_back(sum += i < t.latency.size() ? t.latency[i] : 0);
    const std::uint64_t count = sum + (t.latency.size() > bounds.size() ? t.latency[bounds.size()] : 0);
    e.histogram("celer_task_scheduling_latency_seconds",
                "From a task's submission to its first attempt's dispatch to a leased worker", {}, bounds, cumulative,
                static_cast<double>(t.latency_sum_us) / 1e6, count);
  }
  e.gauge("celer_jobs_running", "Jobs whose driver is connected", {{{}, static_cast<double>(jobs_running)}});
  std::vector<prometheus::sample> submitted;
  for (const auto& [state, n] : job_states) submitted.push_back({{{"state", state}}, static_cast<double>(n)});
  e.gauge("celer_submitted_jobs", "Jobs submitted to the head (celer submit), by state", submitted);
  std::vector<prometheus::sample> codes;
  for (const auto& [code, count] : responses) codes.push_back({{{"code", std::to_string(code)}}, static_cast<double>(count)});
  e.counter("celer_http_responses_total", "HTTP responses the head sent, by status code", codes);
  return e.text();
}

std::vector<route> state_routes(api_sources sources) {
  auto src = std::make_shared<api_sources>(std::move(sources));
  std::vector<route> routes = state_list_routes(src);
  routes.push_back({"GET", "/api/version", [](const request& r) {
                      return json_response({{"version", "1"},
                                            {"celer_version", version_string},
                                            {"protocol_version", protocol_version},
                                            {"you", r.who.describe()}});
                    }});
  routes.push_back({"GET", "/api/nodes", [src](const request& r) {
                      if (!r.who.admin) return admin_only(r);
                      auto s = src->status();
                      if (!s) return json_response({{"error", s.error().message()}}, 503);
                      return json_response({{"nodes", nodes_json(*s)}});
                    }});
  routes.push_back({"GET", "/metrics", [src](const request& r) {
                      if (!r.who.admin) return admin_only(r);
                      auto s = src->status();
                      if (!s) return json_response({{"error", s.error().message()}}, 503);
                      return response{.status = 200,
                                      .content_type = "text/plain; version=0.0.4; charset=utf-8",
                                      .body = metrics_text(*s, src->responses ? src->responses() : std::map<int, std::uint64_t>{},
                                                           src->jobs ? src->jobs().size() : 0,
                                                           src->job_states ? src->job_states() : std::map<std::string, std::size_t>{},
                                                           src->snapshot ? src->snapshot().get() : nullptr),
                                      .headers = {}};
                    }});
  // The dashboard: its own script only (no inline script, nothing from elsewhere).
  const std::vector<std::pair<std::string, std::string>> page_headers{
    {"Content-Security-Policy",
     "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; form-action 'self'; "
     "frame-ancestors 'none'"},
    // same-origin, not no-referrer: under no-referrer a browser sends "Origin: null" with the
    // page's own form posts (logout), which the server refuses as cross-origin.
    {"Referrer-Policy", "same-origin"}};
  routes.push_back({"GET", "/", [page_headers](const request& r) {
                      // The session's CSRF token (hex digits only) in the logout form: the one
                      // state change the page makes, refused without it (server.hpp).
                      std::string page = dashboard_html();
                      const std::string slot = "{{csrf}}";
                      if (const auto at = page.find(slot); at != std::string::npos) page.replace(at, slot.size(), r.csrf);
                      return response{.status = 200, .content_type = "text/html; charset=utf-8", .body = std::move(page),
                                      .headers = page_headers};
                    }});
  routes.push_back({"GET", "/dashboard.js", [page_headers](const request&) {
                      return response{.status = 200, .content_type = "text/javascript; charset=utf-8", .body = dashboard_js(),
                                      .headers = page_headers};
                    }});
  return routes;
}

} // namespace celer::http
