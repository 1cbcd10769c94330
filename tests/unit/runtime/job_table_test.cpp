// The head's job table (head/job_table.hpp) on its own, on the recording transport with a
// made-up clock: drivers' heartbeats keep their jobs alive and their rows written; a driver
// silent past the timeout is reported once and, speaking again, told why its job ended;
// the head's own stall counts against no driver; ended jobs' counts are kept; packages go
// only to live nodes; what a job reports is capped.
#include "fakes/memory_table_db.hpp"
#include "fakes/recording_transport.hpp"
#include "head/job_table.hpp"

#include <catch2/catch.hpp>

#include <map>

using namespace celer;
using namespace std::chrono_literals;

namespace {

struct table {
  fakes::recording_transport net;
  std::shared_ptr<fakes::memory_table_db::rows> rows = std::make_shared<fakes::memory_table_db::rows>();
  head_tables tables{std::make_shared<fakes::memory_table_db>(rows)};
  std::chrono::steady_clock::time_point now{};
  std::map<node_id, address> alive;
  job_table jobs{net, &tables, [this] { return now; }, [this](const node_id& n) -> std::optional<address> {
                   auto it = alive.find(n);
                   return it == alive.end() ? std::nullopt : std::optional<address>(it->second);
                 }};
  void heartbeat(const job_id& job, protocol::task_counts tasks = {}, address driver = {}) {
    protocol::job_heartbeat m{job, std::move(tasks), std::move(driver)};
    jobs.on(m);
  }
};

protocol::task_counts counts(std::uint64_t submitted, std::uint64_t running) {
  protocol::task_counts t;
  t.submitted = submitted;
  t.running = running;
  t.latency.assign(protocol::scheduling_latency_bounds.size() + 1, 0);
  return t;
}

} // namespace

TEST_CASE("a job lives while its driver heartbeats; a silent one is reported once, and its driver told why",
          "[head][jobs]") {
  table t;
  const job_id a = job_id::random(), b = job_id::random();
  const address driver{unique_id::random(), "tcp://10.0.0.5:5000"};
  t.heartbeat(a, {}, driver);
  t.heartbeat(b);
  CHECK(t.jobs.running(a));
  CHECK(t.jobs.jobs().size() == 2);
  auto state = t.tables.load();
  REQUIRE(state);
  CHECK(state->jobs.size() == 2);  // each job's row, written once

  t.now += 800ms;
  t.heartbeat(b);
  t.now += 400ms;  // a: 1.2 s silent, b: 0.4 s
  const auto quiet = t.jobs.silence_quiet(t.now, 1000ms);
  REQUIRE(quiet.size() == 1);
  CHECK(quiet[0] == a);
  CHECK(t.jobs.silence_quiet(t.now, 1000ms).size() == 1);  // still heard of until the head ends it
  t.jobs.ended(a);
  CHECK_FALSE(t.jobs.running(a));
  CHECK(t.jobs.silence_quiet(t.now, 1000ms).empty());
  state = t.tables.load();
  REQUIRE(state);
  CHECK(state->jobs == std::vector<job_id>{b});

  // Its driver speaks again: told why, and the job stays ended.
  t.heartbeat(a, {}, driver);
  auto told = t.net.take<protocol::job_ended>();
  REQUIRE(told.size() == 1);
  CHECK(told[0].first == driver);
  CHECK(told[0].second.job == a);
  CHECK(told[0].second.reason.find("sent no heartbeat for 1200 ms") != std::string::npos);
  CHECK_FALSE(t.jobs.running(a));
}

TEST_CASE("the head's own stall counts against no driver", "[head][jobs]") {
  table t;
  const job_id a = job_id::random();
  t.heartbeat(a);
  t.now += 5s;  // the head was away for 4.5 s of it
  t.jobs.credit(4500ms, t.now);
  CHECK(t.jobs.silence_quiet(t.now, 1000ms).empty());
  t.now += 1s;
  CHECK(t.jobs.silence_quiet(t.now, 1000ms).size() == 1);
}

