#pragma once
// The user ids jobs run as on this machine when its daemons run as root (job_sandbox.hpp),
// claimed as systemd's DynamicUser claims its ids: one file per claim in a directory every
// daemon on the machine shares (the head's node and another node agent started beside it
// give a job the same user, so its processes on both can still reach each other).
//
//   <claims_dir>/uid-61184     holds the job's id (hex): the id is taken
//   <claims_dir>/job-<hex>     holds "61184": the job's id, for the next process asking
//
// Both are made with O_EXCL, so two daemons racing for one job end with one id. A claim is
// released when the job finishes (after every process still running as its user is
// killed), and a claim left by a daemon that died is taken back once no process runs as
// its user and it has not been touched for `stale_after`.

#include <celer/error.hpp>
#include <celer/ids.hpp>

#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>

#include <sys/types.h>

namespace celer::sandbox {

class job_users {
public:
  struct config {
    /// [first, last]; first > last: no range.
    uid_t first = 61184;
    uid_t last = 65519;
    std::filesystem::path claims_dir = "/run/celer-job-users";
    std::chrono::seconds stale_after{3600};
  };
  /// invalid_argument for an empty range or one that includes an id with a name in
  /// /etc/passwd (a real user's files would become the job's); unavailable when the claims
  /// directory cannot be made (mode 0700).
  [[nodiscard]] static expected<std::unique_ptr<job_users>> open(config cfg);

  /// The job's user id on this machine (its group id is the same number), claimed if it has
  /// none. unavailable when every id of the range is taken.
  [[nodiscard]] expected<uid_t> claim(const job_id& job);
  /// Releases the job's claim; a job without one is ignored. With `kill_left`, every process
  /// still running as its user is killed first; without, a claim whose user still runs a
  /// process is kept (its processes are ending; it goes stale an hour after the last).
  /// Returns whether the claim was released.
  bool release(const job_id& job, bool kill_left);

  [[nodiscard]] const config& settings() const noexcept { return cfg_; }

private:
  explicit job_users(config cfg) : cfg_(std::move(cfg)) {}
  [[nodiscard]] bool reclaimable(uid_t uid) const;

  config cfg_;
  std::mutex mutex_;  // serialises this process's claims (the files serialise processes)
};

/// Process ids running with real, effective or saved user id `uid` (from /proc).
[[nodiscard]] std::vector<pid_t> processes_of(uid_t uid);

} // namespace celer::sandbox
