#pragma once
// Driver processes of submitted jobs (job_manager.hpp's launcher): fork and exec of the
// argument vector (execvp: a program without a slash is looked for in PATH), in the job's
// folder, in a process group of its own (so a stop reaches what the driver started), its
// stdout and stderr appended to the job's log, stdin from /dev/null. A driver dies with
// the head (SIGTERM when the head process ends). Exec failures are reported by start()
// itself, through a close-on-exec pipe, not found later in a log.

#include "jobs/job_manager.hpp"

namespace celer::jobs {

class driver_process_launcher final : public driver_launcher {
public:
  [[nodiscard]] expected<int> start(const driver_spec& spec, std::function<void(int pid, int status)> exited) override;
  void signal(int pid, int sig) override;
};

} // namespace celer::jobs
