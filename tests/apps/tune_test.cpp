// celer-tune as a user runs it: the real binary (CELER_TUNE) in a fresh directory, its exit
// code, its output and the files it leaves. Each case runs in well under a minute on 2 cores.
// The case tagged [.cluster] runs only under tests/cluster/with_cluster.sh (CMake registers
// it so), which starts a head and a node as processes and sets CELER_ADDRESS.
#define CATCH_CONFIG_MAIN
#include <celer/actors/checkpoint.hpp>

#include <catch2/catch.hpp>

#include "config.hpp"
#include "progress.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <csignal>
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using json = nlohmann::json;

/// A fresh directory to run in, removed afterwards.
struct scratch {
  fs::path dir;
  scratch() {
    char tmpl[] = "/tmp/celer-tune-test.XXXXXX";
    dir = ::mkdtemp(tmpl);
  }
  ~scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  fs::path write(const std::string& name, const std::string& text) const {
    std::ofstream(dir / name) << text;
    return dir / name;
  }
};

struct outcome {
  int code = -1;
  std::string output;
};

/// A running celer-tune: its stdout and stderr come through a pipe, read line by line.
class process {
public:
  process(const fs::path& cwd, const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {}) {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::dup2(fds[1], 1);
      ::dup2(fds[1], 2);
      ::close(fds[0]);
      ::close(fds[1]);
      if (::chdir(cwd.c_str()) != 0) ::_exit(127);
      for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
      std::vector<char*> argv{const_cast<char*>(CELER_TUNE)};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(CELER_TUNE, argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    out_ = fds[0];
  }
  ~process() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) ::close(out_);
  }

  /// The next line of output, or nothing at the end or when `deadline` passes first.
  std::optional<std::string> line(std::chrono::steady_clock::time_point deadline) {
    for (;;) {
      if (auto nl = buffer_.find('\n'); nl != std::string::npos) {
        std::string l = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        all_ += l + "\n";
        return l;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[4096];
      const auto n = ::read(out_, buf, sizeof buf);
      if (n <= 0) return std::nullopt;
      buffer_.append(buf, static_cast<std::size_t>(n));
    }
  }

  /// Reads to the end and waits for the exit (killing it past `limit`).
  outcome finish(std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (line(deadline)) {
    }
    all_ += buffer_;
    if (std::chrono::steady_clock::now() >= deadline) ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), all_};
  }

  void kill_now() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

private:
  pid_t pid_ = -1;
  int out_ = -1;
  std::string buffer_;
  std::string all_;
};

