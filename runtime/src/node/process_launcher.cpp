#include "node/process_launcher.hpp"

#include "child_reaper.hpp"
#include "log.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <vector>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace celer {

process_launcher::process_launcher(transport& local, config cfg)
  : local_(local), cfg_(std::move(cfg)) {}

process_launcher::~process_launcher() { stop(std::chrono::milliseconds(0)); }

worker_launcher::launched process_launcher::launch(const worker_id& id,
                                                    const protocol::task_spec& first,
                                                    const std::vector<int>& gpus) {
  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  // A job with a working directory runs in the node's copy of it (the node agent unpacked
  // it before this), and names a program inside it relative to its root.
  std::string workdir;
  std::string binary = first.binary;
  if (!first.package.empty() && !cfg_.packages_dir.empty()) {
    workdir = (cfg_.packages_dir / first.package).string();
    if (!binary.empty() && binary.front() != '/') binary = workdir + "/" + binary;
  }
  const std::string log = (cfg_.log_dir / ("worker-" + id.short_hex() + ".log")).string();
  // The worker's sandbox (its job's user, Landlock), its own temporary directory inside.
  sandbox::confinement box;
  std::string tmpdir;
  if (cfg_.sandbox != nullptr && cfg_.sandbox->active()) {
    tmpdir = (cfg_.sandbox->folder_of(first.job) / "tmp").string();
    std::vector<std::filesystem::path> read_also;
    if (workdir.empty()) {
      // It runs where its node runs, and may read there, unless that folder holds the
      // node's session or the jobs' folders.
      std::error_code ec;
      const auto here = std::filesystem::current_path(ec);
      auto inside = [&](const std::filesystem::path& p) {
        const auto rel = std::filesystem::weakly_canonical(p, ec).lexically_relative(here);
        return !rel.empty() && *rel.begin() != "..";
      };
      if (!ec && !inside(cfg_.log_dir) && !inside(cfg_.sandbox->folder_of(first.job))) read_also.push_back(here);
    }
    const char* path_env = std::getenv("PATH");
    auto confined = cfg_.sandbox->confine(first.job, {.workdir = workdir,
                                                      .workdir_shared = true,
                                                      .tmpdir = tmpdir,
                                                      .binary = binary,
                                                      .path_env = path_env != nullptr ? path_env : "",
                                                      .read_also = std::move(read_also)});
    if (!confined) {
      CELER_LOG(error, "node", "cannot confine a worker of job " + first.job.short_hex() + ": " + confined.error().message());
      (void)local_.send(cfg_.node_addr, protocol::worker_died{id, "could not be confined: " + confined.error().message()});
      return {address{id, {}}, false};
    }
    box = std::move(*confined);
  }
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    // The node's own CELER_ settings are not the worker's (its address, its token), except
    // the knobs of celer::peer, which a node started with them gives its workers.
    if ((std::strncmp(*e, "CELER_", 6) != 0 || std::strncmp(*e, "CELER_PEER_", 11) == 0) &&
        std::strncmp(*e, "CUDA_VISIBLE_DEVICES=", 21) != 0 && (tmpdir.empty() || std::strncmp(*e, "TMPDIR=", 7) != 0)) {
      const char* eq = std::strchr(*e, '=');
      if (eq != nullptr && !first.env_vars.empty() &&
          first.env_vars.contains(std::string(*e, static_cast<std::size_t>(eq - *e)))) {
        continue;  // the work's own, below
      }
      env_strings.emplace_back(*e);
    }
  }
  // The work's env_vars (checked by the local scheduler: none is the runtime's own).
  for (const auto& [name, value] : first.env_vars) env_strings.push_back(name + "=" + value);
  if (!tmpdir.empty()) env_strings.push_back("TMPDIR=" + tmpdir);
  if (const auto label = box.label(); !label.empty()) env_strings.push_back("CELER_JOB_CONFINED=" + label);
  // The worker sees only its GPUs; on a node with GPUs, one given none sees none.
  std::string ids;
  for (int g : gpus) ids += (ids.empty() ? "" : ",") + std::to_string(g);
  // Indices count as NVML does, in PCI bus order (CUDA's own default is fastest first).
  if (!gpus.empty() || cfg_.node_has_gpus) {
    env_strings.push_back("CUDA_VISIBLE_DEVICES=" + ids);
    env_strings.push_back("CUDA_DEVICE_ORDER=PCI_BUS_ID");
  }
  env_strings.push_back("CELER_WORKER_GPUS=" + ids);
  env_strings.push_back("CELER_WORKER_ID=" + id.hex());
  env_strings.push_back("CELER_WORKER_NODE=" + cfg_.node.hex());
  env_strings.push_back("CELER_WORKER_NODE_ENDPOINT=" + cfg_.node_addr.endpoint);
  env_strings.push_back("CELER_WORKER_HEAD_ENDPOINT=" + cfg_.head_addr.endpoint);
  env_strings.push_back("CELER_WORKER_JOB=" + first.job.hex());
  // The job's credential and the cluster's public key: enough to speak as the job to head,
  // nodes and the job's other processes, nothing more.
  auto job_secret = cfg_.creds.job_secret_hex(first.job);
  if (!job_secret) {
    CELER_LOG(error, "node", "cannot issue a credential for job " + first.job.short_hex() + ": " +
                               job_secret.error().message());
    (void)local_.send(cfg_.node_addr, protocol::worker_died{id, "could not be given a credential"});
    return {address{id, {}}, false};
  }
  env_strings.push_back("CELER_JOB_CREDENTIAL=" + *job_secret);
  env_strings.push_back("CELER_CLUSTER_KEY=" + cfg_.creds.cluster_public_hex());
  env_strings.push_back(std::string("CELER_ENCRYPTION=") + (cfg_.encrypt ? "1" : "0"));
  env_strings.push_back("CELER_NODE_IP=" + cfg_.node_ip);
  if (!workdir.empty()) {
    env_strings.push_back("CELER_JOB_PACKAGE=" + first.package);
    env_strings.push_back("CELER_JOB_WORKING_DIR=" + workdir);
  }
  if (const char* level = std::getenv("CELER_LOG_LEVEL"); level != nullptr && !first.env_vars.contains("CELER_LOG_LEVEL")) {
    env_strings.push_back(std::string("CELER_LOG_LEVEL=") + level);
  }
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string arg0 = binary;
  char* argv[] = {arg0.data(), nullptr};
  // A program inside the working directory is run from it by a relative path: a job's user
  // may not traverse the node's folders above it.
  std::string exec_path = binary;
  if (!workdir.empty() && binary.starts_with(workdir + "/")) exec_path = "." + binary.substr(workdir.size());
  const std::string exec_failed = "celer: cannot run worker binary " + binary + ": ";
  const std::string chdir_failed = "celer: cannot enter the job's working directory " + workdir + ": ";
  const std::string confine_failed = "celer: cannot enter the job's sandbox" +
                                     (box.drops_user() ? " as user " + std::to_string(box.uid()) : std::string()) + ": ";

  // The worker's own reading (its job's output): for this user only, and never through a
  // link planted in the log directory.
  const int log_fd =
    ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (log_fd < 0) {
    CELER_LOG(warn, "node", "worker " + id.short_hex() + " runs without a log: cannot open " + log +
                              ": " + std::strerror(errno));
  }
  const pid_t parent = ::getpid();
  std::unique_lock lock(mutex_);
  const pid_t pid = ::fork();
  if (pid == 0) {
    // The worker dies with its node agent.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    if (log_fd >= 0) {
      ::dup2(log_fd, STDOUT_FILENO);
      ::dup2(log_fd, STDERR_FILENO);
    }
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
    if (!workdir.empty() && ::chdir(workdir.c_str()) != 0) {
      const char* why = ::strerror(errno);
      (void)!::write(STDERR_FILENO, chdir_failed.data(), chdir_failed.size());
      (void)!::write(STDERR_FILENO, why, std::strlen(why));
      (void)!::write(STDERR_FILENO, "\n", 1);
      ::_exit(127);
    }
    if (const int err = box.enter(SIGKILL); err != 0) {
      const char* why = ::strerror(err);
      (void)!::write(STDERR_FILENO, confine_failed.data(), confine_failed.size());
      (void)!::write(STDERR_FILENO, why, std::strlen(why));
      (void)!::write(STDERR_FILENO, "\n", 1);
      ::_exit(126);
    }
    if (::getppid() != parent) ::_exit(1);
    ::execve(exec_path.c_str(), argv, envp.data());
    const int err = errno;
    (void)!::write(STDERR_FILENO, exec_failed.data(), exec_failed.size());
    const char* why = ::strerror(err);
    (void)!::write(STDERR_FILENO, why, std::strlen(why));
    (void)!::write(STDERR_FILENO, "\n", 1);
    ::_exit(127);
  }
  if (log_fd >= 0) ::close(log_fd);
  if (pid < 0) {
    CELER_LOG(error, "node", std::string("cannot start a worker process: ") + std::strerror(errno));
    lock.unlock();
    (void)local_.send(cfg_.node_addr,
                      protocol::worker_died{id, "could not be started (fork failed)"});
    return {address{id, {}}, false};
  }
  pids_[pid] = id;
  by_worker_[id] = pid;
  lock.unlock();
  child_reaper::instance().watch(pid, [this, pid](int status) { exited(pid, status); });
  CELER_LOG(info, "node", "started worker " + id.short_hex() + " as pid " + std::to_string(pid));
  return {address{id, {}}, false};
}

