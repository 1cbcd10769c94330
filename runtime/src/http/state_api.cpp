// The cluster's state lists on the head's HTTP server (api.hpp): actors and placement
// groups from the head's snapshot (head_snapshot.hpp), object stores and task queues from
// its status (the nodes' last heartbeats).
#include "http/api.hpp"

#include <algorithm>
#include <numeric>
#include <cstdlib>
#include <memory>

#include <cxxabi.h>

namespace celer::http {
namespace {

/// ?limit=N (default 1000, at most 10000) and ?job=ID filters, Ray's list API's shape.
std::size_t limit_of(const request& r) {
  auto it = r.query.find("limit");
  if (it == r.query.end()) return 1000;
  try {
    return std::clamp<std::size_t>(std::stoul(it->second), 1, 10000);
  } catch (const std::exception&) {
    return 1000;
  }
}

/// Whether the asker may see what job `owner` holds, and whether ?job= asks for it.
bool visible(const request& r, const job_id& owner) {
  if (!r.who.admin && owner != r.who.job) return false;
  auto it = r.query.find("job");
  return it == r.query.end() || it->second == owner.hex() || (it->second.size() == 8 && owner.hex().starts_with(it->second));
}

response snapshot_missing() {
  return json_response({{"error", "the head has not published its state yet (it does at each heartbeat): try again"}}, 503);
}

/// The class as C++ spells it ("counter", not the ABI's "7counter").
std::string demangled(const std::string& name) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 && d ? std::string(d.get()) : name;
}

} // namespace

nlohmann::json task_counts_json(const protocol::task_counts& c) {
  const std::uint64_t first_attempts = std::accumulate(c.latency.begin(), c.latency.end(), std::uint64_t{0});
  return {{"SUBMITTED", c.submitted},
          {"WAITING", c.waiting},
          {"RUNNING", c.running},
          {"FINISHED", c.finished},
          {"FAILED", c.failed},
          {"RETRIED", c.retried},
          {"mean_scheduling_latency_ms",
           first_attempts == 0 ? nlohmann::json(nullptr)
                               : nlohmann::json(static_cast<double>(c.latency_sum_us) / 1000.0 / static_cast<double>(first_attempts))}};
}

nlohmann::json actor_json(const actor_summary& a) {
  return {{"actor_id", a.id.hex()},
          {"class_name", demangled(a.class_name)},
          {"name", a.name},
          {"namespace", a.name.empty() ? nlohmann::json(nullptr)
                        : a.name_space.empty() ? nlohmann::json("job:" + a.job.hex().substr(0, 8))
                                               : nlohmann::json(a.name_space)},
          {"job_id", a.job.hex()},
          {"lifetime", a.detached ? "detached" : "job"},
          {"is_detached", a.detached},
          {"state", actor_state_name(a.state)},
          {"node_id", a.node.nil() ? nlohmann::json(nullptr) : nlohmann::json(a.node.hex())},
          {"worker", a.worker},
          {"num_restarts", a.restarts},
          {"max_restarts", a.max_restarts},
          {"death_cause", a.death_reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.death_reason)},
          {"required_resources", resources_json(a.resources)},
          {"priority", a.priority},
          {"preemptible", a.preemptible}};
}

