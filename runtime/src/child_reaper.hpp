#pragma once
// The one reaper of this process's child processes. A daemon runs two kinds (a node's
// workers, process_launcher.hpp; the head's job drivers, jobs/driver_supervisor.hpp); a
// waitpid(-1) in one would take the other's exit statuses, so both watch their children here
// and one thread reaps them all and tells each watcher its own.
//
//   const pid_t pid = ::fork();  ...
//   child_reaper::instance().watch(pid, [](int status) { ... });   // from the parent
//
// A child that exits before it is watched is kept (with its status) until it is; a child
// nobody watches is reaped and forgotten. Callbacks run on the reaper's thread, one at a
// time; they must not call watch() for a pid that may already have exited while holding a
// lock the callback takes (watch() may call the callback at once, on the caller's thread).

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include <sys/types.h>

namespace celer {

class child_reaper {
public:
  /// The process's reaper (its thread starts on the first watch and lives as long as the
  /// process; it sleeps while there is no child).
  static child_reaper& instance();

  /// Calls `exited(status)` (waitpid's status) when child `pid` exits: from the reaper's
  /// thread, or at once from this one if it already has.
  void watch(pid_t pid, std::function<void(int status)> exited);

  child_reaper(const child_reaper&) = delete;
  child_reaper& operator=(const child_reaper&) = delete;

private:
  child_reaper() = default;
  void loop();

  std::mutex mutex_;  // guards everything below
  std::condition_variable cv_;
  std::unordered_map<pid_t, std::function<void(int)>> watched_;
  /// Children reaped before anyone watched them: their statuses (bounded: a child nobody
  /// will ever watch is dropped when the map grows past a few thousand).
  std::unordered_map<pid_t, int> early_;
  bool running_ = false;
  /// A child was watched since the reaper last found none.
  bool new_watch_ = false;
};

/// A wait status in words: "exited with status 3", "was killed by signal 9 (SIGKILL)".
std::string describe_exit(int status);

} // namespace celer
