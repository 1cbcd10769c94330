// `celer list nodes|actors|tasks|objects` (jobs_cli.hpp): the head's HTTP state lists as
// tables a person reads.
#include "cli/head_http.hpp"
#include "cli/jobs_cli.hpp"
#include "cli/terminal_text.hpp"

#include <algorithm>
#include <cctype>
#include <iomanip>
#include <iostream>
#include <sstream>

namespace celer::cli {
namespace {

/// "CPU=2 GPU=1 memory=23.5GiB" (a node's own "node:<id>" resource left out).
std::string resources_text(const nlohmann::json& r) {
  std::ostringstream out;
  for (const auto& [k, v] : r.items()) {
    if (k.starts_with("node:")) continue;
    out << (out.tellp() > 0 ? " " : "") << printable(k) << "=";
    if (k == "memory") {
      out << std::fixed << std::setprecision(1) << v.get<double>() / (1024.0 * 1024.0 * 1024.0) << "GiB" << std::defaultfloat;
    } else {
      out << v.get<double>();
    }
  }
  return out.str();
}

std::string mib(const nlohmann::json& bytes) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1) << bytes.get<double>() / (1024.0 * 1024.0) << " MiB";
  return out.str();
}

nlohmann::json get(const std::string& address, const std::string& path) {
  const auto link = find_head(address);
  return expect_json(client_for(link, std::chrono::seconds(30))->Get(path), link, "GET " + path);
}

} // namespace

int list_state(const std::string& what, const std::string& address, const task_filter& tasks) {
  if (what == "nodes") {
    auto j = get(address, "/api/nodes")["nodes"];
    std::cout << j.size() << " node(s)\n"
              << std::left << std::setw(34) << "NODE ID" << std::setw(7) << "STATE" << std::setw(24) << "ADDRESS"
              << "RESOURCES (available / total)\n";
    for (const auto& n : j) {
      std::cout << std::left << std::setw(34) << printable(n.value("node_id", "")) << std::setw(7)
                << printable(n.value("state", "")) << std::setw(24)
                << printable(n.value("address", "").substr(std::min<std::size_t>(6, n.value("address", "").size())))
                << resources_text(n["available"]) << " / " << resources_text(n["total"]) << "\n";
    }
    return 0;
  }
  if (what == "actors") {
    auto j = get(address, "/api/actors");
    std::cout << j.value("total", 0) << " actor(s)" << (j.value("truncated", false) ? " (the first 1000 shown)" : "") << "\n"
              << std::left << std::setw(34) << "ACTOR ID" << std::setw(20) << "CLASS" << std::setw(16) << "NAME"
              << std::setw(16) << "NAMESPACE" << std::setw(10) << "LIFETIME" << std::setw(11) << "STATE"
              << std::setw(10) << "JOB" << std::setw(10) << "NODE" << "RESTARTS\n";
    for (const auto& a : j["actors"]) {
      const std::string node = a["node_id"].is_string() ? a["node_id"].get<std::string>().substr(0, 8) : "-";
      std::cout << std::left << std::setw(34) << printable(a.value("actor_id", "")) << std::setw(20)
                << printable(a.value("class_name", "")) << std::setw(16)
                << (a.value("name", "").empty() ? "-" : printable(a.value("name", ""))) << std::setw(16)
                << (a["namespace"].is_string() ? printable(a["namespace"].get<std::string>()) : "-") << std::setw(10)
                << printable(a.value("lifetime", "job")) << std::setw(11)
                << printable(a.value("state", "")) << std::setw(10) << printable(a.value("job_id", "").substr(0, 8))
                << std::setw(10) << printable(node) << a.value("num_restarts", 0) << "\n";
      if (a["death_cause"].is_string()) std::cout << "    " << printable(a["death_cause"].get<std::string>()) << "\n";
    }
    return 0;
  }
  if (what == "tasks") {
    auto plain = [](const std::string& v) {
      return std::all_of(v.begin(), v.end(), [](unsigned char c) { return std::isalnum(c) != 0 || c == '_'; });
    };
    if (!plain(tasks.job)) fail("--job " + tasks.job + ": a job id is hex digits");
    if (!plain(tasks.state)) fail("--state " + tasks.state + ": WAITING, RUNNING, FINISHED or FAILED");
    std::string path = "/api/tasks?limit=" + std::to_string(tasks.limit);
    if (!tasks.job.empty()) path += "&job=" + tasks.job;
    if (!tasks.state.empty()) path += "&state=" + tasks.state;
    auto j = get(address, path);
    const auto& s = j["summary"];
    if (s.contains("SUBMITTED")) {
      std::cout << "tasks of drivers: " << s.value("SUBMITTED", 0) << " submitted, " << s.value("FINISHED", 0)
                << " finished, " << s.value("FAILED", 0) << " failed, " << s.value("RETRIED", 0) << " retried; now "
                << s.value("RUNNING", 0) << " running, " << s.value("WAITING", 0) << " waiting";
      if (s["mean_scheduling_latency_ms"].is_number())
        std::cout << "; mean scheduling latency " << std::fixed << std::setprecision(2)
                  << s["mean_scheduling_latency_ms"].get<double>() << " ms" << std::defaultfloat;
      std::cout << "\n";
      for (const auto& job : j["jobs"])
        std::cout << "  job " << printable(job.value("job_id", "").substr(0, 8)) << ": " << job.value("SUBMITTED", 0) << " submitted, "
                  << job.value("FINISHED", 0) << " finished, " << job.value("FAILED", 0) << " failed, "
                  << job.value("RUNNING", 0) << " running, " << job.value("WAITING", 0) << " waiting\n";
    }
    const auto total = j.value("total", std::size_t{0});
    if (total > 0) {
      std::cout << total << " recent task(s)" << (total > j["tasks"].size() ? ", the newest shown (--limit)" : "")
                << "\n  " << std::left << std::setw(34) << "TASK ID" << std::setw(20) << "FUNCTION" << std::setw(10)
                << "STATE" << std::setw(9) << "ATTEMPT" << std::setw(10) << "JOB"
                << "NODE\n";
      for (const auto& t : j["tasks"]) {
        std::cout << "  " << std::left << std::setw(34) << printable(t.value("task_id", "")) << std::setw(20)
                  << (t.value("name", "").empty() ? "?" : printable(t.value("name", ""))) << std::setw(10)
                  << printable(t.value("state", "")) << std::setw(9) << t.value("attempt_number", 0) << std::setw(10)
                  << printable(t.value("job_id", "").substr(0, 8))
                  << (t["node_id"].is_string() ? printable(t["node_id"].get<std::string>()) : "-") << "\n";
        if (t["error_message"].is_string())
          std::cout << "      " << printable(t["error_message"].get<std::string>()) << "\n";
      }
    }
    std::cout << "queued on nodes: " << s.value("QUEUED_ON_NODES", 0)
              << "; worker processes: " << s.value("worker_processes", 0) << "\n";
    for (const auto& w : j["waiting"]) {
      std::cout << "  " << printable(w.value("kind", "")) << " " << printable(w.value("function", "")) << " (job "
                << printable(w.value("job_id", "").substr(0, 8)) << ", needs "
                << resources_text(w["required_resources"]) << ") waiting " << w.value("waiting_ms", 0) << " ms"
                << (w.value("why", "").empty() ? "" : ": " + printable(w.value("why", ""))) << "\n";
    }
    std::cout << "(" << printable(j.value("note", "")) << ")\n";
    return 0;
  }
  if (what == "objects") {
    auto j = get(address, "/api/objects");
    const auto& s = j["summary"];
    std::cout << "object stores: " << mib(s["memory_bytes"]) << " of " << mib(s["capacity_bytes"]) << " in memory ("
              << s.value("objects_in_memory", 0) << " objects), " << s.value("objects_on_disk_only", 0)
              << " objects on disk only; spilled " << mib(s["spilled_bytes"]) << ", restored "
              << mib(s["restored_bytes"]) << "\n";
    for (const auto& n : j["nodes"]) {
      std::cout << "  node " << printable(n.value("node_id", "").substr(0, 8)) << ": " << mib(n["memory_bytes"])
                << " of " << mib(n["capacity_bytes"]) << ", " << n.value("objects_in_memory", 0) << " in memory, "
                << n.value("objects_on_disk_only", 0) << " on disk only\n";
    }
    return 0;
  }
  fail("celer list knows nodes, actors, tasks, objects, jobs and placement-groups, not " + what);
}

