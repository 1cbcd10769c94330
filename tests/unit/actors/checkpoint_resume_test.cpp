// Exact resume: a trainer killed with SIGKILL and resumed from its checkpoint gives the
// same loss sequence, bit for bit, as a run that was never interrupted (on CPU, without
// LibTorch: the trainer is checkpoint_resume_child.cpp).
#include <catch2/catch.hpp>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "checkpoint_fixtures.hpp"

extern char** environ;

namespace {

/// The child trainer, its output read line by line; killed when it goes out of scope.
class child {
public:
  explicit child(std::vector<std::string> args) {
    args.insert(args.begin(), CELER_CHECKPOINT_CHILD);
    int fds[2];
    int in[2];
    REQUIRE(::pipe(fds) == 0);
    REQUIRE(::pipe(in) == 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    for (int fd : {fds[0], fds[1], in[0], in[1]}) posix_spawn_file_actions_addclose(&actions, fd);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = ::posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    ::close(in[0]);
    stdin_ = in[1];  // held open: a paused child waits until it closes
    REQUIRE(rc == 0);
    out_ = ::fdopen(fds[0], "r");
  }
  ~child() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_ != nullptr) std::fclose(out_);
    if (stdin_ >= 0) ::close(stdin_);
  }
  child(const child&) = delete;
  child& operator=(const child&) = delete;

  /// The next line of its output, without the newline; "" at the end.
  std::string line() {
    char buf[256];
    if (std::fgets(buf, sizeof buf, out_) == nullptr) return {};
    std::string s(buf);
    if (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
  }
  void kill_now() {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    CHECK(WIFSIGNALED(status));
  }
  /// Its exit code once it ends.
  int exit_code() {
    ::close(stdin_);
    stdin_ = -1;
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

private:
  pid_t pid_ = -1;
  std::FILE* out_ = nullptr;
  int stdin_ = -1;
};

/// Reads a run's output to its end: step -> loss (hex float text); "restored" and "done".
struct run_output {
  std::map<long long, std::string> loss;
  long long restored = -1;
  bool done = false;
};
run_output read_all(child& c) {
  run_output r;
  for (std::string l = c.line(); !l.empty(); l = c.line()) {
    long long step = 0;
    char text[64];
    if (std::sscanf(l.c_str(), "loss %lld %63s", &step, text) == 2) r.loss[step] = text;
    if (std::sscanf(l.c_str(), "restored %lld", &step) == 1) r.restored = step;
    if (l == "done") r.done = true;
  }
  return r;
}

} // namespace

TEST_CASE("a run killed with SIGKILL and resumed gives the same losses, bit for bit",
          "[actors][checkpoint][resume]") {
  checkpoint_test::temp_dir reference_dir, killed_dir;
  const std::string steps = "300", every = "50";

  child reference({reference_dir.path.string(), steps, every});
  const auto expected = read_all(reference);
  REQUIRE(reference.exit_code() == 0);
  REQUIRE(expected.done);
  REQUIRE(expected.loss.size() == 300);
  CHECK(expected.loss.at(300) != expected.loss.at(1));  // it learns something

  {
    // Killed just after save(150) returned: its writers are persisting it (or have), and
    // checkpoint 100 is durable (the trainer waited for it).
    child victim({killed_dir.path.string(), steps, every, "--pause-after", "150"});
    bool persisted = false;
    bool paused = false;
    while (!paused) {
      const std::string l = victim.line();
      if (l.empty()) break;  // it ended: a failure the REQUIREs below report
      if (l == "persisted 100") persisted = true;
      if (l == "paused 150") paused = true;
    }
    REQUIRE(persisted);
    REQUIRE(paused);
    victim.kill_now();
  }

  child resumed({killed_dir.path.string(), steps, every, "--resume"});
  const auto after = read_all(resumed);
  REQUIRE(resumed.exit_code() == 0);
  REQUIRE(after.done);
  // 150 if its writers finished before the kill, else 100: never anything half-written.
  CHECK((after.restored == 100 || after.restored == 150));
  REQUIRE(after.loss.size() == static_cast<std::size_t>(300 - after.restored));
  for (const auto& [step, loss] : after.loss) {
    INFO("step " << step);
    CHECK(loss == expected.loss.at(step));
  }
}
