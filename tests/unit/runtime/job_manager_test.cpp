// Submitted jobs on the head (jobs/job_manager.hpp), call by call: a fake launcher stands
// for the driver processes, a fake clock for time, tables in memory for RocksDB; the last
// cases start real processes through the real launcher.
#include "http/jobs_api.hpp"
#include "jobs/driver_process.hpp"
#include "jobs/entrypoint.hpp"
#include "jobs/job_manager.hpp"
#include "jobs/package.hpp"

#include "fakes/memory_table_db.hpp"

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <fstream>
#include <future>
#include <regex>
#include <mutex>
#include <set>
#include <thread>

#include <sys/wait.h>

using namespace celer;
using namespace celer::jobs;

namespace {

class fake_launcher final : public driver_launcher {
public:
  std::vector<driver_spec> started;
  std::vector<std::pair<int, int>> signals;  // (pid, signal)
  std::map<int, std::function<void(int, int)>> running;
  std::optional<error> refuse;
  int next_pid = 1000;

  expected<int> start(const driver_spec& spec, std::function<void(int, int)> exited) override {
    if (refuse) return *refuse;
    started.push_back(spec);
    running[next_pid] = std::move(exited);
    return next_pid++;
  }
  void signal(int pid, int sig) override { signals.emplace_back(pid, sig); }
  /// The driver `pid` exits with `status` (waitpid's encoding).
  void finish(int pid, int status) {
    auto cb = std::move(running.at(pid));
    running.erase(pid);
    cb(pid, status);
  }
};

int exit_status(int code) { return code << 8; }        // WIFEXITED, WEXITSTATUS == code
int killed_by(int sig) { return sig; }                 // WIFSIGNALED, WTERMSIG == sig

struct fixture {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("celer-jobs-test-" + unique_id::random().short_hex());
  std::shared_ptr<fakes::memory_table_db::rows> rows = std::make_shared<fakes::memory_table_db::rows>();
  fake_launcher launcher;
  std::chrono::system_clock::time_point now{std::chrono::hours(24 * 365 * 50)};
  std::vector<std::string> events;
  std::unique_ptr<job_manager> jm;
  const asker admin{.admin = true, .job = {}};

