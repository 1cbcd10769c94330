#include "jobs/driver_process.hpp"

#include "child_reaper.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <future>

#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

namespace celer::jobs {

driver_process_launcher::driver_process_launcher(sandbox::job_sandbox* sandbox) : sandbox_(sandbox) {
  forker_ = std::thread([this] {
    std::unique_lock lock(mutex_);
    for (;;) {
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left to start
      auto next = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      next();
      lock.lock();
    }
  });
}

driver_process_launcher::~driver_process_launcher() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  forker_.join();
}

expected<int> driver_process_launcher::start(const driver_spec& spec, std::function<void(int pid, int status)> exited) {
  std::packaged_task<expected<int>()> task([&] { return fork_and_exec(spec, std::move(exited)); });
  auto result = task.get_future();
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return error(error_code::unavailable, "the head is stopping");
    queue_.emplace_back([&task] { task(); });
  }
  cv_.notify_all();
  return result.get();
}

expected<int> driver_process_launcher::fork_and_exec(const driver_spec& spec,
                                                     std::function<void(int pid, int status)> exited) {
  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  std::vector<std::string> args = spec.argv;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env = spec.env;
  const std::string cwd = spec.cwd.string();
  sandbox::confinement box;
  if (sandbox_ != nullptr) {
    std::string path_env;
    for (const auto& e : spec.env) {
      if (e.starts_with("PATH=")) path_env = e.substr(5);
    }
    auto confined = sandbox_->confine(spec.job, {.workdir = spec.cwd, .tmpdir = spec.tmpdir, .binary = args.front(),
                                                 .path_env = path_env, .read_also = {}});
    if (!confined) return error(confined.error().code(), "cannot confine the job's driver: " + confined.error().message());
    box = std::move(*confined);
    if (const auto label = box.label(); !label.empty()) env.push_back("CELER_JOB_CONFINED=" + label);
  }
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const int log_fd = ::open(spec.log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (log_fd < 0) return error(error_code::unavailable, "cannot open the job's log " + spec.log.string() + ": " + std::strerror(errno));
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    ::close(log_fd);
    return error(error_code::unavailable, std::string("cannot start the driver: pipe: ") + std::strerror(errno));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(report[0]);
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // the driver stops with the head
    if (::getppid() != parent) ::_exit(1);
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
    // Signals the daemon blocks (it takes SIGTERM with sigwait) must reach the driver.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    int err = 0;
    char stage = 'c';
    if (::chdir(cwd.c_str()) != 0) {
      err = errno;
    } else if ((err = box.enter(SIGTERM)) != 0 || ::getppid() != parent) {
      stage = 's';
    } else {
      stage = 'x';
      ::execvpe(argv[0], argv.data(), envp.data());
      err = errno;
    }
    char msg[2 + sizeof err];
    msg[0] = stage;
    std::memcpy(msg + 1, &err, sizeof err);
    (void)!::write(report[1], msg, 1 + sizeof err);
    ::_exit(127);
  }
  ::close(log_fd);
  ::close(report[1]);
  if (pid < 0) {
    const int err = errno;
    ::close(report[0]);
    return error(error_code::unavailable, std::string("cannot start the driver: fork: ") + std::strerror(err));
  }
  // Also in the parent, so that a signal sent before the child ran setpgid finds the group.
  ::setpgid(pid, pid);
  char msg[1 + sizeof(int)] = {};
  ssize_t got = 0;
  do {
    got = ::read(report[0], msg, sizeof msg);
  } while (got < 0 && errno == EINTR);
  ::close(report[0]);
  if (got == static_cast<ssize_t>(sizeof msg)) {
    int err = 0;
    std::memcpy(&err, msg + 1, sizeof err);
    // The child exits at once; reap it here (the job never ran).
    child_reaper::instance().watch(pid, [](int) {});
    if (msg[0] == 'c') return error(error_code::unavailable, "cannot enter the job's folder " + cwd + ": " + std::strerror(err));
    if (msg[0] == 's')
      return error(error_code::unavailable, "cannot enter the job's sandbox" +
                                              (box.drops_user() ? " as user " + std::to_string(box.uid()) : std::string()) + ": " +
                                              std::strerror(err));
    const bool missing = err == ENOENT;
    return error(missing ? error_code::not_found : error_code::permission_denied,
                 "cannot run '" + args.front() + "': " + std::strerror(err) +
                   (!missing                                   ? std::string()
                    : args.front().find('/') == std::string::npos ? " (not found in PATH on the head)"
                    : args.front().starts_with('/')
                      ? " (on the head's machine)"
                      : " (a relative path is taken from the job's working directory: --working-dir packs it)"));
  }
  child_reaper::instance().watch(pid, [pid, exited = std::move(exited)](int status) { exited(pid, status); });
  return static_cast<int>(pid);
}

void driver_process_launcher::signal(int pid, int sig) {
  if (pid <= 0) return;
  // The whole group: the driver and what it started. ESRCH (all gone) is fine.
  if (::kill(-pid, sig) != 0 && errno == ESRCH) (void)::kill(pid, sig);
}

} // namespace celer::jobs