outcome run_tune(const fs::path& cwd, const std::vector<std::string>& args,
                 const std::map<std::string, std::string>& env = {}) {
  process p(cwd, args, env);
  auto o = p.finish(std::chrono::seconds(100));
  INFO(o.output);
  return o;
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> lines_of(const fs::path& p) {
  std::vector<std::string> out;
  std::istringstream in(read(p));
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

std::vector<json> results_of(const fs::path& trial) {
  std::vector<json> out;
  for (const auto& l : lines_of(trial / "result.jsonl")) out.push_back(json::parse(l));
  return out;
}

/// A small space in which 3 epochs reach over 90% on the digits.
const char* quick_space = R"(
search_space:
  lr: {loguniform: [3.0e-3, 2.0e-2]}
  width: {choice: [64, 128]}
  depth: {int: [1, 2]}
  dropout: {uniform: [0.0, 0.1]}
  weight_decay: {loguniform: [1.0e-6, 1.0e-4]}
  batch_size: {choice: [16, 32]}
  optimizer: {choice: [adam, adamw]}
  model: mlp
)";

/// The checks a finished short run must pass: every file, one row per trial, a good model.
void check_experiment(const fs::path& exp, std::size_t trials) {
  for (const char* f : {"experiment.json", "results.csv", "best_config.json", "report.html"})
    CHECK(fs::exists(exp / f));
  const auto csv = lines_of(exp / "results.csv");
  REQUIRE(csv.size() == trials + 1);
  CHECK_THAT(csv[0], Contains("trial,state") && Contains("best_val_accuracy"));
  for (std::size_t i = 1; i < csv.size(); ++i) CHECK((csv[i].find("TERMINATED") != std::string::npos || csv[i].find("STOPPED") != std::string::npos));
  const auto best = json::parse(read(exp / "best_config.json"));
  CHECK(best.at("value").get<double>() > 0.9);
  CHECK(best.at("params").contains("lr"));
  CHECK(fs::exists(exp / best.at("checkpoint").get<std::string>()));  // relative to the experiment
  for (std::size_t t = 0; t < trials; ++t) {
    char name[32];
    std::snprintf(name, sizeof name, "trial_%04zu", t);
    INFO(name);
    CHECK(fs::exists(exp / name / "params.json"));
    CHECK(json::parse(read(exp / name / "status.json")).at("state") != "RUNNING");
    CHECK(!results_of(exp / name).empty());
    // The trial's checkpoint archive: its newest keep_checkpoints (2), each reading back whole.
    const celer::checkpoint::options archive{.archive_dir = (exp / name / "checkpoints").string()};
    const auto held = celer::checkpoint::list(archive);
    REQUIRE(held);
    CHECK(held->size() >= 1);
    CHECK(held->size() <= 2);
    const auto back = celer::checkpoint::restore(archive);
    REQUIRE(back);
    CHECK(back->skipped.empty());
    CHECK(back->data.get_int("epoch").value() == back->info.step);
    CHECK(back->data.find("model/1.weight") != nullptr);
    CHECK(back->data.find("optimizer") != nullptr);
  }
  const auto html = read(exp / "report.html");
  CHECK_THAT(html, Contains("<svg class=\"plot\" id=\"learning-curves\"") && Contains("<polyline"));
  CHECK_THAT(html, Contains("<svg class=\"plot\" id=\"parallel-coordinates\""));
  CHECK(html.find("<script") == std::string::npos);  // self-contained: nothing to fetch or run
  CHECK(html.find("src=\"http") == std::string::npos);
}

/// The synthetic trainable's curve, worked out here rather than taken from apps/tune: param
/// i's point is the Halton sequence (bases 2 and 3) at index i + 1, and its score after
/// iteration t is (1 - (x - 0.3)^2 - (y - 0.7)^2) * (1 - exp(-t / 5)).
double halton(int index, int base) {
  double f = 1, r = 0;
  for (; index > 0; index /= base) {
    f /= base;
    r += f * (index % base);
  }
  return r;
}
double distance2_to_peak(int i) {
  const double x = halton(i + 1, 2), y = halton(i + 1, 3);
  return (x - 0.3) * (x - 0.3) + (y - 0.7) * (y - 0.7);
}
double synthetic_score(int i, int t) { return (1 - distance2_to_peak(i)) * (1 - std::exp(-t / 5.0)); }

/// config/tune/synthetic.yaml at a test's size: 8 points, 1 ms an iteration, 9 at most.
std::string synthetic_config(const std::string& name, const std::string& more) {
  return "name: " + name + R"(
data: synthetic
metric: score
num_samples: 1
searcher: grid
search_space:
  i: {grid_search: [0, 1, 2, 3, 4, 5, 6, 7]}
  cost_ms: 1
)" + more;
}

std::vector<std::string> short_run(const fs::path& config) {
  return {"--config", config.string(), "--num-samples", "6", "--max-epochs", "3", "--max-concurrent", "2",
          "--scheduler", "asha", "--name", "short"};
}

} // namespace

TEST_CASE("a short ASHA run on the digits finishes and writes every file of its experiment", "[tune]") {
  scratch s;
  const auto config = s.write("quick.yaml", std::string("name: quick\n") + quick_space);
  const auto o = run_tune(s.dir, short_run(config));
  INFO(o.output);
  REQUIRE(o.code == 0);
  CHECK_THAT(o.output, Contains("Best trial: trial_") && Contains("celer_results/short/"));
  check_experiment(s.dir / "celer_results" / "short", 6);
  // The config used, complete, reads back: the searcher, scheduler and flags as given.
  const auto cfg = json::parse(read(s.dir / "celer_results" / "short" / "experiment.json"));
  CHECK(cfg.at("num_samples") == 6);
  CHECK(cfg.at("scheduler").at("name") == "asha");
  CHECK(cfg.at("search_space").at("model") == "mlp");
  // A second run under the same name is refused rather than mixed into the first.
  const auto again = run_tune(s.dir, short_run(config));
  CHECK(again.code == 2);
  CHECK_THAT(again.output, Contains("already holds an experiment") && Contains("--resume"));
}

