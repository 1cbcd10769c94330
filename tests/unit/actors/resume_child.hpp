#pragma once
// A trainer child process for the exact-resume tests (checkpoint_resume_test.cpp without
// LibTorch, torch_resume_test.cpp with it): spawned with its output read line by line,
// SIGKILLed on demand, killed when it goes out of scope. The trainers print "loss STEP HEX",
// "restored STEP", "persisted STEP", "paused STEP" and "done".
#include <catch2/catch.hpp>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

extern char** environ;

namespace resume_test {

/// A child trainer, its output read line by line; killed when it goes out of scope.
class child {
public:
  /// Runs `program` with `args`.
  child(const std::string& program, std::vector<std::string> args) {
    args.insert(args.begin(), program);
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

} // namespace resume_test
