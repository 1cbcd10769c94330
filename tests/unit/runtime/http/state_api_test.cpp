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
    protocol::task_counts t;
    t.submitted = 5;
    t.finished = 3;
    t.running = 1;
    t.waiting = 1;
    t.latency.assign(protocol::scheduling_latency_bounds.size() + 1, 0);
    t.latency[0] = 4;
    t.latency_sum_us = 200;
    snap->job_tasks.emplace_back(mine, t);
    snap->ended_tasks.submitted = 2;
    snap->ended_tasks.failed = 2;
    auto src = std::make_shared<api_sources>();
    src->status = [this]() -> expected<protocol::status_reply> { return status; };
    src->snapshot = [this] { return std::shared_ptr<const head_snapshot>(snap); };
    src->kill_actor = [this](const actor_id& a, bool no_restart, const std::string& why) {
      kills.push_back({a, no_restart, why});
      return true;
    };
    routes = state_list_routes(src);
  }
  struct kill {
    actor_id actor;
    bool no_restart = true;
    std::string why;
  };
  std::vector<kill> kills;
  std::pair<int, nlohmann::json> post(const std::string& path, principal who, std::map<std::string, std::string> query = {}) {
    for (const auto& r : routes) {
      if (r.method != "POST") continue;
      std::smatch m;
      if (!std::regex_match(path, m, std::regex(r.pattern))) continue;
      std::vector<std::string> captures;
      for (std::size_t i = 1; i < m.size(); ++i) captures.push_back(m[i]);
      request req{.method = "POST", .path = path, .captures = captures, .query = std::move(query), .body = {}, .who = who};
      auto res = r.run(req);
      return {res.status, nlohmann::json::parse(res.body)};
    }
    FAIL("no route for " << path);
    return {};
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
  CHECK(tasks["summary"]["QUEUED_ON_NODES"] == 3);
  CHECK(tasks["summary"]["SUBMITTED"] == 7);  // a running job's 5 and the ended jobs' 2
  CHECK(tasks["summary"]["FINISHED"] == 3);
  CHECK(tasks["summary"]["FAILED"] == 2);
  CHECK(tasks["summary"]["RUNNING"] == 1);
  CHECK(tasks["summary"]["mean_scheduling_latency_ms"] == Approx(0.05));
  REQUIRE(tasks["jobs"].size() == 1);
  CHECK(tasks["jobs"][0]["job_id"] == f.mine.hex());
  CHECK(tasks["summary"]["worker_processes"] == 2);
  REQUIRE(tasks["waiting"].size() == 1);
  CHECK(tasks["waiting"][0]["why"] == "no node has 8 GPU");
  CHECK(tasks["waiting"][0]["waiting_ms"] == 1200);
}

TEST_CASE("the task list pages through each job's recent tasks, newest first, by job and state", "[http]") {
  state_fixture f;
  auto table = std::make_shared<task_table>();
  std::vector<task_id> ids;
  for (int i = 0; i < 5; ++i) {
    ids.push_back(task_id::random());
    table->apply(i < 3 ? f.mine : f.other, {{ids.back(), "f" + std::to_string(i), protocol::task_state::waiting, 1, 1000 + i, {}}}, 0);
  }
  table->apply(f.mine, {{ids[0], {}, protocol::task_state::running, 1, 2000, "0a1b2c3d"},
                        {ids[0], {}, protocol::task_state::failed, 1, 2001, "it threw: boom"}}, 7);
  f.snap->task_list = table;

  auto [s1, all] = f.get("/api/tasks", admin, {{"limit", "2"}});
  CHECK(s1 == 200);
  CHECK(all["total"] == 5);
  CHECK(all["changes_dropped"] == 7);
  REQUIRE(all["tasks"].size() == 2);
  CHECK(all["tasks"][0]["task_id"] == ids[4].hex());  // the newest first
  CHECK(all["tasks"][1]["task_id"] == ids[3].hex());
  auto [s2, next] = f.get("/api/tasks", admin, {{"limit", "2"}, {"offset", "2"}});
  REQUIRE(next["tasks"].size() == 2);
  CHECK(next["tasks"][0]["task_id"] == ids[2].hex());

  auto [s3, failed] = f.get("/api/tasks", admin, {{"state", "failed"}, {"job", f.mine.hex().substr(0, 8)}});
  REQUIRE(failed["tasks"].size() == 1);
  const auto& t = failed["tasks"][0];
  CHECK(t["task_id"] == ids[0].hex());
  CHECK(t["name"] == "f0");
  CHECK(t["state"] == "FAILED");
  CHECK(t["node_id"] == "0a1b2c3d");
  CHECK(t["error_message"] == "it threw: boom");
  CHECK(t["job_id"] == f.mine.hex());
  auto [s4, theirs] = f.get("/api/tasks", admin, {{"job", f.other.hex()}});
  CHECK(theirs["total"] == 2);

  auto [s5, bad] = f.get("/api/tasks", admin, {{"state", "SLEEPING"}});
  CHECK(s5 == 400);
  CHECK_THAT(bad["error"].get<std::string>(), Catch::Contains("WAITING, RUNNING, FINISHED or FAILED"));
  auto [s6, bad_offset] = f.get("/api/tasks", admin, {{"offset", "x"}});
  CHECK(s6 == 400);
  auto [s7, theirs_only] = f.get("/api/tasks", principal{.admin = false, .job = f.mine});
  CHECK(s7 == 403);  // the nodes' queues hold every job's work
}

