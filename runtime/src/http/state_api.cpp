// The cluster's state lists on the head's HTTP server (api.hpp): actors and placement
// groups from the head's snapshot (head_snapshot.hpp), object stores and task queues from
// its status (the nodes' last heartbeats).
#include "http/api.hpp"

#include <algorithm>
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

nlohmann::json actor_json(const actor_summary& a) {
  return {{"actor_id", a.id.hex()},
          {"class_name", demangled(a.class_name)},
          {"name", a.name},
          {"job_id", a.job.hex()},
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
                      return json_response({{"summary", {{"QUEUED", queued}, {"worker_processes", workers}}},
                                            {"waiting", waiting},
                                            {"note", "QUEUED counts what waits in the nodes' queues for resources, as of their last "
                                                     "heartbeat; per-task states of running work are not reported to the head yet"}});
                    }});
  return routes;
}

} // namespace celer::http