  fixture() { open(); }
  ~fixture() {
    jm.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  job_manager_config config() {
    auto creds = credentials::for_cluster("job-manager-test-token");
    REQUIRE(creds);
    return {.jobs_dir = dir / "jobs",
            .packages_dir = dir / "packages",
            .cluster_address = "127.0.0.1:6380",
            .creds = *creds,
            .encrypt = true,
            .node_ip = "127.0.0.1",
            .base_env = {"PATH=/usr/bin:/bin", "HOME=/root"},
            .stop_grace = std::chrono::milliseconds(5000)};
  }
  /// What the head says of entrypoint reservations (the reserve hook is set when this is).
  std::optional<std::string> refuse_reservation;
  bool reservations = false;
  std::mutex placed_mutex;
  std::optional<node_id> placed;  // where the group is reserved, once it is
  std::vector<placement_group_id> groups;

  /// A head (re)started on the same tables.
  void open() {
    jm.reset();
    job_hooks hooks{.started = [this](const job_id& j, const std::vector<std::string>& namespaces) {
                      std::string e = "started " + j.hex();
                      for (const auto& n : namespaces) e += " " + n;
                      event(e);
                    },
                    .alive = [this](const job_id& j) { event("alive " + j.hex()); },
                    .ended = [this](const job_id& j) { event("ended " + j.hex()); }};
    if (reservations) {
      hooks.reserve = [this](const job_id&, double, double) -> expected<placement_group_id> {
        if (refuse_reservation) return error(error_code::resource_exhausted, *refuse_reservation);
        groups.push_back(placement_group_id::random());
        return groups.back();
      };
      hooks.reserved = [this](const placement_group_id&, std::string& why) -> std::optional<node_id> {
        std::lock_guard lock(placed_mutex);
        if (!placed) why = "no node has 1 GPU free now";
        return placed;
      };
    }
    jm = std::make_unique<job_manager>(config(), launcher, std::move(hooks), std::make_shared<fakes::memory_table_db>(rows),
                                       [this] { return now; });
  }
  std::mutex events_mutex;
  std::condition_variable event_seen;
  void event(std::string e) {
    std::lock_guard lock(events_mutex);
    events.push_back(std::move(e));
    event_seen.notify_all();
  }
  /// Waits (at most 10 s) for a hook to report `e`, which it may do from the manager's thread.
  bool await_event(const std::string& e) {
    std::unique_lock lock(events_mutex);
    return event_seen.wait_for(lock, std::chrono::seconds(10),
                               [&] { return std::find(events.begin(), events.end(), e) != events.end(); });
  }
  bool saw(const std::string& e) {
    std::lock_guard lock(events_mutex);
    return std::find(events.begin(), events.end(), e) != events.end();
  }
  /// Waits (at most 10 s) for job `id` to leave `state`.
  job_record wait_past(const std::string& id, job_state state) {
    for (int i = 0; i < 200; ++i) {
      auto r = jm->find(id, admin);
      REQUIRE(r);
      if (r->status() != state) return *r;
      jm->wait_for_change(id, 1u << 30, std::chrono::milliseconds(50));
    }
    FAIL("job " << id << " stayed " << job_state_name(state));
    return {};
  }
  job_record submit(std::vector<std::string> argv, std::string sid = {}) {
    submit_request r;
    r.argv = std::move(argv);
    r.submission_id = std::move(sid);
    auto rec = jm->submit(r, admin);
    REQUIRE(rec);
    return *rec;
  }
  std::string env_of(const driver_spec& s, const std::string& name) {
    for (const auto& e : s.env)
      if (e.starts_with(name + "=")) return e.substr(name.size() + 1);
    return "<unset>";
  }
};

} // namespace

TEST_CASE("a submitted job's driver starts with its job's credential and never the token", "[jobs]") {
  fixture f;
  auto rec = f.submit({"python3", "train.py", "--lr", "0.1"}, "my-run");
  CHECK(rec.status() == job_state::running);
  CHECK(rec.submission_id == "my-run");
  CHECK(rec.pid == 1000);
  REQUIRE(f.launcher.started.size() == 1);
  const auto& spec = f.launcher.started[0];
  CHECK(spec.argv == std::vector<std::string>{"python3", "train.py", "--lr", "0.1"});
  CHECK(spec.cwd == f.dir / "jobs" / rec.id.hex() / "wd");
  CHECK(std::filesystem::is_directory(spec.cwd));
  CHECK(f.env_of(spec, "CELER_JOB_ID") == rec.id.hex());
  CHECK(f.env_of(spec, "CELER_ADDRESS") == "127.0.0.1:6380");
  CHECK(f.env_of(spec, "CELER_SUBMISSION_ID") == "my-run");
  CHECK(f.env_of(spec, "PATH") == "/usr/bin:/bin");
  // The job's credential: what the cluster derives for this job, 64 hex digits.
  auto creds = credentials::for_cluster("job-manager-test-token");
  CHECK(f.env_of(spec, "CELER_JOB_CREDENTIAL") == *creds->job_secret_hex(rec.id));
  for (const auto& e : spec.env) CHECK(e.find("job-manager-test-token") == std::string::npos);
  CHECK(f.env_of(spec, "CELER_TOKEN") == "<unset>");
  CHECK(f.events == std::vector<std::string>{"started " + rec.id.hex()});
}

TEST_CASE("drivers started once the head serves HTTP are told its address, and a TLS head's certificate in their own folder",
          "[jobs]") {
  fixture f;
  (void)f.submit({"true"});
  CHECK(f.env_of(f.launcher.started.at(0), "CELER_HEAD_URL") == "<unset>");
  const auto cert = f.dir / "head-cert.pem";
  std::ofstream(cert) << "-----BEGIN CERTIFICATE-----\n";
  f.jm->serve_http("https://127.0.0.1:8265", cert);
  (void)f.submit({"true"});
  const auto& spec = f.launcher.started.at(1);
  CHECK(f.env_of(spec, "CELER_HEAD_URL") == "https://127.0.0.1:8265");
  const auto copy = spec.tmpdir / "head_cert.pem";
  CHECK(f.env_of(spec, "CELER_TLS_CA") == copy.string());
  std::ifstream in(copy);
  std::string line;
  std::getline(in, line);
  CHECK(line == "-----BEGIN CERTIFICATE-----");
}

TEST_CASE("a job's state follows its driver's exit: SUCCEEDED, FAILED with the code, the head told", "[jobs]") {
  fixture f;
  auto ok = f.submit({"true"});
  auto bad = f.submit({"false"});
  f.now += std::chrono::seconds(3);
  f.launcher.finish(ok.pid, exit_status(0));
  f.launcher.finish(bad.pid, exit_status(3));
  auto a = f.jm->find(ok.submission_id, f.admin);
  auto b = f.jm->find(bad.id.hex(), f.admin);  // by job id too
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->status() == job_state::succeeded);
  CHECK(a->exit_code == 0);
  CHECK(a->ended_ms - a->started_ms == 3000);
  CHECK(b->status() == job_state::failed);
  CHECK(b->exit_code == 3);
  CHECK(b->message == "the driver exited with status 3");
  CHECK(std::count(f.events.begin(), f.events.end(), "ended " + bad.id.hex()) == 1);
  // What the driver left in its process group is killed with it.
  CHECK(std::find(f.launcher.signals.begin(), f.launcher.signals.end(), std::pair{bad.pid, SIGKILL}) !=
        f.launcher.signals.end());
  auto counts = f.jm->counts();
  CHECK(counts[job_state::succeeded] == 1);
  CHECK(counts[job_state::failed] == 1);
  CHECK(counts[job_state::running] == 0);
}

