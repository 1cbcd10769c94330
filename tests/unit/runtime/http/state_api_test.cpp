// The state lists (http/state_api.cpp), route by route with a made-up head snapshot and
// status: what the admin sees, what a job's credential sees, and the filters.
#include "http/api.hpp"

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <regex>

using namespace celer;
using namespace celer::http;

namespace {

struct state_fixture {
  job_id mine = job_id::random(), other = job_id::random();
  node_id node = node_id::random();
  std::shared_ptr<head_snapshot> snap = std::make_shared<head_snapshot>();
  protocol::status_reply status;
  std::vector<route> routes;

  state_fixture() {
    auto add = [&](const job_id& job, protocol::actor_state state, const std::string& name) {
      actor_summary a;
      a.id = actor_id::random();
      a.job = job;
      a.state = state;
      a.name = name;
      a.class_name = "7counter";
      a.node = node;
      if (state == protocol::actor_state::dead) a.death_reason = "its process exited with status 3";
      snap->actors.push_back(a);
    };
    add(mine, protocol::actor_state::alive, "a");
    add(mine, protocol::actor_state::dead, "b");
    add(other, protocol::actor_state::alive, "c");
    protocol::placement_group_info g;
    g.id = placement_group_id::random();
    g.job = other;
    g.bundles.resize(2);
    g.nodes = {node, node_id{}};
    snap->groups.push_back(g);
    protocol::node_status n;
    n.node = node;
    n.queued = 3;
    n.workers = 2;
    n.store.capacity = 1000;
    n.store.bytes_in_memory = 250;
    n.store.objects_in_memory = 5;
    protocol::waiting_request w;
    w.function = "train";
    w.job = mine;
    w.waiting_ms = 1200;
    w.why = "no node has 8 GPU";
    n.waiting.push_back(w);
    status.nodes.push_back(n);
    auto src = std::make_shared<api_sources>();
    src->status = [this]() -> expected<protocol::status_reply> { return status; };
    src->snapshot = [this] { return std::shared_ptr<const head_snapshot>(snap); };
    routes = state_list_routes(src);
  }
  std::pair<int, nlohmann::json> get(const std::string& path, principal who, std::map<std::string, std::string> query = {}) {
    for (const auto& r : routes) {
      if (r.method != "GET" || !std::regex_match(path, std::regex(r.pattern))) continue;
      request req{.method = "GET", .path = path, .captures = {}, .query = std::move(query), .body = {}, .who = who};
      auto res = r.run(req);
      return {res.status, nlohmann::json::parse(res.body)};
    }
    FAIL("no route for " << path);
    return {};
  }
};

const principal admin{.admin = true, .job = {}};

} // namespace

TEST_CASE("the admin lists every actor with its state, class and why it died", "[http]") {
  state_fixture f;
  auto [status, j] = f.get("/api/actors", admin);
  CHECK(status == 200);
  CHECK(j["total"] == 3);
  CHECK(j["by_state"]["ALIVE"] == 2);
  CHECK(j["by_state"]["DEAD"] == 1);
  CHECK(j["actors"][0]["class_name"] == "counter");  // demangled
  bool saw_dead = false;
  for (const auto& a : j["actors"]) {
    if (a["state"] == "DEAD") {
      saw_dead = true;
      CHECK(a["death_cause"] == "its process exited with status 3");
    }
  }
  CHECK(saw_dead);
  auto [s2, limited] = f.get("/api/actors", admin, {{"limit", "1"}});
  CHECK(limited["actors"].size() == 1);
  CHECK(limited["truncated"] == true);
  auto [s3, filtered] = f.get("/api/actors", admin, {{"job", f.other.hex()}});
  CHECK(filtered["total"] == 1);
  CHECK(filtered["actors"][0]["name"] == "c");
}

TEST_CASE("a job's credential lists its own actors and groups only, and no shared store or queue", "[http]") {
  state_fixture f;
  const principal job{.admin = false, .job = f.mine};
  auto [status, j] = f.get("/api/actors", job);
  CHECK(status == 200);
  CHECK(j["total"] == 2);
  for (const auto& a : j["actors"]) CHECK(a["job_id"] == f.mine.hex());
  // Asking for another job's by filter changes nothing.
  auto [s2, other] = f.get("/api/actors", job, {{"job", f.other.hex()}});
  CHECK(other["total"] == 0);
  auto [s3, groups] = f.get("/api/placement_groups", job);
  CHECK(groups["total"] == 0);
  auto [s4, all_groups] = f.get("/api/placement_groups", admin);
  REQUIRE(all_groups["total"] == 1);
  CHECK(all_groups["placement_groups"][0]["bundles"][0]["node_id"] == f.node.hex());
  CHECK(all_groups["placement_groups"][0]["bundles"][1]["node_id"].is_null());
  CHECK(f.get("/api/objects", job).first == 403);
  CHECK(f.get("/api/tasks", job).first == 403);
}

TEST_CASE("objects and tasks sum the nodes' stores and queues, with why work waits", "[http]") {
  state_fixture f;
  auto [s1, objects] = f.get("/api/objects", admin);
  CHECK(objects["summary"]["capacity_bytes"] == 1000);
  CHECK(objects["summary"]["memory_bytes"] == 250);
  CHECK(objects["summary"]["objects_in_memory"] == 5);
  auto [s2, tasks] = f.get("/api/tasks", admin);
  CHECK(tasks["summary"]["QUEUED"] == 3);
  CHECK(tasks["summary"]["worker_processes"] == 2);
  REQUIRE(tasks["waiting"].size() == 1);
  CHECK(tasks["waiting"][0]["why"] == "no node has 8 GPU");
  CHECK(tasks["waiting"][0]["waiting_ms"] == 1200);
}

TEST_CASE("before the head's first snapshot the lists say to try again", "[http]") {
  state_fixture f;
  f.snap.reset();
  auto src = std::make_shared<api_sources>();
  src->snapshot = [] { return std::shared_ptr<const head_snapshot>(); };
  f.routes = state_list_routes(src);
  auto [status, j] = f.get("/api/actors", admin);
  CHECK(status == 503);
  CHECK_THAT(j["error"].get<std::string>(), Catch::Contains("try again"));
}
