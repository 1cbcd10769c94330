// celer-train as a user runs it: the real binary (CELER_TRAIN) in a fresh directory, its exit
// code, its output and the files it leaves. Each run is a few hundred steps of the digits MLP
// at most: about a second each on 2 cores.
#define CATCH_CONFIG_MAIN
#include <celer/actors/trainer/metrics_log.hpp>

#include <catch2/catch.hpp>

#include "config.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
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
    char tmpl[] = "/tmp/celer-train-test.XXXXXX";
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

/// Runs celer-train in `cwd` with `args`; its stdout and stderr together. Killed past `limit`.
outcome run_train(const fs::path& cwd, const std::vector<std::string>& args, const std::string& inject_failure = {},
                  std::chrono::seconds limit = std::chrono::seconds(90)) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    ::close(fds[1]);
    if (::chdir(cwd.c_str()) != 0) ::_exit(127);
    // "RANK:STEP" injects a failure; "NAME=VALUE" sets any other variable (the slow worker's).
    if (const auto eq = inject_failure.find('='); eq != std::string::npos)
      ::setenv(inject_failure.substr(0, eq).c_str(), inject_failure.substr(eq + 1).c_str(), 1);
    else if (!inject_failure.empty())
      ::setenv("CELER_TRAIN_INJECT_FAILURE", inject_failure.c_str(), 1);
    std::vector<char*> argv{const_cast<char*>(CELER_TRAIN)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(CELER_TRAIN, argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  outcome o;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    const auto n = ::read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    o.output.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return o;
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<json> jsonl_of(const fs::path& p) {
  std::vector<json> out;
  std::istringstream in(read(p));
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) out.push_back(json::parse(l));
  return out;
}

const std::string config = std::string(CELER_SOURCE_DIR) + "/config/train/digits-mlp.yaml";

} // namespace

TEST_CASE("a short run of 2 workers trains the digits, writes its metrics and ends with equal replicas", "[train]") {
  scratch s;
  const auto o = run_train(s.dir, {"--config", config, "--name", "short", "--max-steps", "80", "--eval-every", "40"});
  INFO(o.output);
  REQUIRE(o.code == 0);
  CHECK_THAT(o.output, Contains("samples/s") && Contains("data-wait") && Contains("allreduce") &&
                         Contains("final validation accuracy") && Contains("replicas are equal"));
  const fs::path out = s.dir / "celer_results" / "short";

  // metrics.jsonl: a line per step, and one per validation (steps 40 and 80).
  const auto lines = jsonl_of(out / "metrics.jsonl");
  std::size_t steps = 0, validations = 0;
  for (const auto& l : lines) {
    if (l.contains("loss")) {
      ++steps;
      CHECK(l.at("bytes_sent").get<double>() > 0);
      CHECK(l.at("samples_per_s").get<double>() > 0);
      CHECK(l.contains("data_wait_s"));
      CHECK(l.contains("compute_s"));
    }
    if (l.contains("val_accuracy")) ++validations;
  }
  CHECK(steps == 80);
  CHECK(validations == 2);
  CHECK(lines.front().at("step") == 1);

  // The TensorBoard event file reads back with its CRCs, holding the same steps.
  std::vector<fs::path> events;
  for (const auto& e : fs::directory_iterator(out / "tensorboard")) events.push_back(e.path());
  REQUIRE(events.size() == 1);
  CHECK_THAT(events.front().filename().string(), Contains("events.out.tfevents."));
  const auto back = celer::trainer::read_event_file(events.front().string());
  REQUIRE(back);
  CHECK(!back->truncated);
  CHECK(back->events.size() == 1 + 80 + 2);  // file_version, the steps, the validations
  CHECK(back->events.front().file_version == "brain.Event:2");

  // summary.json: a sane model, and every replica's parameters equal, bit for bit.
  const auto summary = json::parse(read(out / "summary.json"));
  CHECK(summary.at("steps") == 80);
  CHECK(summary.at("final_val_accuracy").get<double>() > 0.85);
  const auto digests = summary.at("parameters_digests").get<std::vector<std::string>>();
  REQUIRE(digests.size() == 2);
  CHECK(digests[0] == digests[1]);
  CHECK(summary.at("replicas_equal") == true);
  CHECK(fs::exists(out / "run.json"));
}

