#include "child_reaper.hpp"

#include <cerrno>
#include <cstring>  // sigabbrev_np

#include <sys/wait.h>

namespace celer {

child_reaper& child_reaper::instance() {
  // Never destroyed: its detached thread may outlive static destruction.
  static auto* r = new child_reaper();
  return *r;
}

void child_reaper::watch(pid_t pid, std::function<void(int)> exited) {
  std::unique_lock lock(mutex_);
  if (auto it = early_.find(pid); it != early_.end()) {
    const int status = it->second;
    early_.erase(it);
    lock.unlock();
    exited(status);
    return;
  }
  watched_[pid] = std::move(exited);
  new_watch_ = true;
  if (!running_) {
    running_ = true;
    std::thread([this] { loop(); }).detach();
  }
  cv_.notify_all();
}

void child_reaper::loop() {
  for (;;) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      // ECHILD: no child now. Sleep until someone watches a new one (its fork came first,
      // so the next waitpid finds it).
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return new_watch_; });
      new_watch_ = false;
      continue;
    }
    std::function<void(int)> exited;
    {
      std::lock_guard lock(mutex_);
      if (auto it = watched_.find(pid); it != watched_.end()) {
        exited = std::move(it->second);
        watched_.erase(it);
      } else {
        if (early_.size() >= 4096) early_.clear();
        early_[pid] = status;
      }
    }
    if (exited) exited(status);
  }
}

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = sigabbrev_np(sig);
    return "was killed by signal " + std::to_string(sig) +
           (name != nullptr ? std::string(" (SIG") + name + ")" : std::string());
  }
  return "ended (status " + std::to_string(status) + ")";
}

} // namespace celer