TEST_CASE("a driver killed with SIGKILL resumes: finished trials are not run again, running ones go on from their checkpoints", "[tune]") {
  scratch s;
  const auto config = s.write("resume.yaml", std::string("name: resume\n") + quick_space);
  const std::vector<std::string> args = {"--config", config.string(), "--num-samples", "5", "--max-epochs", "16",
                                         "--max-concurrent", "2", "--scheduler", "fifo"};
  {
    process p(s.dir, args);
    // Kill once a trial has finished and another, still running, has a checkpoint on disk
    // (its writer persists in the background: a reported epoch does not say its save is
    // durable, the archive's manifests do) and is far from its end (so that it is still
    // running when the signal lands).
    const fs::path exp = s.dir / "celer_results" / "resume";
    auto has_checkpoint = [&](const std::string& trial) {
      const auto held = celer::checkpoint::list({.archive_dir = (exp / trial / "checkpoints").string()});
      return held && !held->empty();
    };
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    bool one_finished = false;
    std::map<std::string, int> epochs;
    std::vector<std::string> finished;
    while (auto l = p.line(deadline)) {
      if (l->find("TERMINATED at epoch") != std::string::npos) {
        one_finished = true;
        finished.push_back(l->substr(l->find("trial_"), 10));
      }
      if (auto at = l->find(" epoch "); at != std::string::npos && l->find("] trial_") != std::string::npos &&
                                          l->find(": val_accuracy") != std::string::npos) {
        const auto trial = l->substr(l->find("trial_"), 10);
        epochs[trial] = std::atoi(l->c_str() + at + 7);
        if (one_finished && epochs[trial] >= 2 && epochs[trial] <= 10 &&
            std::find(finished.begin(), finished.end(), trial) == finished.end() && has_checkpoint(trial))
          break;
      }
    }
    REQUIRE(one_finished);
    p.kill_now();
  }
  const fs::path exp = s.dir / "celer_results" / "resume";
  // What the killed run left: the finished trials' lines, to compare after the resume.
  std::map<std::string, std::string> finished_before;
  std::vector<std::string> running_before;
  for (const auto& e : fs::directory_iterator(exp)) {
    if (!e.is_directory()) continue;
    const auto name = e.path().filename().string();
    const auto state = json::parse(read(e.path() / "status.json")).at("state").get<std::string>();
    if (state == "TERMINATED") finished_before[name] = read(e.path() / "result.jsonl");
    else running_before.push_back(name);
  }
  REQUIRE(!finished_before.empty());
  REQUIRE(!running_before.empty());

  const auto o = run_tune(s.dir, {"--resume", "--name", "resume"});
  INFO(o.output);
  REQUIRE(o.code == 0);
  CHECK_THAT(o.output, Contains("resuming"));
  const auto csv = lines_of(exp / "results.csv");
  REQUIRE(csv.size() == 6);  // every trial accounted for, none twice
  bool resumed_from_checkpoint = false;
  for (int t = 0; t < 5; ++t) {
    char name[32];
    std::snprintf(name, sizeof name, "trial_%04d", t);
    INFO(name);
    CHECK(json::parse(read(exp / name / "status.json")).at("state") == "TERMINATED");
    // Each epoch once, in order: nothing lost, nothing run twice.
    const auto results = results_of(exp / name);
    REQUIRE(results.size() == 16);
    for (std::size_t i = 0; i < results.size(); ++i) CHECK(results[i].at("epoch") == static_cast<int>(i) + 1);
    if (finished_before.contains(name)) CHECK(read(exp / name / "result.jsonl") == finished_before[name]);
    for (const auto& r : results)
      if (r.contains("restored_from") && r["restored_from"]["why"] == "resume") {
        CHECK(r.at("epoch") == r["restored_from"]["epoch"].get<int>() + 1);
        resumed_from_checkpoint = resumed_from_checkpoint || r["restored_from"]["epoch"].get<int>() >= 1;
      }
  }
  CHECK(resumed_from_checkpoint);
}

