#pragma once
// Driver processes of submitted jobs (job_manager.hpp's launcher): fork and exec of the
// argument vector (execvp: a program without a slash is looked for in PATH), in the job's
// folder, in a process group of its own (so a stop reaches what the driver started), its
// stdout and stderr appended to the job's log, stdin from /dev/null. A driver dies with
// the head (SIGTERM when the head process ends): Linux ties that to the thread that forked,
// so every fork happens on the launcher's own thread, which lives as long as it does. Exec
// failures are reported by start() itself, through a close-on-exec pipe, not found later in
// a log. With a sandbox (sandbox/job_sandbox.hpp), the driver runs confined: as its job's own
// user when the head is root, under Landlock where the kernel has it.

#include "jobs/job_manager.hpp"
#include "sandbox/job_sandbox.hpp"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace celer::jobs {

class driver_process_launcher final : public driver_launcher {
public:
  /// `sandbox` (may be null: unconfined) outlives the launcher.
  explicit driver_process_launcher(sandbox::job_sandbox* sandbox = nullptr);
  ~driver_process_launcher() override;
  driver_process_launcher(const driver_process_launcher&) = delete;
  driver_process_launcher& operator=(const driver_process_launcher&) = delete;

  /// Any thread; the fork runs on the launcher's thread.
  [[nodiscard]] expected<int> start(const driver_spec& spec, std::function<void(int pid, int status)> exited) override;
  void signal(int pid, int sig) override;

private:
  expected<int> fork_and_exec(const driver_spec& spec, std::function<void(int pid, int status)> exited);

  sandbox::job_sandbox* sandbox_;
  std::mutex mutex_;  // guards queue_ and stopping_
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::thread forker_;
};

} // namespace celer::jobs