TEST_CASE("stopping a job sends SIGTERM, then SIGKILL once the grace has passed, and ends STOPPED", "[jobs]") {
  fixture f;
  auto rec = f.submit({"sleep", "1000"});
  auto stopped = f.jm->stop(rec.submission_id, f.admin);
  REQUIRE(stopped);
  CHECK(*stopped);
  CHECK(f.launcher.signals == std::vector<std::pair<int, int>>{{rec.pid, SIGTERM}});
  f.now += std::chrono::milliseconds(4999);
  f.jm->tick();
  CHECK(f.launcher.signals.size() == 1);
  CHECK(std::count(f.events.begin(), f.events.end(), "alive " + rec.id.hex()) == 1);  // still running: heartbeats
  f.now += std::chrono::milliseconds(1);
  f.jm->tick();
  REQUIRE(f.launcher.signals.size() == 2);
  CHECK(f.launcher.signals[1] == std::pair{rec.pid, SIGKILL});
  f.launcher.finish(rec.pid, killed_by(SIGKILL));
  auto r = f.jm->find(rec.submission_id, f.admin);
  CHECK(r->status() == job_state::stopped);
  CHECK(r->exit_code == -1);
  CHECK(r->message == "stopped: the driver was killed by signal 9 (SIGKILL)");
  // Stopping an ended job says it was not running.
  auto again = f.jm->stop(rec.submission_id, f.admin);
  REQUIRE(again);
  CHECK_FALSE(*again);
  f.jm->tick();
  CHECK(std::count(f.events.begin(), f.events.end(), "alive " + rec.id.hex()) == 2);  // none after it ended
}

TEST_CASE("a job's credential sees and stops only its own job; only the admin submits and deletes", "[jobs]") {
  fixture f;
  auto mine = f.submit({"a"});
  auto other = f.submit({"b"});
  const asker me{.admin = false, .job = mine.id};
  auto seen = f.jm->list(me);
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].id == mine.id);
  CHECK(f.jm->list(f.admin).size() == 2);
  CHECK(f.jm->find(other.submission_id, me).error().code() == error_code::not_found);
  CHECK(f.jm->stop(other.submission_id, me).error().code() == error_code::not_found);
  CHECK(f.jm->logs(other.submission_id, me).error().code() == error_code::not_found);
  CHECK(f.launcher.signals.empty());
  auto own = f.jm->stop(mine.submission_id, me);
  REQUIRE(own);
  CHECK(*own);
  submit_request r;
  r.argv = {"x"};
  CHECK(f.jm->submit(r, me).error().code() == error_code::permission_denied);
  f.launcher.finish(mine.pid, killed_by(SIGTERM));
  CHECK(f.jm->remove(mine.submission_id, me).error().code() == error_code::permission_denied);
  CHECK(f.jm->remove(mine.submission_id, f.admin));
}