TEST_CASE("three workers accumulating two micro-batches each stay equal and learn", "[train]") {
  scratch s;
  const auto o = run_train(s.dir, {"--config", config, "--name", "acc", "--num-workers", "3", "--cpus-per-worker",
                                   "0.5", "--accumulate-steps", "2", "--batch-size", "16", "--max-steps", "60"});
  INFO(o.output);
  REQUIRE(o.code == 0);
  CHECK_THAT(o.output, Contains("3 workers x 16 samples x 2 micro-batches a step (96 in all)"));
  const auto summary = json::parse(read(s.dir / "celer_results" / "acc" / "summary.json"));
  const auto digests = summary.at("parameters_digests").get<std::vector<std::string>>();
  REQUIRE(digests.size() == 3);
  CHECK(digests[0] == digests[1]);
  CHECK(digests[1] == digests[2]);
  CHECK(summary.at("final_val_accuracy").get<double>() > 0.85);
}

TEST_CASE("a hierarchical allreduce by label runs in local groups: the bytes a step show it, and the replicas stay equal", "[train]") {
  scratch s;
  const double raw = 4.0 * 26122;  // the digits MLP's float32 gradient
  auto bytes_per_step = [&](const std::string& name) {
    std::vector<double> sent;
    for (const auto& l : jsonl_of(s.dir / "celer_results" / name / "metrics.jsonl"))
      if (l.contains("bytes_sent")) sent.push_back(l.at("bytes_sent").get<double>());
    return sent;
  };
  const std::vector<std::string> four{"--config", config, "--num-workers", "4", "--cpus-per-worker", "0.5", "--max-steps", "40"};
  auto args = [&](std::vector<std::string> more) {
    more.insert(more.begin(), four.begin(), four.end());
    return more;
  };
  const auto flat = run_train(s.dir, args({"--name", "flat"}));
  REQUIRE(flat.code == 0);
  const auto grouped = run_train(s.dir, args({"--name", "racks", "--hierarchy", "by_label", "--local-groups", "a", "a", "b", "b"}));
  INFO(grouped.output);
  REQUIRE(grouped.code == 0);
  // A flat ring of 4: each worker sends 2 x 3/4 of the gradient. Two racks of 2: each sends
  // 2 x 1/2 in its rack's ring, and each rack's leader 2 x 1/2 more in the leaders' ring and
  // the whole of it in the broadcast to its rack: (1 + 1 + 3 + 3) / 4 = 2 on average.
  for (double b : bytes_per_step("flat")) CHECK(b == Approx(1.5 * raw).epsilon(0.01));
  const auto racks = bytes_per_step("racks");
  REQUIRE(racks.size() == 40);
  for (double b : racks) CHECK(b == Approx(2.0 * raw).epsilon(0.01));
  const auto summary = json::parse(read(s.dir / "celer_results" / "racks" / "summary.json"));
  CHECK(summary.at("replicas_equal") == true);
  CHECK(summary.at("final_val_accuracy").get<double>() > 0.85);
  CHECK(json::parse(read(s.dir / "celer_results" / "racks" / "run.json")).at("local_groups") ==
        json::array({"a", "a", "b", "b"}));
  // A label per worker, or refused naming the key.
  const auto bad = run_train(s.dir, args({"--name", "bad", "--hierarchy", "by_label", "--local-groups", "a", "b"}));
  CHECK(bad.code == 2);
  CHECK_THAT(bad.output, Contains("key 'local_groups'") && Contains("2 labels for 4 workers"));
}