void process_launcher::terminate(const worker_id& id, const address&, const actor_id&) {
  std::lock_guard lock(mutex_);
  auto it = by_worker_.find(id);
  if (it != by_worker_.end()) ::kill(it->second, SIGKILL);
}

std::optional<int> process_launcher::pid_of(const worker_id& id) const {
  std::lock_guard lock(mutex_);
  auto it = by_worker_.find(id);
  if (it == by_worker_.end()) return std::nullopt;
  return static_cast<int>(it->second);
}

void process_launcher::job_finished(const job_id& job) {
  // The job's driver may still be exiting on this machine (it said the job ended): nothing
  // is killed here; the head's job manager kills what a submitted driver left.
  if (cfg_.sandbox != nullptr) cfg_.sandbox->job_finished(job, /*kill_left=*/false);
}

void process_launcher::exited(pid_t pid, int status) {
  worker_id id;
  {
    std::lock_guard lock(mutex_);
    auto it = pids_.find(pid);
    if (it == pids_.end()) return;
    id = it->second;
    by_worker_.erase(id);
    pids_.erase(it);
  }
  std::string reason = describe_exit(status);
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    reason += " (see " + (cfg_.log_dir / ("worker-" + id.short_hex() + ".log")).string() + ")";
  }
  (void)local_.send(cfg_.node_addr, protocol::worker_died{id, std::move(reason)});
  std::lock_guard lock(mutex_);
  cv_.notify_all();
}

void process_launcher::stop(std::chrono::milliseconds grace) {
  std::unique_lock lock(mutex_);
  if (stopping_) return;
  stopping_ = true;
  if (!cv_.wait_for(lock, grace, [&] { return pids_.empty(); })) {
    for (const auto& [pid, id] : pids_) ::kill(pid, SIGKILL);
  }
  // The reaper calls exited() for each: it uses this object, so wait for the last.
  cv_.wait(lock, [&] { return pids_.empty(); });
}

} // namespace celer