std::vector<route> state_list_routes(std::shared_ptr<api_sources> src) {
  std::vector<route> routes;
  routes.push_back({"GET", "/api/actors/?", [src](const request& r) {
                      auto snap = src->snapshot ? src->snapshot() : nullptr;
                      if (!snap) return snapshot_missing();
                      const auto limit = limit_of(r);
                      auto list = nlohmann::json::array();
                      std::map<std::string, std::size_t> by_state;
                      std::size_t total = 0;
                      for (const auto& a : snap->actors) {
                        if (!visible(r, a.job)) continue;
                        ++total;
                        ++by_state[actor_state_name(a.state)];
                        if (list.size() < limit) list.push_back(actor_json(a));
                      }
                      return json_response({{"actors", list}, {"total", total}, {"by_state", by_state},
                                            {"truncated", total > list.size()}});
                    }});
  // Stops an actor, as celer::kill does (?no_restart=false lets one with restarts left
  // restart): the admin any, a job's credential its own job's. `celer actor kill` asks here.
  routes.push_back({"POST", "/api/actors/([0-9a-f]{32})/kill/?", [src](const request& r) {
                      auto snap = src->snapshot ? src->snapshot() : nullptr;
                      if (!snap) return snapshot_missing();
                      const auto id = actor_id::parse(r.captures.at(0));
                      const auto it = std::find_if(snap->actors.begin(), snap->actors.end(),
                                                   [&](const actor_summary& a) { return id && a.id == *id; });
                      // Another job's actor is not there, as far as this credential knows.
                      if (it == snap->actors.end() || (!r.who.admin && it->job != r.who.job)) {
                        return json_response({{"error", "no actor " + r.captures.at(0) + " (celer list actors)"}}, 404);
                      }
                      if (it->state == protocol::actor_state::dead) {
                        return json_response({{"error", "actor " + r.captures.at(0) + " is dead already"},
                                              {"death_cause", it->death_reason}}, 409);
                      }
                      auto nr = r.query.find("no_restart");
                      const bool no_restart = nr == r.query.end() || (nr->second != "false" && nr->second != "0");
                      const std::string why = std::string("killed through the HTTP API (") +
                                              (r.who.admin ? "the cluster's token" : "its job's credential") + ")";
                      if (!src->kill_actor || !src->kill_actor(*id, no_restart, why)) {
                        return json_response({{"error", "the head cannot be reached: try again"}}, 503);
                      }
                      return json_response({{"actor_id", r.captures.at(0)}, {"killed", true}, {"no_restart", no_restart}});
                    }});
  routes.push_back({"GET", "/api/placement_groups/?", [src](const request& r) {
                      auto snap = src->snapshot ? src->snapshot() : nullptr;
                      if (!snap) return snapshot_missing();
                      auto list = nlohmann::json::array();
                      for (const auto& g : snap->groups) {
                        if (!visible(r, g.job)) continue;
                        auto bundles = nlohmann::json::array();
                        for (std::size_t i = 0; i < g.bundles.size(); ++i) {
                          const bool placed = i < g.nodes.size() && !g.nodes[i].nil();
                          bundles.push_back({{"index", i},
                                             {"resources", resources_json(g.bundles[i].need)},
                                             {"node_id", placed ? nlohmann::json(g.nodes[i].hex()) : nlohmann::json(nullptr)}});
                        }
                        list.push_back({{"placement_group_id", g.id.hex()},
                                        {"name", g.name},
                                        {"job_id", g.job.hex()},
                                        {"state", group_state_name(g.state)},
                                        {"strategy", bundle_strategy_name(g.strategy)},
                                        {"bundles", bundles},
                                        {"why", g.why}});
                      }
                      return json_response({{"placement_groups", list}, {"total", list.size()}});
                    }});
  routes.push_back({"GET", "/api/objects/?", [src](const request& r) {
                      if (!r.who.admin)
                        return json_response({{"error", "object stores are shared by every job: the cluster's token sees them"}}, 403);
                      auto s = src->status();
                      if (!s) return json_response({{"error", s.error().message()}}, 503);
                      auto nodes = nlohmann::json::array();
                      protocol::store_counters sum;
                      for (const auto& n : s->nodes) {
                        if (!n.alive) continue;
                        const auto& c = n.store;
                        nodes.push_back({{"node_id", n.node.hex()},
                                         {"capacity_bytes", c.capacity},
                                         {"memory_bytes", c.bytes_in_memory},
                                         {"objects_in_memory", c.objects_in_memory},
                                         {"objects_on_disk_only", c.objects_on_disk_only},
                                         {"spilled_objects", c.spilled_objects},
                                         {"spilled_bytes", c.spilled_bytes},
                                         {"restored_objects", c.restored_objects},
                                         {"restored_bytes", c.restored_bytes},
                                         {"pulled_objects", c.pulled_objects},
                                         {"pulled_bytes", c.pulled_bytes}});
                        sum.capacity += c.capacity;
                        sum.bytes_in_memory += c.bytes_in_memory;
                        sum.objects_in_memory += c.objects_in_memory;
                        sum.objects_on_disk_only += c.objects_on_disk_only;
                        sum.spilled_bytes += c.spilled_bytes;
                        sum.restored_bytes += c.restored_bytes;
                      }
                      return json_response({{"nodes", nodes},
                                            {"summary",
                                             {{"capacity_bytes", sum.capacity},
                                              {"memory_bytes", sum.bytes_in_memory},
                                              {"objects_in_memory", sum.objects_in_memory},
                                              {"objects_on_disk_only", sum.objects_on_disk_only},
                                              {"spilled_bytes", sum.spilled_bytes},
                                              {"restored_bytes", sum.restored_bytes}}}});
                    }});
  routes.push_back({"GET", "/api/tasks/?", [src](const request& r) {
                      if (!r.who.admin)
                        return json_response({{"error", "node queues hold every job's work: the cluster's token sees them"}}, 403);
                      auto s = src->status();
                      if (!s) return json_response({{"error", s.error().message()}}, 503);
                      auto snap = src->snapshot ? src->snapshot() : nullptr;
                      std::uint64_t queued = 0, workers = 0;
                      auto waiting = nlohmann::json::array();
                      for (const auto& n : s->nodes) {
                        if (!n.alive) continue;
                        queued += n.queued;
                        workers += n.workers;
                        for (const auto& w : n.waiting)
                          waiting.push_back({{"node_id", n.node.hex()},
                                             {"function", w.function},
                                             {"kind", w.kind == protocol::task_kind::actor_creation ? "ACTOR_CREATION" : "TASK"},
                                             {"job_id", w.job.hex()},
                                             {"required_resources", resources_json(w.need)},
                                             {"waiting_ms", w.waiting_ms},
                                             {"priority", w.priority},
                                             {"why", w.why}});
                      }
                      nlohmann::json summary{{"QUEUED_ON_NODES", queued}, {"worker_processes", workers}};
                      auto jobs = nlohmann::json::array();
                      if (snap) {
                        summary.update(task_counts_json(snap->all_tasks()));
                        for (const auto& [job, c] : snap->job_tasks) {
                          auto j = task_counts_json(c);
                          j["job_id"] = job.hex();
                          jobs.push_back(std::move(j));
                        }
                      }
                      // The page of tasks: ?job=, ?state=, ?limit= (default 100), ?offset=.
                      task_table::query q;
                      if (auto j = r.query.find("job"); j != r.query.end()) q.job = j->second;
                      if (auto st = r.query.find("state"); st != r.query.end()) {
                        q.state = task_state_named(st->second);
                        if (!q.state)
                          return json_response({{"error", "state=" + st->second + ": a task is WAITING, RUNNING, FINISHED or FAILED"}}, 400);
                      }
                      q.limit = r.query.contains("limit") ? limit_of(r) : 100;
                      if (auto o = r.query.find("offset"); o != r.query.end()) {
                        try {
                          q.offset = std::stoul(o->second);
                        } catch (const std::exception&) {
                          return json_response({{"error", "offset=" + o->second + " is not a number"}}, 400);
                        }
                      }
                      auto rows = nlohmann::json::array();
                      task_table::page page;
                      if (snap && snap->task_list) page = snap->task_list->list(q);
                      for (const auto& t : page.rows) {
                        rows.push_back({{"task_id", t.task.hex()},
                                        {"job_id", t.job.hex()},
                                        {"name", t.function},
                                        {"state", task_state_name(t.state)},
                                        {"attempt_number", t.attempt},
                                        {"node_id", t.node.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.node)},
                                        {"error_message", t.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.error)},
                                        {"submitted_ms", t.submitted_ms},
                                        {"updated_ms", t.updated_ms}});
                      }
                      return json_response({{"summary", summary},
                                            {"jobs", jobs},
                                            {"tasks", rows},
                                            {"total", page.total},
                                            {"offset", q.offset},
                                            {"limit", q.limit},
                                            {"changes_dropped", page.changes_dropped},
                                            {"rows_dropped", page.rows_dropped},
                                            {"waiting", waiting},
                                            {"note", "SUBMITTED, FINISHED and FAILED count the tasks drivers submitted since the head "
                                                     "started, WAITING and RUNNING theirs now, as of their last heartbeat (not "
                                                     "actor calls, nor tasks that tasks submit); QUEUED_ON_NODES is what waits in "
                                                     "the nodes' queues for resources; `tasks` pages through each job's most recent "
                                                     "10,000 tasks, newest first"}});
                    }});
  return routes;
}

} // namespace celer::http