int kill_actor(const std::string& which, bool no_restart, const std::string& address) {
  // By its id (32 digits, or the first 8 or more), or its name; only a live one.
  auto j = get(address, "/api/actors?limit=10000");
  std::vector<nlohmann::json> found;
  for (const auto& a : j["actors"]) {
    if (a.value("state", "") == "DEAD") continue;
    const std::string id = a.value("actor_id", "");
    const bool by_id = which.size() >= 8 && id.starts_with(which);
    if (by_id || a.value("name", "") == which) found.push_back(a);
  }
  if (found.empty()) fail("no live actor has the id or name '" + which + "' (celer list actors shows them)");
  if (found.size() > 1) {
    std::string ids;
    for (const auto& a : found) ids += " " + a.value("actor_id", "");
    fail("'" + which + "' names " + std::to_string(found.size()) + " live actors (in different namespaces or jobs):" + ids +
         "; give the id");
  }
  const std::string id = found[0].value("actor_id", "");
  const auto link = find_head(address);
  const std::string path = "/api/actors/" + id + "/kill" + (no_restart ? "" : "?no_restart=false");
  (void)expect_json(client_for(link, std::chrono::seconds(30))->Post(path, "", "application/json"), link,
                    "killing actor " + id);
  std::cout << "actor " << id << " (" << printable(found[0].value("class_name", ""))
            << (found[0].value("name", "").empty() ? "" : ", named " + printable(found[0].value("name", ""))) << ") "
            << (no_restart ? "killed" : "killed; it restarts if it has restarts left") << "\n";
  return 0;
}

} // namespace celer::cli
