#pragma once
// Job sandboxes (docs/security.md, "Jobs apart on a machine"): what a submitted job's driver
// and every worker process run inside, so that a job's own code reaches nothing of the
// head's, the node's or another job's on the machine.
//
// Decided once per daemon process (detect), prepared for each job process before fork
// (confine: claims the job's user, makes its Landlock ruleset), and entered between fork and
// exec (confinement::enter: system calls only, async-signal-safe):
// - as root, with a range of user ids: each job runs as a user of its own, claimed for it on
//   this machine as systemd's DynamicUser does (job_users.hpp). Its working and temporary
//   directories are its own; the daemons (root) and other jobs (other uids) are neither
//   readable nor signalable by it;
// - Landlock, where the kernel has it, in both modes: the job's processes open files only
//   under their working and temporary directories, the system's read-only paths and their
//   program's own directories. Procfs entries that need ptrace access (environ, fd/, mem,
//   maps) and ptrace itself are closed to processes outside their own Landlock domain
//   (Landlock's ptrace rule), and from Landlock ABI 6 so are signals.
//
//   auto box = job_sandbox::detect(options);                        // once, in the daemon
//   auto c = box->confine(job, {.workdir = wd, .tmpdir = tmp, .binary = "/opt/app/train"});
//   if (!c) ...;                                                     // say why, start nothing
//   if (fork() == 0) { chdir(wd); if (int err = c->enter()) _exit(126); execve(...); }

#include "sandbox/job_users.hpp"

#include <celer/error.hpp>
#include <celer/ids.hpp>

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <sys/types.h>

namespace celer::sandbox {

struct options {
  /// "auto": a user per job when the daemon runs as root (and the range is usable), and
  /// Landlock where the kernel has it; "landlock": Landlock only; "off": neither.
  std::string mode = "auto";
  /// The user (and group) ids jobs run as when the daemon is root, and where this machine's
  /// daemons keep their claims on them.
  job_users::config users;
  /// Directories every job may also read and execute from (a data set, a toolchain).
  std::vector<std::filesystem::path> read_paths;
  /// Directories every job may also write (a shared output folder): Landlock's rules only;
  /// with a user per job, the folder's mode decides as well.
  std::vector<std::filesystem::path> write_paths;
  /// Where jobs' own folders are made, <job_dir>/<job>/ (wd, tmp): outside every session
  /// directory, which a job's user may not traverse. Made at detect(): 0711 (others may
  /// pass, not list) when jobs have users of their own, 0700 otherwise.
  std::filesystem::path job_dir;
};

/// One job process's sandbox, ready to enter between fork and exec. Move-only: holds the
/// Landlock ruleset's descriptor.
class confinement {
public:
  confinement() = default;
  ~confinement();
  confinement(confinement&& other) noexcept;
  confinement& operator=(confinement&& other) noexcept;
  confinement(const confinement&) = delete;
  confinement& operator=(const confinement&) = delete;

  /// In the child, after fork (and after chdir into its working directory, which must
  /// happen while it may still traverse the daemon's folders): drops to the job's user,
  /// sets no_new_privs, restricts itself with the ruleset. 0, or the errno of the step that
  /// failed (the child must then exit without running the job). Also sets `deathsig` as the
  /// parent-death signal again, since a change of user clears it.
  [[nodiscard]] int enter(int deathsig) const noexcept;

  /// Whether the process becomes another user, and which.
  [[nodiscard]] bool drops_user() const noexcept { return drop_; }
  [[nodiscard]] uid_t uid() const noexcept { return uid_; }
  [[nodiscard]] gid_t gid() const noexcept { return gid_; }
  [[nodiscard]] bool landlocked() const noexcept { return ruleset_ >= 0; }
  /// The process's CELER_JOB_CONFINED value, so that its own errors can say why a file is
  /// out of reach: "user 61190, Landlock", "Landlock", "user 61190"; empty when unconfined.
  [[nodiscard]] std::string label() const;

private:
  friend class job_sandbox;
  int ruleset_ = -1;
  bool drop_ = false;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
};

class job_sandbox {
public:
  /// What this process can do (root? Landlock's ABI?) under `o`; never fails: what is not
  /// available is left out, and describe() says so.
  [[nodiscard]] static std::unique_ptr<job_sandbox> detect(options o);

  /// For `celer status` and the daemon's log: "job users 61184-65519 and Landlock (ABI 7)",
  /// "Landlock (ABI 7); no user per job: not root", "none: ...".
  [[nodiscard]] const std::string& describe() const noexcept { return description_; }
  [[nodiscard]] bool job_users_on() const noexcept { return users_ != nullptr; }
  [[nodiscard]] int landlock_abi() const noexcept { return abi_; }
  [[nodiscard]] bool active() const noexcept { return users_ != nullptr || abi_ > 0; }
  /// <job_dir>/<job>: the job's own folder on this machine (its drivers' and workers'
  /// temporary directories, a submitted driver's working directory).
  [[nodiscard]] std::filesystem::path folder_of(const job_id& job) const { return o_.job_dir / job.hex(); }
  [[nodiscard]] const std::filesystem::path& job_dir() const noexcept { return o_.job_dir; }

  struct request {
    /// Where the process runs; read-write for it (and owned by its user, recursively),
    /// unless `workdir_shared`.
    std::filesystem::path workdir;
    /// `workdir` is a node's unpacked copy of a working directory, which every job
    /// submitted with that package runs in: readable and executable for the process, never
    /// writable (as root: made readable by all, kept root's; under Landlock: read rights only).
    bool workdir_shared = false;
    /// Its temporary directory (TMPDIR); made if missing, read-write, owned by its user.
    std::filesystem::path tmpdir;
    /// The program it executes: its directory and those its RUNPATH names are readable and
    /// executable for it. A bare name is looked up in `path_env` (PATH's value).
    std::string binary;
    std::string path_env;
    /// More directories this process may read (a worker without a working directory: the
    /// folder its node runs in).
    std::vector<std::filesystem::path> read_also;
  };
  /// Prepares a process of `job`. unavailable when no user is left for it (every id of the
  /// range claimed) or its directories cannot be given to it; internal when the kernel
  /// refuses a Landlock rule.
  [[nodiscard]] expected<confinement> confine(const job_id& job, const request& r);

  /// The job ended on this machine: its user's processes are killed, the id released, its
  /// temporary directory removed and what is left of its folder (a working directory, for
  /// the operator to read) given back to this daemon's user, so that the next job to get
  /// the id finds nothing of this one's.
  /// `kill_left`: the job's processes on this machine are known to be over (its driver
  /// exited); without it (a node told the job ended, while its driver may still be exiting)
  /// nothing is killed and a user still running something stays claimed.
  void job_finished(const job_id& job, bool kill_left);

private:
  job_sandbox() = default;

  options o_;
  std::unique_ptr<job_users> users_;
  int abi_ = 0;
  std::string description_;
};

/// The directories a dynamically linked ELF program names in its DT_RUNPATH (or DT_RPATH),
/// with $ORIGIN replaced by its own directory; empty for anything else.
[[nodiscard]] std::vector<std::filesystem::path> elf_runpath(const std::filesystem::path& program);

/// The Landlock ABI this kernel offers (0: none, or disabled).
[[nodiscard]] int landlock_abi();

} // namespace celer::sandbox
