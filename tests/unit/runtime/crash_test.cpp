// A fatal signal writes its name, the pid and a backtrace to the log, and the process still
// dies by that signal.
#include "crash.hpp"

#include <catch2/catch.hpp>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <execinfo.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

using Catch::Matchers::Contains;

namespace {

struct crashed {
  int status = 0;
  pid_t pid = 0;
  std::string log;
};

/// Forks a child that installs the handler (logging to a file) and then runs `crash`.
template <class F>
crashed crash_child(F crash) {
  char path[] = "/tmp/celer-crash-test.XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  // Loads the unwinder here: the child of a threaded process should not load libraries.
  void* warm[2];
  (void)::backtrace(warm, 2);
  crashed out;
  out.pid = ::fork();
  REQUIRE(out.pid >= 0);
  if (out.pid == 0) {
    // Catch's own handlers are inherited: the child starts from the defaults.
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(sig, SIG_DFL);
    celer::install_crash_handler(fd);
    crash();
    ::_exit(0);  // not reached
  }
  REQUIRE(::waitpid(out.pid, &out.status, 0) == out.pid);
  ::close(fd);
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  out.log = ss.str();
  ::unlink(path);
  return out;
}

[[gnu::noinline]] void crash_in_a_named_function() { ::raise(SIGSEGV); }

// Not instrumented: under the sanitizer builds a checked store would report and abort
// instead of faulting.
[[gnu::noinline, gnu::no_sanitize_undefined, gnu::no_sanitize_address]] void write_through_null() {
  // The pointer itself is volatile: the compiler cannot see that it is null and drop the
  // store (or turn it into a trap).
  volatile int* volatile nowhere = nullptr;
  *nowhere = 1;
}

} // namespace

TEST_CASE("a segfault writes the signal, the pid and a backtrace to the log and still kills",
          "[crash][fault]") {
  const auto c = crash_child([] { crash_in_a_named_function(); });
  REQUIRE(WIFSIGNALED(c.status));
  CHECK(WTERMSIG(c.status) == SIGSEGV);
  CHECK_THAT(c.log, Contains("SIGSEGV (signal 11)") &&
                      Contains("in pid " + std::to_string(c.pid)) && Contains("backtrace:"));
  // backtrace_symbols_fd lines: "binary(symbol+0x..)[0x...]", several of them.
  std::size_t frames = 0;
  for (auto at = c.log.find(")[0x"); at != std::string::npos; at = c.log.find(")[0x", at + 1)) {
    ++frames;
  }
  CHECK(frames >= 3);
  CHECK_THAT(c.log, Contains("end of backtrace"));
}

TEST_CASE("an abort is logged with its backtrace and still ends the process by SIGABRT",
          "[crash][fault]") {
  const auto c = crash_child([] { std::abort(); });
  REQUIRE(WIFSIGNALED(c.status));
  CHECK(WTERMSIG(c.status) == SIGABRT);
  CHECK_THAT(c.log, Contains("SIGABRT (signal 6)") && Contains(")[0x"));
}

TEST_CASE("a real fault (a write through a null pointer) is logged with its address",
          "[crash][fault]") {
  const auto c = crash_child([] { write_through_null(); });
  REQUIRE(WIFSIGNALED(c.status));
  CHECK(WTERMSIG(c.status) == SIGSEGV);
  CHECK_THAT(c.log, Contains("SIGSEGV") && Contains("at address 0x0;"));
}
