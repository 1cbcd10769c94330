#include "sandbox/job_users.hpp"

#include "log.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

namespace celer::sandbox {

namespace {

namespace fs = std::filesystem;

/// Writes `text` to a new file at `path` (O_EXCL): false when it already exists.
expected<bool> create_exclusive(const fs::path& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return false;
    return error(error_code::unavailable, "cannot claim " + path.string() + ": " + std::strerror(errno));
  }
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!ok) {
    ::unlink(path.c_str());
    return error(error_code::unavailable, "cannot write " + path.string() + " (disk full?)");
  }
  return true;
}

std::string read_small(const fs::path& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

} // namespace

std::vector<pid_t> processes_of(uid_t uid) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "status");
    std::string line;
    while (std::getline(in, line)) {
      if (!line.starts_with("Uid:")) continue;
      std::istringstream fields(line.substr(4));
      uid_t real = 0, effective = 0, saved = 0;
      fields >> real >> effective >> saved;
      if (real == uid || effective == uid || saved == uid) out.push_back(static_cast<pid_t>(std::stol(name)));
      break;
    }
  }
  return out;
}

expected<std::unique_ptr<job_users>> job_users::open(config cfg) {
  if (cfg.first > cfg.last || cfg.first == 0)
    return error(error_code::invalid_argument, "no user ids for jobs (an empty range, or one starting at 0)");
  // A range with a named user in it would hand that user's files to jobs.
  ::setpwent();
  while (const passwd* p = ::getpwent()) {
    if (p->pw_uid >= cfg.first && p->pw_uid <= cfg.last) {
      const std::string name = p->pw_name;
      const auto uid = p->pw_uid;
      ::endpwent();
      return error(error_code::invalid_argument, "the job user ids " + std::to_string(cfg.first) + "-" +
                                                   std::to_string(cfg.last) + " include the user " + name + " (" +
                                                   std::to_string(uid) + "): choose a range no user has (job_uids)");
    }
  }
  ::endpwent();
  std::error_code ec;
  fs::create_directories(cfg.claims_dir, ec);
  struct stat st {};
  if (ec || ::lstat(cfg.claims_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid())
    return error(error_code::unavailable, "cannot keep job user claims in " + cfg.claims_dir.string() +
                                            (ec ? ": " + ec.message() : std::string(" (not a directory of this user)")));
  ::chmod(cfg.claims_dir.c_str(), 0700);
  return std::unique_ptr<job_users>(new job_users(std::move(cfg)));
}

bool job_users::reclaimable(uid_t uid) const {
  const auto claim = cfg_.claims_dir / ("uid-" + std::to_string(uid));
  struct stat st {};
  if (::stat(claim.c_str(), &st) != 0) return false;
  const auto age = std::chrono::system_clock::now() - std::chrono::system_clock::from_time_t(st.st_mtime);
  return age > cfg_.stale_after && processes_of(uid).empty();
}

expected<uid_t> job_users::claim(const job_id& job) {
  std::lock_guard lock(mutex_);
  const std::string hex = job.hex();
  const auto by_job = cfg_.claims_dir / ("job-" + hex);
  // Another process of this machine (or this one, earlier) may have claimed it already.
  auto known = [&]() -> std::optional<uid_t> {
    const std::string s = read_small(by_job);
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    const auto uid = static_cast<uid_t>(std::stoul(s));
    if (uid < cfg_.first || uid > cfg_.last) return std::nullopt;
    const auto claim = cfg_.claims_dir / ("uid-" + std::to_string(uid));
    if (read_small(claim) != hex) return std::nullopt;
    ::utimensat(AT_FDCWD, claim.c_str(), nullptr, 0);  // in use: not stale
    return uid;
  };
  if (auto uid = known()) return *uid;
  for (uid_t uid = cfg_.first; uid <= cfg_.last; ++uid) {
    const auto claim = cfg_.claims_dir / ("uid-" + std::to_string(uid));
    auto made = create_exclusive(claim, hex + "\n");
    if (!made) return made.error();
    if (!*made) {
      if (!reclaimable(uid)) continue;
      const std::string stale = read_small(claim);
      CELER_LOG(info, "sandbox", "user " + std::to_string(uid) + " of job " + stale.substr(0, 8) +
                                   " was left claimed and runs nothing: taken back");
      ::unlink((cfg_.claims_dir / ("job-" + stale)).c_str());
      ::unlink(claim.c_str());
      made = create_exclusive(claim, hex + "\n");
      if (!made) return made.error();
      if (!*made) continue;
    }
    // Leftovers of a job that ran as this user before (a process that escaped its stop)
    // must not meet the new job.
    for (pid_t p : processes_of(uid)) ::kill(p, SIGKILL);
    auto named = create_exclusive(by_job, std::to_string(uid) + "\n");
    if (named && *named) return uid;
    // Another daemon claimed one for this job meanwhile: use its, give this one back.
    ::unlink(claim.c_str());
    if (!named) return named.error();
    for (int i = 0; i < 100; ++i) {  // it writes the file right after making it
      if (auto uid2 = known()) return *uid2;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return error(error_code::unavailable, "the user claim " + by_job.string() + " of job " + job.short_hex() +
                                            " does not name a claimed id");
  }
  return error(error_code::unavailable, "every job user id (" + std::to_string(cfg_.first) + "-" +
                                          std::to_string(cfg_.last) + ") is claimed on this machine: see " +
                                          cfg_.claims_dir.string());
}

bool job_users::release(const job_id& job, bool kill_left) {
  std::lock_guard lock(mutex_);
  const std::string hex = job.hex();
  const auto by_job = cfg_.claims_dir / ("job-" + hex);
  const std::string s = read_small(by_job);
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) return false;
  const auto uid = static_cast<uid_t>(std::stoul(s));
  const auto claim = cfg_.claims_dir / ("uid-" + std::to_string(uid));
  if (read_small(claim) == hex && uid >= cfg_.first && uid <= cfg_.last) {
    const auto left = processes_of(uid);
    if (!kill_left && !left.empty()) return false;
    for (pid_t p : left) ::kill(p, SIGKILL);
    if (!left.empty())
      CELER_LOG(info, "sandbox", "job " + job.short_hex() + " ended: killed " + std::to_string(left.size()) +
                                   " process(es) still running as its user " + std::to_string(uid));
    ::unlink(claim.c_str());
  }
  ::unlink(by_job.c_str());
  return true;
}

} // namespace celer::sandbox
