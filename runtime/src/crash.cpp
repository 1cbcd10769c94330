#include "crash.hpp"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <mutex>

#include <execinfo.h>

namespace celer {
namespace {

constexpr int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr std::size_t fatal_count = sizeof fatal_signals / sizeof fatal_signals[0];

std::atomic<int> log_fd_{STDERR_FILENO};
/// The handlers ours replaced (written once, before ours is installed; read by it).
struct sigaction previous_[fatal_count];
/// Set by the first fatal signal: a second one (in another thread, or in the handler
/// itself) goes straight to the handler before ours.
std::atomic<bool> reporting_{false};
/// The installing thread's alternate signal stack, so that a stack overflow there can be
/// reported (other threads report on their own stack).
alignas(16) char alt_stack_[64 * 1024];

const char* name_of(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
    default: return "signal";
  }
}

// Async-signal-safe output: write(2) only, numbers formatted by hand.
void put(int fd, const char* s, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, s, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;
    }
    s += w;
    n -= static_cast<std::size_t>(w);
  }
}
void put(int fd, const char* s) { put(fd, s, std::strlen(s)); }
void put_number(int fd, std::uint64_t v, unsigned base) {
  char buf[24];
  std::size_t i = sizeof buf;
  do {
    buf[--i] = "0123456789abcdef"[v % base];
    v /= base;
  } while (v > 0 && i > 0);
  put(fd, buf + i, sizeof buf - i);
}

void on_fatal(int sig, siginfo_t* info, void*) {
  const int saved_errno = errno;
  if (!reporting_.exchange(true)) {
    const int fd = log_fd_.load(std::memory_order_relaxed);
    put(fd, "\n[celer fatal] crash: ");
    put(fd, name_of(sig));
    put(fd, " (signal ");
    put_number(fd, static_cast<std::uint64_t>(sig), 10);
    put(fd, ") in pid ");
    put_number(fd, static_cast<std::uint64_t>(::getpid()), 10);
    if (info != nullptr && (sig == SIGSEGV || sig == SIGBUS)) {
      put(fd, " at address 0x");
      put_number(fd, reinterpret_cast<std::uintptr_t>(info->si_addr), 16);
    }
    put(fd, "; backtrace:\n");
    void* frames[64];
    const int n = ::backtrace(frames, 64);
    ::backtrace_symbols_fd(frames, n, fd);
    put(fd, "[celer fatal] end of backtrace\n");
  }
  // The signal takes its course with the handler before ours (usually the default action).
  std::size_t i = 0;
  while (i < fatal_count && fatal_signals[i] != sig) ++i;
  if (i < fatal_count) ::sigaction(sig, &previous_[i], nullptr);
  errno = saved_errno;
  // A signal that was sent (kill, raise, abort) is sent again, delivered when this handler
  // returns; a fault (si_code > 0) recurs by itself when the instruction runs again.
  if (info == nullptr || info->si_code <= 0) ::raise(sig);
}

} // namespace

void install_crash_handler(int log_fd) {
  log_fd_.store(log_fd, std::memory_order_relaxed);
  static std::once_flag once;
  std::call_once(once, [] {
    // The first backtrace() loads libgcc's unwinder (it allocates): done now, not in the
    // handler.
    void* warm[2];
    (void)::backtrace(warm, 2);
    stack_t current{};
    if (::sigaltstack(nullptr, &current) == 0 && (current.ss_flags & SS_DISABLE) != 0) {
      stack_t alt{};
      alt.ss_sp = alt_stack_;
      alt.ss_size = sizeof alt_stack_;
      (void)::sigaltstack(&alt, nullptr);
    }
  });
  // Ours again wherever something replaced it since (a forked child that reset them, a
  // library), keeping what it replaced as the handler to hand the signal on to.
  static std::mutex installing;  // guards previous_ against two installs at once
  std::lock_guard lock(installing);
  struct sigaction sa {};
  sa.sa_sigaction = on_fatal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (std::size_t i = 0; i < fatal_count; ++i) {
    struct sigaction current {};
    if (::sigaction(fatal_signals[i], nullptr, &current) == 0 &&
        (current.sa_flags & SA_SIGINFO) != 0 && current.sa_sigaction == on_fatal) {
      continue;
    }
    (void)::sigaction(fatal_signals[i], &sa, &previous_[i]);
  }
}

} // namespace celer