TEST_CASE("1-bit sign compression sends over 30x fewer bytes a step, learns, and keeps the replicas equal", "[train]") {
  scratch s;
  const auto cfg = s.write("sign.yaml", read(config) + "\ncompression: sign\nclip_grad_norm: 5\n");
  const auto o = run_train(s.dir, {"--config", cfg.string(), "--name", "sign", "--max-steps", "100"});
  INFO(o.output);
  REQUIRE(o.code == 0);
  const fs::path out = s.dir / "celer_results" / "sign";
  const double raw = 4.0 * 26122;  // the digits MLP's float32 gradient: a 2-worker ring sends all of it
  std::size_t steps = 0;
  for (const auto& l : jsonl_of(out / "metrics.jsonl")) {
    if (!l.contains("bytes_sent")) continue;
    ++steps;
    CHECK(l.at("bytes_sent").get<double>() > 0);
    CHECK(l.at("bytes_sent").get<double>() * 30 < raw);
  }
  CHECK(steps == 100);
  const auto summary = json::parse(read(out / "summary.json"));
  CHECK(summary.at("final_val_accuracy").get<double>() > 0.8);
  CHECK(summary.at("replicas_equal") == true);
}

TEST_CASE("a slow data loader shows as data-wait, apart from compute", "[train]") {
  scratch s;
  // 100 ms of busy work a batch, one loader thread, one batch ahead: the trainer waits. The
  // cost is far above a step's compute (~1 ms, tens of ms on a loaded machine), so the wait
  // shows however busy the machine is.
  const auto cfg = s.write("slow.yaml", read(config) + "\nloader_cost_ms: 100\nloader_threads: 1\nprefetch: 1\n");
  const auto o = run_train(s.dir, {"--config", cfg.string(), "--name", "slow", "--max-steps", "20"});
  INFO(o.output);
  REQUIRE(o.code == 0);
  double wait = 0, compute = 0;
  std::size_t steps = 0;
  for (const auto& l : jsonl_of(s.dir / "celer_results" / "slow" / "metrics.jsonl")) {
    if (!l.contains("data_wait_s")) continue;
    ++steps;
    wait += l.at("data_wait_s").get<double>();
    compute += l.at("compute_s").get<double>();
  }
  REQUIRE(steps == 20);
  // Each batch takes >= 100 ms to make: the trainer waits most of it, whatever its compute.
  CHECK(wait / static_cast<double>(steps) > 0.03);
  CHECK(compute > 0);
}

TEST_CASE("a run resumed from its checkpoint ends with the weights of a run never stopped", "[train]") {
  scratch s;
  const std::vector<std::string> common{"--config", config, "--checkpoint-every", "20", "--progress-interval", "100"};
  auto args = [&](std::vector<std::string> more) {
    more.insert(more.begin(), common.begin(), common.end());
    return more;
  };
  const auto whole = run_train(s.dir, args({"--name", "whole", "--max-steps", "60"}));
  REQUIRE(whole.code == 0);
  const auto first = run_train(s.dir, args({"--name", "cut", "--max-steps", "40"}));
  REQUIRE(first.code == 0);
  CHECK(fs::exists(s.dir / "celer_results" / "cut" / "checkpoints" / "manifests"));
  const auto again = run_train(s.dir, args({"--name", "cut", "--resume", "--max-steps", "60"}));
  INFO(again.output);
  REQUIRE(again.code == 0);
  CHECK_THAT(again.output, Contains("resumed from checkpoint") && Contains("at step 40"));
  const auto a = json::parse(read(s.dir / "celer_results" / "whole" / "summary.json"));
  const auto b = json::parse(read(s.dir / "celer_results" / "cut" / "summary.json"));
  CHECK(b.at("steps") == 60);
  // Weights, Adam's moments and the loaders' positions all came back: the same bits.
  CHECK(a.at("parameters_digests") == b.at("parameters_digests"));
  CHECK(a.at("final_val_loss") == b.at("final_val_loss"));
  // The resumed run went on in the same metrics file: steps 1-60, each once.
  std::size_t steps = 0;
  for (const auto& l : jsonl_of(s.dir / "celer_results" / "cut" / "metrics.jsonl"))
    if (l.contains("loss")) ++steps;
  CHECK(steps == 60);
}