TEST_CASE("bad submissions are refused with what to fix, and nothing is started", "[jobs]") {
  fixture f;
  submit_request r;
  CHECK(f.jm->submit(r, f.admin).error().code() == error_code::invalid_argument);
  r.argv = {"prog"};
  r.env = {{"CELER_TOKEN", "x"}};
  auto e = f.jm->submit(r, f.admin);
  CHECK(e.error().code() == error_code::invalid_argument);
  CHECK_THAT(e.error().message(), Catch::Contains("CELER_TOKEN"));
  r.env = {{"BAD NAME", "x"}};
  CHECK(f.jm->submit(r, f.admin).error().code() == error_code::invalid_argument);
  r.env = {};
  r.submission_id = "../../etc";
  CHECK(f.jm->submit(r, f.admin).error().code() == error_code::invalid_argument);
  r.submission_id = "";
  r.package = "0123456789abcdef0123456789abcdef";
  CHECK(f.jm->submit(r, f.admin).error().code() == error_code::not_found);
  r.package = "";
  r.num_gpus = -1;
  CHECK(f.jm->submit(r, f.admin).error().code() == error_code::invalid_argument);
  r.num_gpus = 0;
  for (const char* bad : {"", "*", "a\nb"}) {
    r.namespaces = {bad};
    auto n = f.jm->submit(r, f.admin);
    CHECK(n.error().code() == error_code::invalid_argument);
    CHECK_THAT(n.error().message(), Catch::Contains("namespace"));
  }
  r.namespaces = {};
  CHECK(f.launcher.started.empty());
  CHECK(f.jm->list(f.admin).empty());
  f.submit({"prog"}, "once");
  r.num_gpus = 0;
  r.submission_id = "once";
  CHECK(f.jm->submit(r, f.admin).error().code() == error_code::already_exists);
}

TEST_CASE("a driver that cannot start makes a FAILED record that says why", "[jobs]") {
  fixture f;
  f.launcher.refuse = error(error_code::not_found, "cannot run './nope': No such file or directory");
  submit_request r;
  r.argv = {"./nope"};
  auto rec = f.jm->submit(r, f.admin);
  REQUIRE(rec);
  CHECK(rec->status() == job_state::failed);
  CHECK(rec->message == "cannot run './nope': No such file or directory");
  // The head was told it started and then that it ended: its key is let in and out again.
  REQUIRE(f.events.size() == 2);
  CHECK(f.events[1] == "ended " + rec->id.hex());
}

TEST_CASE("job records survive a head restart; a job that ran under the old head is FAILED with the reason", "[jobs]") {
  fixture f;
  auto done = f.submit({"ok"}, "done");
  f.launcher.finish(done.pid, exit_status(0));
  auto running = f.submit({"long"}, "running");
  f.open();  // a new head on the same tables
  auto list = f.jm->list(f.admin);
  REQUIRE(list.size() == 2);
  CHECK(list[0].submission_id == "done");
  CHECK(list[0].status() == job_state::succeeded);
  CHECK(list[1].submission_id == "running");
  CHECK(list[1].status() == job_state::failed);
  CHECK_THAT(list[1].message, Catch::Contains("head stopped"));
  // And the change is written back: a third head reads the same.
  f.open();
  CHECK(f.jm->find("running", f.admin)->status() == job_state::failed);
  REQUIRE(f.jm->remove("done", f.admin));
  f.open();
  CHECK(f.jm->list(f.admin).size() == 1);
  (void)running;
}

TEST_CASE("a running job cannot be deleted; an ended one goes with its folder", "[jobs]") {
  fixture f;
  auto rec = f.submit({"x"});
  auto e = f.jm->remove(rec.submission_id, f.admin);
  CHECK(e.error().code() == error_code::failed_precondition);
  CHECK_THAT(e.error().message(), Catch::Contains("celer job stop"));
  const auto folder = f.dir / "jobs" / rec.id.hex();
  CHECK(std::filesystem::exists(folder));
  f.launcher.finish(rec.pid, exit_status(1));
  REQUIRE(f.jm->remove(rec.submission_id, f.admin));
  CHECK_FALSE(std::filesystem::exists(folder));
  CHECK(f.jm->find(rec.submission_id, f.admin).error().code() == error_code::not_found);
}

