#pragma once
// Cluster-mode workers: each is a process running the job's binary in worker mode. The
// launcher forks and execs it with the facts it needs in its environment, reaps it when it
// exits, and tells the node agent (worker_died) so that its work fails instead of hanging.

#include "node/node_agent.hpp"
#include "sandbox/job_sandbox.hpp"
#include "transport/credentials.hpp"

#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

#include <sys/types.h>

namespace celer {

class process_launcher final : public worker_launcher {
public:
  struct config {
    node_id node;
    address node_addr;   // with the node process's endpoint
    address head_addr;
    /// The node's credentials: each worker gets its job's credential from them, never the
    /// cluster secret.
    credentials creds;
    /// The encryption knob, passed on (every process of a cluster uses the same).
    bool encrypt = true;
    std::string node_ip;
    std::filesystem::path log_dir;
    /// Workers given no GPU see none (CUDA_VISIBLE_DEVICES empty) on a node that has some.
    bool node_has_gpus = false;
    /// Where the node unpacks jobs' working directories (the node agent's packages_dir): a
    /// worker of a job that has one runs in <packages_dir>/<digest>, and a relative binary
    /// is taken from there.
    std::filesystem::path packages_dir;
    /// Workers run confined in it (sandbox/job_sandbox.hpp) when set; it outlives the
    /// launcher.
    sandbox::job_sandbox* sandbox = nullptr;
  };
  /// `local` reaches the node agent in this process (for worker_died).
  process_launcher(transport& local, config cfg);
  ~process_launcher() override;

  launched launch(const worker_id& id, const protocol::task_spec& first,
                  const std::vector<int>& gpus) override;
  void terminate(const worker_id& id, const address& addr, const actor_id& actor) override;
  /// The job's user (when it has one) and folder on this machine go (job_sandbox).
  void job_finished(const job_id& job) override;
  [[nodiscard]] std::optional<int> pid_of(const worker_id& id) const override;
  /// Waits up to `grace` for every worker to exit, then kills what is left and waits for
  /// it to be reaped (child_reaper.hpp).
  void stop(std::chrono::milliseconds grace);

private:
  /// The reaper's word: child `pid` exited with `status`.
  void exited(pid_t pid, int status);

  transport& local_;
  config cfg_;
  mutable std::mutex mutex_;  // guards pids_, by_worker_, stopping_
  std::condition_variable cv_;
  std::unordered_map<pid_t, worker_id> pids_;
  std::unordered_map<worker_id, pid_t> by_worker_;
  bool stopping_ = false;
};

} // namespace celer