TEST_CASE("a run with 1-bit compression resumed from its checkpoint ends with the weights of a run never stopped", "[train]") {
  scratch s;
  // The checkpoint carries each worker's error-feedback residual: without it the resumed
  // run would start it empty and drift from the run never stopped.
  const std::vector<std::string> common{"--config", config, "--checkpoint-every", "20", "--progress-interval", "100",
                                        "--compression", "sign"};
  auto args = [&](std::vector<std::string> more) {
    more.insert(more.begin(), common.begin(), common.end());
    return more;
  };
  const auto whole = run_train(s.dir, args({"--name", "whole", "--max-steps", "50"}));
  REQUIRE(whole.code == 0);
  REQUIRE(run_train(s.dir, args({"--name", "cut", "--max-steps", "20"})).code == 0);
  const auto again = run_train(s.dir, args({"--name", "cut", "--resume", "--max-steps", "50"}));
  INFO(again.output);
  REQUIRE(again.code == 0);
  const auto a = json::parse(read(s.dir / "celer_results" / "whole" / "summary.json"));
  const auto b = json::parse(read(s.dir / "celer_results" / "cut" / "summary.json"));
  CHECK(a.at("parameters_digests") == b.at("parameters_digests"));
}

TEST_CASE("a worker that fails is replaced alone from its peers' weights, at once, and the run ends as if it had not", "[train]") {
  scratch s;
  // The collective timeout stays 120 s: the survivors are told to give up, not left to time out.
  const auto cfg = s.write("f.yaml", read(config) + "\ncheckpoint_every: 20\nprogress_interval: 100\n");
  const auto whole = run_train(s.dir, {"--config", cfg.string(), "--name", "whole", "--max-steps", "60"});
  REQUIRE(whole.code == 0);
  // Worker 1 throws as it begins step 30; worker 0 has applied step 29 and waits for it.
  const auto began = std::chrono::steady_clock::now();
  const auto failed = run_train(s.dir, {"--config", cfg.string(), "--name", "failed", "--max-steps", "60",
                                        "--max-failures", "1"}, "1:30");
  const auto took = std::chrono::steady_clock::now() - began;
  INFO(failed.output);
  REQUIRE(failed.code == 0);
  CHECK_THAT(failed.output, Contains("injected failure at step 30") && Contains("replacing worker 1 alone") &&
                              Contains("the run goes on at step 29 with the survivors' weights"));
  CHECK(took < std::chrono::seconds(60));  // far from the 120 s timeout
  const auto a = json::parse(read(s.dir / "celer_results" / "whole" / "summary.json"));
  const auto b = json::parse(read(s.dir / "celer_results" / "failed" / "summary.json"));
  CHECK(b.at("steps") == 60);
  // Weights, Adam's moments and the loaders' positions came from the survivor: the same bits.
  CHECK(a.at("parameters_digests") == b.at("parameters_digests"));
  REQUIRE(b.at("recoveries").size() == 1);
  CHECK(b.at("recoveries")[0].at("how") == "peers");
  CHECK(b.at("recoveries")[0].at("step") == 29);
  CHECK(b.at("recoveries")[0].at("seconds").get<double>() < 30);
  // Every step is logged once: 24-29, taken in the call that failed, from the survivor's
  // figures (marked survivors_only), 30 on as usual.
  std::vector<std::int64_t> steps, survivors_only;
  for (const auto& l : jsonl_of(s.dir / "celer_results" / "failed" / "metrics.jsonl")) {
    if (!l.contains("loss")) continue;
    steps.push_back(l.at("step").get<std::int64_t>());
    if (l.contains("survivors_only")) survivors_only.push_back(steps.back());
  }
  REQUIRE(steps.size() == 60);
  for (std::size_t i = 0; i < steps.size(); ++i) CHECK(steps[i] == static_cast<std::int64_t>(i) + 1);
  CHECK(survivors_only == std::vector<std::int64_t>{24, 25, 26, 27, 28, 29});

  // Without max_failures the run ends, exit 1, saying which worker failed.
  const auto ended = run_train(s.dir, {"--config", cfg.string(), "--name", "ended", "--max-steps", "60"}, "0:5");
  CHECK(ended.code == 1);
  CHECK_THAT(ended.output, Contains("worker 0:") && Contains("injected failure at step 5"));
}