TEST_CASE("an uploaded working directory is checked against its digest and unpacked for the driver", "[jobs]") {
  fixture f;
  const auto src = f.dir / "src";
  std::filesystem::create_directories(src / "data");
  std::ofstream(src / "data" / "a.txt") << "hello";
  auto archive = pack_directory(src);
  REQUIRE(archive);
  const auto digest = package_digest(*archive);
  CHECK_FALSE(f.jm->has_package(digest));
  auto wrong = f.jm->put_package(std::string(32, '0'), *archive, f.admin);
  CHECK(wrong.error().code() == error_code::invalid_argument);
  auto damaged = *archive;
  damaged[damaged.size() / 2] ^= 1;
  CHECK(f.jm->put_package(package_digest(damaged), damaged, f.admin).error().code() == error_code::invalid_argument);
  CHECK(f.jm->put_package(digest, *archive, asker{.admin = false, .job = job_id::random()}).error().code() ==
        error_code::permission_denied);
  REQUIRE(f.jm->put_package(digest, *archive, f.admin));
  CHECK(f.jm->has_package(digest));
  submit_request r;
  r.argv = {"cat", "data/a.txt"};
  r.package = digest;
  auto rec = f.jm->submit(r, f.admin);
  REQUIRE(rec);
  CHECK(rec->package == digest);
  std::ifstream in(f.launcher.started.at(0).cwd / "data" / "a.txt");
  std::string text;
  in >> text;
  CHECK(text == "hello");
}

TEST_CASE("real drivers: an argument vector runs without a shell, its output is the job's log, its code is kept", "[jobs]") {
  fixture f;
  driver_process_launcher real;
  std::promise<void> ended;
  std::atomic<int> ends{0};
  job_manager jm(f.config(), real,
                 job_hooks{.started = {}, .alive = {}, .ended = [&](const job_id&) {
                             if (ends++ == 0) ended.set_value();
                           }},
                 nullptr);
  submit_request r;
  // A shell would expand $HOME and run the second command; an argument vector prints them.
  r.argv = {"/bin/echo", "$HOME;", "echo", "pwned", "`id`"};
  auto rec = jm.submit(r, f.admin);
  REQUIRE(rec);
  CHECK(rec->status() != job_state::failed);
  REQUIRE(ended.get_future().wait_for(std::chrono::seconds(30)) == std::future_status::ready);
  auto done = jm.find(rec->submission_id, f.admin);
  CHECK(done->status() == job_state::succeeded);
  CHECK(done->exit_code == 0);
  CHECK(*jm.logs(rec->submission_id, f.admin) == "$HOME; echo pwned `id`\n");
  CHECK(*jm.logs(rec->submission_id, f.admin, 7) == "echo pwned `id`\n");
  // In pages: the bytes asked for, the next offset, the size; past the end, nothing.
  auto page = jm.log_range(rec->submission_id, f.admin, 7, 5);
  REQUIRE(page);
  CHECK(page->text == "echo ");
  CHECK(page->offset == 7);
  CHECK(page->size == 23);
  CHECK(jm.log_range(rec->submission_id, f.admin, 100, 5)->text.empty());

  r.argv = {"/nonexistent/program"};
  auto missing = jm.submit(r, f.admin);
  REQUIRE(missing);
  CHECK(missing->status() == job_state::failed);
  CHECK(missing->message == "cannot run '/nonexistent/program': No such file or directory (on the head's machine)");
}