TEST_CASE("population based training copies a better trial's state into a worse one", "[tune]") {
  scratch s;
  const auto o = run_tune(s.dir, {"--config", CELER_SOURCE_DIR "/config/tune/digits_pbt.yaml", "--max-epochs", "12"});
  INFO(o.output);
  REQUIRE(o.code == 0);
  CHECK_THAT(o.output, Contains(" exploits trial_"));
  const fs::path exp = s.dir / "celer_results" / "digits-pbt";
  int exploits = 0;
  for (const auto& e : fs::directory_iterator(exp)) {
    if (!e.is_directory()) continue;
    const auto results = results_of(e.path());
    for (std::size_t i = 0; i < results.size(); ++i) {
      const auto& r = results[i];
      if (!r.contains("restored_from") || r["restored_from"]["why"] != "pbt") continue;
      ++exploits;
      // It went on from the epoch it copied, with the source's params explored.
      const auto source = r["restored_from"]["trial"].get<int>();
      const auto epoch = r["restored_from"]["epoch"].get<int>();
      char name[32];
      std::snprintf(name, sizeof name, "trial_%04d", source);
      CHECK(fs::exists(exp / name));
      CHECK(r.at("epoch") == epoch + 1);
      CHECK(r.at("params").contains("lr"));
      CHECK(r.at("params").at("width") == 64);
    }
  }
  CHECK(exploits >= 1);
}

TEST_CASE("a bad config exits with status 2 and a message naming the key", "[tune]") {
  scratch s;
  const auto typo = s.write("typo.yaml", "name: x\nserach_space:\n  lr: 0.01\n");
  auto o = run_tune(s.dir, {"--config", typo.string()});
  CHECK(o.code == 2);
  CHECK_THAT(o.output, Contains("unknown key 'serach_space'") && Contains("Did you mean 'search_space'?") &&
                         Contains("Valid keys: name, data"));
  const auto param = s.write("param.yaml", "search_space:\n  learning_rate: {loguniform: [1.0e-4, 0.1]}\n");
  o = run_tune(s.dir, {"--config", param.string()});
  CHECK(o.code == 2);
  CHECK_THAT(o.output, Contains("unknown key 'learning_rate'") && Contains("lr, weight_decay"));
  const auto dist = s.write("dist.yaml", "search_space:\n  lr: {log_uniform: [1.0e-4, 0.1]}\n");
  o = run_tune(s.dir, {"--config", dist.string()});
  CHECK(o.code == 2);
  CHECK_THAT(o.output, Contains("unknown key 'log_uniform'") && Contains("loguniform"));
  const auto range = s.write("range.yaml", "search_space:\n  dropout: {uniform: [0.0, 1.5]}\n");
  o = run_tune(s.dir, {"--config", range.string()});
  CHECK(o.code == 2);
  CHECK_THAT(o.output, Contains("search_space.dropout") && Contains("out of range"));
  const auto synthetic = s.write("synthetic.yaml", "data: synthetic\nsearch_space:\n  lr: {loguniform: [1.0e-4, 0.1]}\n");
  o = run_tune(s.dir, {"--config", synthetic.string()});
  CHECK(o.code == 2);
  CHECK_THAT(o.output, Contains("unknown key 'lr'") && Contains("synthetic trial") && Contains("i, cost_ms"));
  const auto pbt = s.write("pbt.yaml", "scheduler: {name: pbt, mutations: [width]}\n"
                                     "search_space:\n  width: {choice: [32, 64]}\n");
  o = run_tune(s.dir, {"--config", pbt.string()});
  CHECK(o.code == 2);
  CHECK_THAT(o.output, Contains("PBT cannot change 'width'"));
  o = run_tune(s.dir, {"--config", (s.dir / "missing.yaml").string()});
  CHECK(o.code == 2);
  CHECK_THAT(o.output, Contains("cannot read the config file"));
  o = run_tune(s.dir, {"--resume", "--name", "never-ran"});
  CHECK(o.code == 2);
  CHECK_THAT(o.output, Contains("nothing to resume"));
  CHECK_FALSE(fs::exists(s.dir / "celer_results"));  // nothing started, nothing written
}