TEST_CASE("with no survivor the workers are replaced from the newest checkpoint", "[train]") {
  scratch s;
  const auto cfg = s.write("f.yaml", read(config) + "\ncheckpoint_every: 20\nprogress_interval: 100\nnum_workers: 1\n");
  const auto whole = run_train(s.dir, {"--config", cfg.string(), "--name", "whole", "--max-steps", "40"});
  REQUIRE(whole.code == 0);
  // The one worker throws at step 30: no peer has its weights, so step 20's checkpoint does.
  const auto failed = run_train(s.dir, {"--config", cfg.string(), "--name", "failed", "--max-steps", "40",
                                        "--max-failures", "1"}, "0:30");
  INFO(failed.output);
  REQUIRE(failed.code == 0);
  CHECK_THAT(failed.output, Contains("replacing the workers") && Contains("go on from checkpoint 1 at step 20"));
  const auto a = json::parse(read(s.dir / "celer_results" / "whole" / "summary.json"));
  const auto b = json::parse(read(s.dir / "celer_results" / "failed" / "summary.json"));
  CHECK(a.at("parameters_digests") == b.at("parameters_digests"));
  CHECK(b.at("recoveries")[0].at("how") == "checkpoint");
}

TEST_CASE("with straggler_timeout_ms a slow worker no longer holds every step, and the run still learns", "[train]") {
  scratch s;
  // Worker 1's loader takes 50 ms a batch; worker 0's is fast.
  const std::string slow = "CELER_TRAIN_SLOW_WORKER=1:50";
  const std::vector<std::string> common{"--config", config, "--max-steps", "60", "--progress-interval", "100",
                                        "--eval-every", "30"};
  auto args = [&](std::vector<std::string> more) {
    more.insert(more.begin(), common.begin(), common.end());
    return more;
  };
  const auto held = run_train(s.dir, args({"--name", "held"}), slow);
  REQUIRE(held.code == 0);
  const auto went_on = run_train(s.dir, args({"--name", "went-on", "--straggler-timeout-ms", "20"}), slow);
  INFO(went_on.output);
  REQUIRE(went_on.code == 0);  // and the replicas are equal
  CHECK_THAT(went_on.output, Contains("stragglers: each step goes on") && Contains("skipped "));
  const auto a = json::parse(read(s.dir / "celer_results" / "held" / "summary.json"));
  const auto b = json::parse(read(s.dir / "celer_results" / "went-on" / "summary.json"));
  // Held by the slow loader, a step takes ~50 ms; going on at 20 ms bounds it.
  const double held_s = a.at("train_seconds").get<double>(), went_s = b.at("train_seconds").get<double>();
  CHECK(went_s < held_s / 2);
  CHECK(went_s < 60 * 0.040);
  CHECK(b.at("final_val_accuracy").get<double>() > 0.8);
  // Each step's line says how many workers' gradients it went on without: mostly the slow
  // one's (on a loaded machine the fast one may miss a deadline too, and then no update).
  std::int64_t skipped = 0, lines = 0;
  for (const auto& l : jsonl_of(s.dir / "celer_results" / "went-on" / "metrics.jsonl")) {
    if (!l.contains("loss")) continue;
    ++lines;
    skipped += l.at("skipped").get<std::int64_t>();
    CHECK(l.at("skipped").get<std::int64_t>() <= 2);
  }
  CHECK(lines == 60);
  CHECK(skipped > 30);
  // It is built for the allreduce, without compression.
  const auto bad = run_train(s.dir, {"--config", config, "--name", "bad", "--straggler-timeout-ms", "20",
                                     "--compression", "sign"});
  CHECK(bad.code == 2);
  CHECK_THAT(bad.output, Contains("straggler_timeout_ms"));
  // And for the plain fp32 step of a classifier: its step thread runs no other.
  const auto bf16 = run_train(s.dir, {"--config", config, "--name", "bad-bf16", "--straggler-timeout-ms", "20",
                                      "--precision", "bf16"});
  CHECK(bf16.code == 2);
  CHECK_THAT(bf16.output, Contains("straggler_timeout_ms") && Contains("plain fp32 step"));
}