TEST_CASE("real drivers: a stop reaches the driver's children, and shutdown stops what runs", "[jobs]") {
  fixture f;
  driver_process_launcher real;
  job_manager jm(f.config(), real, job_hooks{}, nullptr);
  submit_request r;
  // sh as the job's own program (explicitly asked for): it starts a child and waits.
  r.argv = {"/bin/sh", "-c", "sleep 1000 & echo $!; wait"};
  auto rec = jm.submit(r, f.admin);
  REQUIRE(rec);
  REQUIRE(rec->status() == job_state::running);
  for (int i = 0; i < 600 && jm.logs(rec->submission_id, f.admin)->empty(); ++i)
    jm.wait_for_change(rec->submission_id, 0, std::chrono::milliseconds(50));
  const int child = std::stoi(*jm.logs(rec->submission_id, f.admin));
  CHECK(child > 0);
  REQUIRE(*jm.stop(rec->submission_id, f.admin));
  for (int i = 0; i < 600 && !terminal(jm.find(rec->submission_id, f.admin)->status()); ++i)
    jm.wait_for_change(rec->submission_id, 1u << 30, std::chrono::milliseconds(50));
  auto r2 = jm.find(rec->submission_id, f.admin);
  CHECK(r2->status() == job_state::stopped);
  // The driver's own child went with it: gone, or a zombie waiting for init.
  auto dead = [](int pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string pid_field, comm, state;
    return !(stat >> pid_field >> comm >> state) || state == "Z";
  };
  for (int i = 0; i < 100 && !dead(child); ++i) jm.wait_for_change(rec->submission_id, 1u << 30, std::chrono::milliseconds(50));
  CHECK(dead(child));
  r.argv = {"/bin/sleep", "1000"};
  auto second = jm.submit(r, f.admin);
  REQUIRE(second);
  jm.shutdown(std::chrono::seconds(5));
  CHECK(jm.find(second->submission_id, f.admin)->status() == job_state::stopped);
}