TEST_CASE("the head's task table keeps each job's most recent tasks and the last ended jobs'", "[http][head]") {
  task_table table(3, 1);
  const job_id a = job_id::random(), b = job_id::random(), c = job_id::random();
  std::vector<task_id> ids;
  for (int i = 0; i < 5; ++i) {
    ids.push_back(task_id::random());
    table.apply(a, {{ids.back(), "f", protocol::task_state::waiting, 1, 100 + i, {}}}, 0);
  }
  auto p = table.list({});
  CHECK(p.total == 3);  // the oldest two went
  CHECK(p.rows_dropped == 2);
  CHECK(p.rows.front().task == ids[4]);
  // A task first seen running (its submission was in a heartbeat left out) is listed too.
  table.apply(b, {{task_id::random(), {}, protocol::task_state::running, 2, 500, "node1234"}}, 0);
  p = table.list({.job = b.hex()});
  REQUIRE(p.rows.size() == 1);
  CHECK(p.rows[0].function.empty());
  CHECK(p.rows[0].attempt == 2);
  table.ended(a);
  CHECK(table.list({.job = a.hex()}).total == 3);  // kept: the last ended job
  table.apply(c, {{task_id::random(), "g", protocol::task_state::waiting, 1, 600, {}}}, 0);
  table.ended(c);  // only one ended job is kept: a's list goes
  CHECK(table.list({.job = a.hex()}).total == 0);
  CHECK(table.list({.job = c.hex()}).total == 1);
  CHECK(task_state_named("running") == protocol::task_state::running);
  CHECK_FALSE(task_state_named("done"));
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

TEST_CASE("a job's string that is not UTF-8 is served with U+FFFD in its place, never a 500", "[http][state]") {
  // A task or actor name comes from the job: any bytes. json_response is every route's way out.
  const auto r = json_response({{"name", std::string("t\xff\xc3(ask")}, {"ok", "Grüße"}});
  CHECK(r.status == 200);
  CHECK(r.body == "{\"name\":\"t\xEF\xBF\xBD\xEF\xBF\xBD(ask\",\"ok\":\"Grüße\"}");
  CHECK(nlohmann::json::parse(r.body)["ok"] == "Grüße");
}

TEST_CASE("POST /api/actors/<id>/kill stops a live actor: the admin's any, a job's only its own", "[http]") {
  state_fixture f;
  const auto& mine_alive = f.snap->actors[0];
  const auto& mine_dead = f.snap->actors[1];
  const auto& others = f.snap->actors[2];
  const principal job{.admin = false, .job = f.mine};
  auto [status, j] = f.post("/api/actors/" + mine_alive.id.hex() + "/kill", job);
  CHECK(status == 200);
  CHECK(j["killed"] == true);
  REQUIRE(f.kills.size() == 1);
  CHECK(f.kills[0].actor == mine_alive.id);
  CHECK(f.kills[0].no_restart);
  CHECK(f.kills[0].why.find("its job's credential") != std::string::npos);
  // Another job's actor is not there for this credential; the admin reaches it.
  auto [s2, j2] = f.post("/api/actors/" + others.id.hex() + "/kill", job);
  CHECK(s2 == 404);
  CHECK(f.kills.size() == 1);
  auto [s3, j3] = f.post("/api/actors/" + others.id.hex() + "/kill", admin, {{"no_restart", "false"}});
  CHECK(s3 == 200);
  REQUIRE(f.kills.size() == 2);
  CHECK_FALSE(f.kills[1].no_restart);
  // A dead one, or one never known.
  auto [s4, j4] = f.post("/api/actors/" + mine_dead.id.hex() + "/kill", admin);
  CHECK(s4 == 409);
  CHECK(j4["death_cause"] == "its process exited with status 3");
  auto [s5, j5] = f.post("/api/actors/" + actor_id::random().hex() + "/kill", admin);
  CHECK(s5 == 404);
  CHECK(f.kills.size() == 2);
}

TEST_CASE("a named actor's namespace is listed: its job's own, or the shared one", "[http]") {
  state_fixture f;
  f.snap->actors[0].name_space = "team";
  auto [status, j] = f.get("/api/actors", admin);
  REQUIRE(status == 200);
  for (const auto& a : j["actors"]) {
    if (a["name"] == "a") CHECK(a["namespace"] == "team");
    if (a["name"] == "c") CHECK(a["namespace"] == "job:" + f.other.hex().substr(0, 8));
  }
}