TEST_CASE("an asynchronous run through two parameter servers learns within its staleness bound", "[train]") {
  scratch s;
  const auto o = run_train(s.dir, {"--config", config, "--name", "async", "--mode", "async", "--num-servers", "2",
                                   "--staleness", "2", "--max-steps", "100", "--eval-every", "50"});
  INFO(o.output);
  REQUIRE(o.code == 0);
  CHECK_THAT(o.output, Contains("asynchronous: each worker pushes its gradient to 2 parameter servers") &&
                         Contains("push/pull") && Contains("replicas are equal"));
  const fs::path out = s.dir / "celer_results" / "async";
  std::size_t steps = 0, validations = 0;
  for (const auto& l : jsonl_of(out / "metrics.jsonl")) {
    CHECK(l.at("mode") == "async");
    if (l.contains("loss")) {
      ++steps;
      CHECK(l.at("ahead").get<int>() <= 2);  // never past the bound
      CHECK(l.contains("bound_wait_s"));
      CHECK(l.at("push_pull_s").get<double>() > 0);
      CHECK(l.at("bytes_sent") == 4 * 26122);  // each worker pushes its whole float32 gradient
      CHECK(!l.contains("allreduce_s"));
    }
    if (l.contains("val_accuracy")) ++validations;
  }
  CHECK(steps == 100);
  CHECK(validations == 2);  // rank 0 at step 50, and the servers' final weights
  const auto summary = json::parse(read(out / "summary.json"));
  CHECK(summary.at("mode") == "async");
  CHECK(summary.at("steps") == 100);
  CHECK(summary.at("final_val_accuracy").get<double>() > 0.85);
  // At the end every worker pulls the servers' final weights: the replicas agree again.
  CHECK(summary.at("replicas_equal") == true);

  // staleness 0 is lockstep: no worker is ever ahead of another when it reads.
  const auto sync = run_train(s.dir, {"--config", config, "--name", "lockstep", "--mode", "async", "--staleness", "0",
                                      "--max-steps", "30", "--progress-interval", "100"});
  INFO(sync.output);
  REQUIRE(sync.code == 0);
  std::size_t lockstep = 0;
  for (const auto& l : jsonl_of(s.dir / "celer_results" / "lockstep" / "metrics.jsonl")) {
    if (!l.contains("ahead")) continue;
    ++lockstep;
    CHECK(l.at("ahead") == 0);
  }
  CHECK(lockstep == 30);
}

TEST_CASE("a hybrid run is synchronous for hybrid_sync_steps, switches to asynchronous and says so", "[train]") {
  scratch s;
  const auto o = run_train(s.dir, {"--config", config, "--name", "hybrid", "--mode", "hybrid", "--hybrid-sync-steps",
                                   "30", "--max-steps", "90", "--eval-every", "30"});
  INFO(o.output);
  REQUIRE(o.code == 0);
  CHECK_THAT(o.output, Contains("hybrid: synchronous for 30 steps, then") &&
                         Contains("switched to asynchronous training at step 30 (hybrid_sync_steps 30) in"));
  // The progress lines say allreduce before the switch and push/pull after it.
  const auto at = o.output.find("switched to asynchronous");
  CHECK(o.output.rfind("allreduce", at) != std::string::npos);
  CHECK(o.output.find("allreduce", at) == std::string::npos);
  CHECK(o.output.find("push/pull", at) != std::string::npos);
  const fs::path out = s.dir / "celer_results" / "hybrid";
  std::size_t sync_steps = 0, async_steps = 0;
  for (const auto& l : jsonl_of(out / "metrics.jsonl")) {
    if (!l.contains("loss")) continue;
    const bool before = l.at("step").get<int>() <= 30;
    CHECK(l.at("mode") == (before ? "sync" : "async"));
    (before ? sync_steps : async_steps) += 1;
  }
  CHECK(sync_steps == 30);
  CHECK(async_steps == 60);
  const auto summary = json::parse(read(out / "summary.json"));
  CHECK(summary.at("mode") == "hybrid");
  CHECK(summary.at("switched_at_step") == 30);
  CHECK(summary.at("final_val_accuracy").get<double>() > 0.85);
  CHECK(summary.at("replicas_equal") == true);
}