TEST_CASE("entrypoints split like a shell's words but refuse what only a shell would do", "[jobs]") {
  CHECK(*split_entrypoint(R"(python3 train.py --name "my run" --x 'a b' c\ d)") ==
        std::vector<std::string>{"python3", "train.py", "--name", "my run", "--x", "a b", "c d"});
  CHECK(*split_entrypoint(R"(echo "say \"hi\"")") == std::vector<std::string>{"echo", R"(say "hi")"});
  CHECK(*split_entrypoint("sh -c 'ls | wc -l; echo $HOME'") == std::vector<std::string>{"sh", "-c", "ls | wc -l; echo $HOME"});
  for (const char* bad : {"a | b", "a; b", "a && b", "a > f", "echo $HOME", "echo `id`", "echo \"$HOME\"", "ls *.txt",
                          "(a)", "a\nb", "", "   ", "echo 'open", "~/bin/x", "x\\"}) {
    INFO(bad);
    auto r = split_entrypoint(bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().code() == error_code::invalid_argument);
  }
  CHECK_THAT(split_entrypoint("a | b").error().message(), Catch::Contains("sh -c"));
  const std::vector<std::string> words{"prog", "two words", "it's", "$HOME", "", "a\\b", "plain"};
  CHECK(join_entrypoint(words) == R"(prog 'two words' 'it'\''s' '$HOME' '' 'a\b' plain)");
  CHECK(*split_entrypoint(join_entrypoint(words)) == words);
}

TEST_CASE("the jobs API takes Ray's submission body and refuses what it cannot honour, by name", "[jobs]") {
  fixture f;
  auto routes = http::job_routes(*f.jm);
  auto call = [&](const std::string& method, const std::string& path, const std::string& body, bool admin = true) {
    for (const auto& r : routes) {
      if (r.method != method || !std::regex_match(path, std::regex(r.pattern))) continue;
      std::smatch m;
      std::regex_match(path, m, std::regex(r.pattern));
      http::request req{.method = method, .path = path, .captures = {}, .query = {}, .body = body,
                        .who = http::principal{.admin = admin, .job = admin ? job_id{} : job_id::random()}};
      for (std::size_t i = 1; i < m.size(); ++i) req.captures.push_back(m[i].str());
      auto res = r.run(req);
      return std::pair{res.status, nlohmann::json::parse(res.body)};
    }
    FAIL("no route for " << method << " " << path);
    return std::pair{0, nlohmann::json()};
  };
  // Ray's shape: a string entrypoint split into words, env_vars, metadata, a submission id.
  auto [status, made] = call("POST", "/api/jobs/",
                             R"({"entrypoint": "python3 train.py --name 'my run'", "submission_id": "ray-style",
                                 "runtime_env": {"env_vars": {"LR": "0.1"}}, "metadata": {"owner": "ana"}})");
  CHECK(status == 200);
  CHECK(made["job_id"] == "ray-style");
  CHECK(made["submission_id"] == "ray-style");
  REQUIRE(f.launcher.started.size() == 1);
  CHECK(f.launcher.started[0].argv == std::vector<std::string>{"python3", "train.py", "--name", "my run"});
  CHECK(f.env_of(f.launcher.started[0], "LR") == "0.1");
  auto [s2, details] = call("GET", "/api/jobs/ray-style", "");
  CHECK(s2 == 200);
  CHECK(details["status"] == "RUNNING");
  CHECK(details["metadata"]["owner"] == "ana");
  CHECK(details["entrypoint"] == "python3 train.py --name 'my run'");
  CHECK(details["driver_exit_code"].is_null());

  const std::vector<std::pair<std::string, std::string>> refused{
    {R"({"entrypoint": "echo hi; rm -rf /"})", "never through a shell"},
    {R"({"entrypoint": "x", "runtime_env": {"pip": ["requests"]}})", "runtime_env.pip is not supported"},
    {R"({"entrypoint": "x", "runtime_env": {"working_dir": "/etc"}})", "the head never reads a path"},
    {R"({"entrypoint": "x", "runtime_env": {"working_dir": "https://example.com/x.zip"}})", "the head never reads a path"},
    {R"({"entrypoint": "x", "colour": "blue"})", "unknown field 'colour'"},
    {R"({"entrypoint": 42})", "entrypoint must be a string"},
    {R"({"entrypoint_argv": "not a list"})", "wrong type"},
    {R"({})", "no entrypoint"},
    {R"([1, 2])", "JSON object"},
    {R"({"entrypoint": )", "not JSON"},
    {R"({"entrypoint": "x", "entrypoint_resources": {"TPU": 1}})", "not supported by celer yet"},
  };
  for (const auto& [body, why] : refused) {
    INFO(body);
    auto [code, j] = call("POST", "/api/jobs/", body);
    CHECK(code == 400);
    CHECK_THAT(j["error"].get<std::string>(), Catch::Contains(why));
  }
  CHECK(f.launcher.started.size() == 1);  // nothing else started
  CHECK(call("POST", "/api/jobs/", R"({"entrypoint": "x", "submission_id": "ray-style"})").first == 409);
  CHECK(call("POST", "/api/jobs/", R"({"entrypoint": "x"})", /*admin=*/false).first == 403);
  CHECK(call("GET", "/api/jobs/nope", "").first == 404);
  CHECK(call("GET", "/api/jobs/ray-style", "", /*admin=*/false).first == 404);  // another job's: as if absent
  CHECK(call("DELETE", "/api/jobs/ray-style", "").first == 400);                // still running
  auto [s3, stopped] = call("POST", "/api/jobs/ray-style/stop", "");
  CHECK(s3 == 200);
  CHECK(stopped["stopped"] == true);
  f.launcher.finish(f.launcher.running.begin()->first, killed_by(SIGTERM));
  CHECK(call("GET", "/api/jobs/ray-style", "").second["status"] == "STOPPED");
  CHECK(call("DELETE", "/api/jobs/ray-style", "").second["deleted"] == true);
  CHECK(call("GET", "/api/jobs/", "").second.empty());
}

TEST_CASE("entrypoint resources are reserved first: refused when never possible, PENDING until held, then the driver starts",
          "[jobs]") {
  fixture f;
  f.reservations = true;
  f.open();
  submit_request r;
  r.argv = {"trainer"};
  r.num_gpus = 1;
  f.refuse_reservation = "placement group entrypoint can never be placed: no node has 1 GPU";
  auto refused = f.jm->submit(r, f.admin);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code() == error_code::invalid_argument);
  CHECK(refused.error().message() ==
        "the entrypoint's resources (0 CPU, 1 GPU) can never be reserved: placement group entrypoint can never be placed: no "
        "node has 1 GPU");
  CHECK(f.jm->list(f.admin).empty());
  CHECK(f.events.size() == 2);  // the head heard of the job, then of its end (its group goes)

  f.refuse_reservation.reset();
  r.submission_id = "waits";
  auto rec = f.jm->submit(r, f.admin);
  REQUIRE(rec);
  CHECK(rec->status() == job_state::pending);
  CHECK(rec->group == f.groups.back());
  CHECK(f.launcher.started.empty());
  // It says why it waits, and its heartbeats keep the head's group for it.
  for (int i = 0; i < 100 && f.jm->find("waits", f.admin)->message.find("no node has") == std::string::npos; ++i)
    f.jm->wait_for_change("waits", 1u << 30, std::chrono::milliseconds(20));
  CHECK(f.jm->find("waits", f.admin)->message ==
        "waiting for the entrypoint's resources (0 CPU, 1 GPU): no node has 1 GPU free now");
  f.jm->tick();
  CHECK(f.saw("alive " + rec->id.hex()));
  const node_id gpu_node = node_id::random();
  {
    std::lock_guard lock(f.placed_mutex);
    f.placed = gpu_node;
  }
  auto running = f.wait_past("waits", job_state::pending);
  CHECK(running.status() == job_state::running);
  CHECK(running.entrypoint_node == gpu_node);
  REQUIRE(f.launcher.started.size() == 1);
  CHECK(f.env_of(f.launcher.started[0], "CELER_ENTRYPOINT_NODE") == gpu_node.hex());
  CHECK(f.env_of(f.launcher.started[0], "CELER_ENTRYPOINT_PLACEMENT_GROUP") == rec->group.hex());
}