TEST_CASE("a trial that keeps failing is marked ERROR with its reason, and the experiment goes on", "[tune]") {
  scratch s;
  const auto config = s.write("fail.yaml", std::string("name: fail\n") + quick_space);
  // Trial 1 throws at epoch 2 every time; trial 2 throws at epoch 2 once (below).
  const auto o = run_tune(s.dir,
                          {"--config", config.string(), "--num-samples", "3", "--max-epochs", "3", "--scheduler",
                           "fifo", "--max-failures", "1"},
                          {{"CELER_TUNE_INJECT_FAILURE", "1:2:100"}});
  INFO(o.output);
  REQUIRE(o.code == 0);
  const fs::path exp = s.dir / "celer_results" / "fail";
  const auto status = json::parse(read(exp / "trial_0001" / "status.json"));
  CHECK(status.at("state") == "ERROR");
  CHECK(status.at("failures") == 2);
  CHECK_THAT(status.at("reason").get<std::string>(), Contains("injected failure at epoch 2"));
  for (const char* other : {"trial_0000", "trial_0002"})
    CHECK(json::parse(read(exp / other / "status.json")).at("state") == "TERMINATED");
  CHECK_THAT(read(exp / "results.csv"), Contains("ERROR"));

  // Failing once: restarted from its checkpoint, it finishes.
  scratch again;
  const auto config2 = again.write("fail.yaml", std::string("name: once\n") + quick_space);
  const auto o2 = run_tune(again.dir,
                           {"--config", config2.string(), "--num-samples", "1", "--max-epochs", "3", "--scheduler", "fifo"},
                           {{"CELER_TUNE_INJECT_FAILURE", "0:2:1"}});
  REQUIRE(o2.code == 0);
  const auto results = results_of(again.dir / "celer_results" / "once" / "trial_0000");
  REQUIRE(results.size() == 3);
  CHECK(results[1].at("restored_from").at("why") == "restart");
  CHECK(results[1].at("restored_from").at("epoch") == 1);
}