TEST_CASE("an ended job's task counts join the ended totals; a running job's are its own", "[head][jobs]") {
  table t;
  const job_id a = job_id::random(), b = job_id::random();
  t.heartbeat(a, counts(10, 3));
  t.heartbeat(b, counts(4, 1));
  t.jobs.ended(a);
  head_snapshot s;
  t.jobs.fill(s);
  REQUIRE(s.job_tasks.size() == 1);
  CHECK(s.job_tasks[0].first == b);
  CHECK(s.ended_tasks.submitted == 10);
  CHECK(s.ended_tasks.running == 0);  // nothing of an ended job runs
  REQUIRE(s.ended_job_tasks.size() == 1);
  CHECK(s.ended_job_tasks[0].first == a);
  CHECK(s.tasks_of(a)->submitted == 10);
  CHECK(s.all_tasks().submitted == 14);
}

TEST_CASE("packages go to live nodes only, with the reader's answer", "[head][jobs]") {
  table t;
  const node_id live = node_id::random(), dead = node_id::random();
  t.alive[live] = address{live, "tcp://10.0.0.1:7000"};
  const job_id job = job_id::random();
  protocol::package_fetch before{"d1", job, live, false};
  t.jobs.on(before);
  auto r = t.net.take<protocol::package_data>();
  REQUIRE(r.size() == 1);
  CHECK(r[0].second.error == "this head keeps no working directories");
  t.jobs.serve_packages([&](const job_id& j, const std::string& d) -> expected<std::string> {
    if (j == job && d == "d1") return std::string("archive bytes");
    return error(error_code::not_found, "job " + j.short_hex() + " was not submitted with package " + d);
  });
  protocol::package_fetch ok{"d1", job, live, false}, unpacked{"d1", job, live, true},
    other{"d1", job_id::random(), live, false}, from_dead{"d1", job, dead, false};
  t.jobs.on(ok);
  t.jobs.on(unpacked);
  t.jobs.on(other);
  t.jobs.on(from_dead);
  r = t.net.take<protocol::package_data>();
  REQUIRE(r.size() == 3);  // none to the dead node
  CHECK(r[0].first == t.alive[live]);
  CHECK(std::string(r[0].second.archive) == "archive bytes");
  CHECK(r[1].second.archive.empty());
  CHECK(r[1].second.error.empty());
  CHECK(r[2].second.error.find("was not submitted with package d1") != std::string::npos);
}

TEST_CASE("what a job reports is capped: names, details, rows, histogram buckets", "[head][jobs]") {
  protocol::task_counts t;
  t.changes.resize(protocol::max_task_changes + 5);
  t.changes[0].function = std::string(1000, 'f');
  t.changes[0].detail = std::string(5000, 'd');
  t.latency.assign(protocol::scheduling_latency_bounds.size() + 10, 1);
  job_table::cap_report(t);
  CHECK(t.changes.size() == protocol::max_task_changes);
  CHECK(t.changes_dropped == 5);
  CHECK(t.changes[0].function.size() == 256);
  CHECK(t.changes[0].function.ends_with("...[truncated]"));
  CHECK(t.changes[0].detail.size() == 1024);
  CHECK(t.latency.size() == protocol::scheduling_latency_bounds.size() + 1);
  // A name cut inside a UTF-8 character loses the whole character.
  protocol::task_counts u;
  u.changes.resize(1);
  u.changes[0].function = std::string(241, 'x') + std::string(20, '\xc3');
  for (std::size_t i = 241; i < u.changes[0].function.size(); i += 2) u.changes[0].function[i + 1] = '\xa9';
  job_table::cap_report(u);
  const auto& f = u.changes[0].function;
  CHECK(f.ends_with("...[truncated]"));
  const auto body = f.substr(0, f.size() - 14);
  CHECK((body.size() - 241) % 2 == 0);  // whole two-byte characters only
}