TEST_CASE("a run stops once a validation reaches target_accuracy and records when", "[train]") {
  scratch s;
  const auto o = run_train(s.dir, {"--config", config, "--name", "target", "--target-accuracy", "0.9", "--eval-every",
                                   "5", "--progress-interval", "100"});
  INFO(o.output);
  REQUIRE(o.code == 0);
  CHECK_THAT(o.output, Contains("reached the target accuracy 0.9000 at step"));
  const auto summary = json::parse(read(s.dir / "celer_results" / "target" / "summary.json"));
  CHECK(summary.at("reached_target") == true);
  const auto at = summary.at("steps_to_target").get<int>();
  CHECK(at % 5 == 0);
  CHECK(at < 184);                       // before the run's last step
  CHECK(summary.at("steps") == at);      // synchronous: it stops right there
  CHECK(summary.at("seconds_to_target").get<double>() > 0);
  // 2 workers x 32 samples a step, less where an epoch's last batch is short.
  CHECK(summary.at("samples_to_target").get<int>() <= at * 64);
  CHECK(summary.at("samples_to_target").get<int>() > at * 56);
  CHECK(summary.at("final_val_accuracy").get<double>() >= 0.9);
}

TEST_CASE("asynchronous modes refuse what they do not support, naming the key", "[train]") {
  scratch s;
  const auto mode = run_train(s.dir, {"--config", s.write("m.yaml", "mode: asynchronous\n").string()});
  CHECK(mode.code == 2);
  CHECK_THAT(mode.output, Contains("key 'mode' is 'asynchronous': use sync, async or hybrid"));
  const auto comp = run_train(s.dir, {"--mode", "hybrid", "--compression", "sign", "--name", "comp"});
  CHECK(comp.code == 2);
  CHECK_THAT(comp.output, Contains("key 'compression'") && Contains("with mode hybrid"));
  const auto rule = run_train(s.dir, {"--mode", "hybrid", "--hybrid-sync-steps", "0", "--name", "rule"});
  CHECK(rule.code == 2);
  CHECK_THAT(rule.output, Contains("hybrid needs a rule to switch by"));
  const auto stale = run_train(s.dir, {"--config", s.write("st.yaml", "staleness: -1\n").string()});
  CHECK(stale.code == 2);
  CHECK_THAT(stale.output, Contains("key 'staleness'"));
  CHECK(!fs::exists(s.dir / "celer_results"));  // a refused run writes nothing
  // An asynchronous run that took no checkpoint: --resume says what to set.
  REQUIRE(run_train(s.dir, {"--mode", "async", "--name", "done", "--max-steps", "10"}).code == 0);
  const auto resume = run_train(s.dir, {"--resume", "--name", "done"});
  CHECK(resume.code == 1);
  CHECK_THAT(resume.output, Contains("nothing to resume from") && Contains("checkpoint_every > 0"));
}

TEST_CASE("an asynchronous run replaces a failed worker from the servers, and resumes from the servers' checkpoint", "[train]") {
  scratch s;
  // Worker 1 throws at step 30: its replacement joins the servers at the clock they hold
  // for it (29) while worker 0 goes on; every step is logged once, and the run learns.
  const auto o = run_train(s.dir, {"--config", config, "--name", "af", "--mode", "async", "--max-failures", "1",
                                   "--max-steps", "80", "--progress-interval", "100"},
                           "1:30");
  INFO(o.output);
  REQUIRE(o.code == 0);
  CHECK_THAT(o.output, Contains("replacing worker 1 alone, from the parameter servers") && Contains("worker 1 goes on at step 29"));
  std::vector<std::int64_t> steps;
  for (const auto& l : jsonl_of(s.dir / "celer_results" / "af" / "metrics.jsonl"))
    if (l.contains("loss")) steps.push_back(l.at("step").get<std::int64_t>());
  REQUIRE(steps.size() == 80);
  for (std::size_t i = 0; i < steps.size(); ++i) CHECK(steps[i] == static_cast<std::int64_t>(i) + 1);
  const auto af = json::parse(read(s.dir / "celer_results" / "af" / "summary.json"));
  CHECK(af.at("recoveries")[0].at("how") == "servers");
  CHECK(af.at("replicas_equal") == true);
  CHECK(af.at("final_val_accuracy").get<double>() > 0.85);

  // Checkpoints every 20 steps hold the servers' weights and Adam state; a run stopped at
  // 40 resumes there, every worker from step 40, and finishes.
  const std::vector<std::string> common{"--config", config, "--mode", "async", "--checkpoint-every", "20", "--progress-interval", "100"};
  auto args = [&](std::vector<std::string> more) {
    more.insert(more.begin(), common.begin(), common.end());
    return more;
  };
  REQUIRE(run_train(s.dir, args({"--name", "ack", "--max-steps", "40"})).code == 0);
  const auto again = run_train(s.dir, {"--name", "ack", "--resume", "--max-steps", "80", "--progress-interval", "100"});
  INFO(again.output);
  REQUIRE(again.code == 0);
  CHECK_THAT(again.output, Contains("resumed from checkpoint") && Contains("at step 40 (asynchronous: the parameter servers'"));
  const auto ack = json::parse(read(s.dir / "celer_results" / "ack" / "summary.json"));
  CHECK(ack.at("steps") == 80);
  CHECK(ack.at("replicas_equal") == true);
  CHECK(ack.at("final_val_accuracy").get<double>() > 0.85);
}