TEST_CASE("a job stopped while it waits for its resources ends STOPPED without starting", "[jobs]") {
  fixture f;
  f.reservations = true;
  f.open();
  submit_request r;
  r.argv = {"trainer"};
  r.num_cpus = 4;
  r.submission_id = "never-placed";
  auto rec = f.jm->submit(r, f.admin);
  REQUIRE(rec);
  auto stopped = f.jm->stop("never-placed", f.admin);
  REQUIRE(stopped);
  CHECK(*stopped);
  auto end = f.wait_past("never-placed", job_state::pending);
  CHECK(end.status() == job_state::stopped);
  CHECK(end.message == "stopped before it started (it was waiting for the entrypoint's resources)");
  CHECK(f.launcher.started.empty());
  CHECK(f.await_event("ended " + rec->id.hex()));
  // And one still waiting when the head stops ends STOPPED too.
  r.submission_id = "at-shutdown";
  REQUIRE(f.jm->submit(r, f.admin));
  f.jm->shutdown(std::chrono::seconds(1));
  CHECK(f.jm->find("at-shutdown", f.admin)->status() == job_state::stopped);
}

TEST_CASE("a log page never ends inside a UTF-8 character, unless that is all it could hold", "[jobs]") {
  fixture f;
  driver_process_launcher real;
  std::promise<void> ended;
  std::atomic<int> ends{0};
  job_manager jm(f.config(), real,
                 job_hooks{.started = {}, .alive = {}, .ended = [&](const job_id&) {
                             if (ends++ == 0) ended.set_value();
                           }},
                 nullptr);
  submit_request r;
  r.argv = {"/bin/echo", "ab\xe6\x9d\xb1z"};  // "ab東z": a 3-byte character at 2..4
  auto rec = jm.submit(r, f.admin);
  REQUIRE(rec);
  REQUIRE(ended.get_future().wait_for(std::chrono::seconds(30)) == std::future_status::ready);
  CHECK(jm.log_range(rec->submission_id, f.admin, 0, 4)->text == "ab");  // the character waits
  CHECK(jm.log_range(rec->submission_id, f.admin, 0, 5)->text == "ab\xe6\x9d\xb1");
  CHECK(jm.log_range(rec->submission_id, f.admin, 2, 2)->text == "\xe6\x9d");  // all it could hold
  CHECK(jm.log_range(rec->submission_id, f.admin, 0, 1u << 20)->text == "ab\xe6\x9d\xb1z\n");
}

TEST_CASE("a submission's namespaces let its job in there; the first is its default", "[jobs][detached]") {
  fixture f;
  submit_request r;
  r.argv = {"prog"};
  r.namespaces = {"team", "shared"};
  auto rec = f.jm->submit(r, f.admin);
  REQUIRE(rec);
  CHECK(rec->namespaces == std::vector<std::string>{"team", "shared"});
  REQUIRE(f.launcher.started.size() == 1);
  CHECK(f.env_of(f.launcher.started[0], "CELER_NAMESPACE") == "team");
  // The head lets the job in (zmq_transport::register_job's grants).
  CHECK(f.saw("started " + rec->id.hex() + " team shared"));
  // Without any, it has no default and is let in nowhere.
  auto plain = f.submit({"prog"});
  CHECK(f.env_of(f.launcher.started[1], "CELER_NAMESPACE") == "<unset>");
  CHECK(f.saw("started " + plain.id.hex()));
}