TEST_CASE("synthetic trials under ASHA: the point nearest the peak wins, and poor ones are stopped early", "[tune]") {
  scratch s;
  const auto config = s.write("synth.yaml", synthetic_config("synth", R"(
max_epochs: 9
scheduler: {name: asha, grace_period: 1, reduction_factor: 3}
checkpoint_every: 0
)"));
  const auto o = run_tune(s.dir, {"--config", config.string(), "--num-cpus", "2"});
  INFO(o.output);
  REQUIRE(o.code == 0);
  const fs::path exp = s.dir / "celer_results" / "synth";
  int nearest = 0;
  for (int i = 1; i < 8; ++i)
    if (distance2_to_peak(i) < distance2_to_peak(nearest)) nearest = i;
  const auto best = json::parse(read(exp / "best_config.json"));
  CHECK(best.at("metric") == "score");
  CHECK(best.at("mode") == "maximize");
  CHECK(best.at("params").at("i") == nearest);
  CHECK(best.at("epoch") == 9);  // the best at every rung, so never stopped
  CHECK(best.at("value").get<double>() == Approx(synthetic_score(nearest, 9)).epsilon(1e-12));
  CHECK(best.at("checkpoint") == "");  // checkpoint_every: 0
  int stopped = 0, terminated = 0;
  std::size_t iterations = 0;
  for (int t = 0; t < 8; ++t) {
    char name[32];
    std::snprintf(name, sizeof name, "trial_%04d", t);
    INFO(name);
    const auto state = json::parse(read(exp / name / "status.json")).at("state").get<std::string>();
    const int i = json::parse(read(exp / name / "params.json")).at("i").get<int>();
    CHECK(i == t);  // the grid, in order: trial t runs point t, as Ray's grid_search
    const auto results = results_of(exp / name);
    iterations += results.size();
    for (std::size_t k = 0; k < results.size(); ++k) {
      CHECK(results[k].at("epoch") == static_cast<int>(k) + 1);
      CHECK(results[k].at("score").get<double>() == Approx(synthetic_score(i, static_cast<int>(k) + 1)).epsilon(1e-12));
      CHECK_FALSE(results[k].contains("val_accuracy"));  // a synthetic trial reports its score only
    }
    if (state == "STOPPED") {
      ++stopped;
      CHECK(results.size() < 9);
    } else if (state == "TERMINATED") {
      ++terminated;
      CHECK(results.size() == 9);
    }
    CHECK_FALSE(fs::exists(exp / name / "checkpoints"));  // checkpoint_every: 0
  }
  CHECK(stopped + terminated == 8);
  CHECK(stopped >= 1);
  CHECK(iterations < 8 * 9);
  CHECK_THAT(lines_of(exp / "results.csv")[0], Contains("best_score") && Contains(",i,"));
  // The overhead, counted as bench/peers/ray_tune_synthetic.py counts it, printed and in the report.
  const std::string counted = "8 trials, " + std::to_string(iterations) + " iterations in ";
  CHECK_THAT(o.output, Contains("Tuning overhead") && Contains(counted) && Contains("on 2 CPUs") && Contains(" ms per iteration"));
  CHECK_THAT(read(exp / "report.html"), Contains(counted));
}

TEST_CASE("a synthetic trial that fails goes on from the iteration its checkpoint holds", "[tune]") {
  scratch s;
  const auto config = s.write("synth.yaml", synthetic_config("synth-restart", R"(
max_epochs: 4
scheduler: fifo
checkpoint_every: 1
)"));
  const auto o = run_tune(s.dir, {"--config", config.string(), "--num-samples", "1"},
                          {{"CELER_TUNE_INJECT_FAILURE", "0:3:1"}});
  INFO(o.output);
  REQUIRE(o.code == 0);
  const fs::path trial = s.dir / "celer_results" / "synth-restart" / "trial_0000";
  CHECK(json::parse(read(trial / "status.json")).at("state") == "TERMINATED");
  const auto results = results_of(trial);
  REQUIRE(results.size() == 4);
  // Restarted from its checkpoint of iteration 2, it reports iteration 3's score next (a trial
  // started afresh would report iteration 1's again).
  CHECK(results[2].at("restored_from").at("why") == "restart");
  CHECK(results[2].at("restored_from").at("epoch") == 2);
  for (int k = 0; k < 4; ++k) CHECK(results[k].at("score").get<double>() == Approx(synthetic_score(0, k + 1)).epsilon(1e-12));
  // Its newest checkpoint: the iteration count, and nothing else.
  const auto back = celer::checkpoint::restore({.archive_dir = (trial / "checkpoints").string()});
  REQUIRE(back);
  CHECK(back->info.step == 4);
  REQUIRE(back->data.entries().size() == 1);
  CHECK(back->data.get_int("iteration").value() == 4);
}

TEST_CASE("the short run passes on a local cluster of processes", "[.cluster]") {
  REQUIRE(std::getenv("CELER_ADDRESS") != nullptr);  // with_cluster.sh sets it
  scratch s;
  const auto config = s.write("quick.yaml", std::string("name: quick\n") + quick_space);
  const auto o = run_tune(s.dir, short_run(config));
  INFO(o.output);
  REQUIRE(o.code == 0);
  CHECK_THAT(o.output, Contains("on the cluster at "));
  check_experiment(s.dir / "celer_results" / "short", 6);
}

TEST_CASE("experiment.json reads back as the same configuration, flags and all", "[tune]") {
  auto cfg = celer::tune_app::load_config_file(CELER_SOURCE_DIR "/config/tune/digits_pbt.yaml");
  REQUIRE(cfg.has_value());
  cfg->num_samples = 3;  // as a flag would set it
  cfg->gpu_memory_gb_by_batch = {{256, 8.0}};
  const auto written = celer::tune_app::to_json(*cfg);
  const auto back = celer::tune_app::parse_config(written, "experiment.json");
  REQUIRE(back.has_value());
  CHECK(celer::tune_app::to_json(*back) == written);
  CHECK(celer::tune_app::validate(*back).has_value());
  CHECK(celer::tune_app::gpu_memory_for(*back, {{"batch_size", std::int64_t{512}}}) == 8.0);
  CHECK(celer::tune_app::gpu_memory_for(*back, {{"batch_size", std::int64_t{64}}}) == 0.0);
  for (const char* shipped : {"digits.yaml", "digits_pbt.yaml", "fashion_mnist.yaml", "synthetic.yaml"}) {
    INFO(shipped);
    auto c = celer::tune_app::load_config_file(std::string(CELER_SOURCE_DIR "/config/tune/") + shipped);
    REQUIRE(c.has_value());
    CHECK(celer::tune_app::validate(*c).has_value());
  }
}

TEST_CASE("the progress table shows running trials first and says how many it leaves out", "[tune]") {
  using namespace celer::tune_app;
  std::vector<trial_summary> trials(5);
  for (int i = 0; i < 5; ++i) {
    trials[i].id = i;
    trials[i].state = i == 3 ? trial_state::running : trial_state::terminated;
    trials[i].params.set("lr", 0.001 * (i + 1));
    epoch_result r;
    r.epoch = 1;
    r.values = {{"val_accuracy", 0.5 + 0.1 * i}};
    trials[i].results.push_back(r);
  }
  std::ostringstream out;
  progress p(out, /*tty=*/false, objective{}, {"lr"}, "t", 8);
  const auto table = p.table(trials, 3);
  const auto running = table.find("trial_0003");
  const auto best_finished = table.find("trial_0004");
  REQUIRE(running != std::string::npos);
  REQUIRE(best_finished != std::string::npos);
  CHECK(running < best_finished);
  CHECK(table.find("trial_0000") == std::string::npos);
  CHECK_THAT(table, Contains("... 2 more trials not shown (2 TERMINATED)"));
  CHECK_THAT(p.status_line(trials, 61), Contains("1 RUNNING, 4 TERMINATED | 5/8 trials | 1m01s") &&
                                          Contains("best val_accuracy 0.9000 (trial_0004, epoch 1)"));
  p.event(2.5, "trial_0003 epoch 1", &trials);  // not a terminal: the line and the status now
  CHECK_THAT(out.str(), Contains("trial_0003 epoch 1\n") && Contains("== t: 1 RUNNING"));
}

TEST_CASE("on a cluster, a trial whose worker process dies is restarted and goes on from its checkpoint", "[.cluster]") {
  REQUIRE(std::getenv("CELER_ADDRESS") != nullptr);
  scratch s;
  const auto config = s.write("quick.yaml", std::string("name: crash\n") + quick_space);
  // Trial 1's worker process exits at its third epoch: celer restarts the actor
  // (max_restarts = max_failures) and the driver hands it its newest checkpoint.
  const auto o = run_tune(s.dir,
                          {"--config", config.string(), "--num-samples", "2", "--max-epochs", "4", "--scheduler", "fifo"},
                          {{"CELER_TUNE_INJECT_FAILURE", "1:3:exit"}});
  INFO(o.output);
  REQUIRE(o.code == 0);
  CHECK_THAT(o.output, Contains("its worker process exited"));
  const fs::path trial = s.dir / "celer_results" / "crash" / "trial_0001";
  CHECK(json::parse(read(trial / "status.json")).at("state") == "TERMINATED");
  // One line per epoch; the first after the restart says from which checkpoint (epoch 2, or
  // epoch 1 when the save of epoch 2 died with the process).
  const auto results = results_of(trial);
  REQUIRE(results.size() == 4);
  int restarts = 0;
  for (std::size_t i = 0; i < results.size(); ++i) {
    CHECK(results[i].at("epoch") == static_cast<int>(i) + 1);
    if (!results[i].contains("restored_from")) continue;
    ++restarts;
    CHECK(results[i]["restored_from"]["why"] == "restart");
    CHECK(results[i]["restored_from"]["epoch"].get<int>() >= 1);
    CHECK(results[i].at("epoch") == results[i]["restored_from"]["epoch"].get<int>() + 1);
  }
  CHECK(restarts == 1);
}

TEST_CASE("the config an experiment would use, after flags, is printed by --print-config and reads back", "[tune]") {
  scratch s;
  const auto printed = run_tune(s.dir, {"--num-samples", "5", "--scheduler", "median", "--print-config"});
  REQUIRE(printed.code == 0);
  CHECK_THAT(printed.output, Contains("num_samples: 5\n") && Contains("\"name\":\"median\"") &&
                               Contains("search_space: {\"lr\":{\"loguniform\""));
  const auto file = s.write("printed.yaml", printed.output);
  const auto again = run_tune(s.dir, {"--config", file.string(), "--print-config"});
  REQUIRE(again.code == 0);
  const auto body = [](const std::string& text) { return text.substr(text.find('\n') + 1); };  // less the header
  CHECK(body(again.output) == body(printed.output));
}