TEST_CASE("a bad config exits 2 naming the key and what to write instead", "[train]") {
  scratch s;
  const auto typo = run_train(s.dir, {"--config", s.write("typo.yaml", "num_wrokers: 2\n").string()});
  CHECK(typo.code == 2);
  CHECK_THAT(typo.output, Contains("typo.yaml:1: unknown key 'num_wrokers'") && Contains("Did you mean 'num_workers'?"));
  const auto value = run_train(s.dir, {"--config", s.write("value.yaml", "optimizer: adagrad\n").string()});
  CHECK(value.code == 2);
  CHECK_THAT(value.output, Contains("key 'optimizer'") && Contains("adam, adamw or sgd"));
  const auto compression = run_train(s.dir, {"--config", s.write("c.yaml", "compression: gzip\n").string()});
  CHECK(compression.code == 2);
  CHECK_THAT(compression.output, Contains("key 'compression'") && Contains("none, sign or topk"));
  const auto type = run_train(s.dir, {"--config", s.write("type.yaml", "lr: fast\n").string()});
  CHECK(type.code == 2);
  CHECK_THAT(type.output, Contains("key 'lr' cannot be 'fast'"));
  const auto cpus = run_train(s.dir, {"--num-workers", "3", "--num-cpus", "2", "--name", "cpus"});
  CHECK(cpus.code == 2);
  CHECK_THAT(cpus.output, Contains("need 3.00 CPUs") && Contains("cpus_per_worker"));
  const auto nothing = run_train(s.dir, {"--resume", "--name", "never-ran"});
  CHECK(nothing.code == 2);
  CHECK_THAT(nothing.output, Contains("nothing to resume"));
  CHECK(!fs::exists(s.dir / "celer_results"));  // a refused run writes nothing
}

TEST_CASE("the shipped config reads back from its own run.json unchanged", "[train]") {
  namespace app = celer::train_app;
  auto cfg = app::load_config_file(config);
  REQUIRE(cfg);
  REQUIRE(app::validate(*cfg));
  auto again = app::parse_config(app::to_json(*cfg), "run.json");
  REQUIRE(again);
  CHECK(app::to_json(*again) == app::to_json(*cfg));
}

TEST_CASE("the config a run would use, after flags, is printed by --print-config and reads back", "[train]") {
  scratch s;
  const auto printed = run_train(s.dir, {"--config", config, "--num-workers", "3", "--mode", "async", "--print-config"});
  REQUIRE(printed.code == 0);
  CHECK_THAT(printed.output, Contains("num_workers: 3\n"));
  CHECK_THAT(printed.output, Contains("mode: \"async\"\n"));
  CHECK_THAT(printed.output, Contains("# "));  // each key under its line
  // Read back as a config, it prints the same.
  const auto file = s.write("printed.yaml", printed.output);
  const auto again = run_train(s.dir, {"--config", file.string(), "--print-config"});
  REQUIRE(again.code == 0);
  const auto body = [](const std::string& text) { return text.substr(text.find('\n') + 1); };  // less the header
  CHECK(body(again.output) == body(printed.output));
}
