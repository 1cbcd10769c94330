#pragma once
// Submitted jobs on the head (docs/jobs.md): each is a driver process the head starts from
// an argument vector (never a shell string), in the job's own folder, speaking as the job
// with the job's credential alone, and supervises until it ends. Records live in the head's
// table database (the table "submitted_jobs"), so `celer job list` after a head restart
// still shows every job and how it ended.
//
//   jobs::job_manager jm(cfg, launcher, hooks, db, clock);
//   auto r = jm.submit({.argv = {"python3", "train.py"}});     // PENDING, then RUNNING
//   jm.stop(r->submission_id, "the admin");                      // SIGTERM, SIGKILL after grace
//   jm.tick();                                                    // heartbeats, escalation
//
// Logic only: the process launcher, the head (hooks) and the clock are injected, so tests
// drive it call by call. Threads: any (one mutex); the launcher's exit reports come from the
// reaper's thread through exited().

#include "jobs/job_record.hpp"
#include "transport/credentials.hpp"

#include <celer/error.hpp>
#include <celer/store/table_db.hpp>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

namespace celer::jobs {

/// What a driver process is started with.
struct driver_spec {
  job_id job;
  std::vector<std::string> argv;
  /// Complete environment, "K=V" each.
  std::vector<std::string> env;
  std::filesystem::path cwd;
  std::filesystem::path log;
  /// Its temporary directory (TMPDIR), the one other folder it may write.
  std::filesystem::path tmpdir;
};

/// Starts and signals driver processes (driver_process.hpp: fork and exec; tests: a fake).
class driver_launcher {
public:
  virtual ~driver_launcher() = default;
  /// The started process's id, or why it could not start (the program not found, not
  /// executable: the message names it). `exited(pid, status)` (waitpid's status) is called
  /// once when it ends, from any thread, possibly before start() returns.
  [[nodiscard]] virtual expected<int> start(const driver_spec& spec, std::function<void(int pid, int status)> exited) = 0;
  /// Sends `sig` to the driver and every process it started (its process group).
  virtual void signal(int pid, int sig) = 0;
};

/// What the head hears of jobs.
struct job_hooks {
  /// The job is about to start: let its credential in (and into `namespaces`), and tell
  /// the head it is alive.
  std::function<void(const job_id&, const std::vector<std::string>& namespaces)> started;
  /// Still alive (each tick, while the driver runs).
  std::function<void(const job_id&)> alive;
  /// Ended: stop its actors and workers, free its resources and objects.
  std::function<void(const job_id&)> ended;
  /// Reserves the driver's own resources (entrypoint_num_cpus, entrypoint_num_gpus) for
  /// job `job` as a placement group of one bundle: its id, or why it can never be (the
  /// head's word). Empty: nothing is reserved.
  std::function<expected<placement_group_id>(const job_id& job, double num_cpus, double num_gpus)> reserve;
  /// The node a reserved group holds its bundle on, once it does; nullopt while it waits,
  /// with `why`.
  std::function<std::optional<node_id>(const placement_group_id& group, std::string& why)> reserved;
};

struct job_manager_config {
  /// <session>/jobs: one folder per job (its working directory, its package, its log).
  std::filesystem::path jobs_dir;
  /// <session>/packages: working directories uploaded, by digest.
  std::filesystem::path packages_dir;
  /// Where each job's working and temporary directories are made (<job_dir>/<job>/wd and
  /// tmp): outside the session directory, which a job's user may not traverse (job_dir
  /// knob). Empty: in jobs_dir/<job>/ (tests).
  std::filesystem::path job_dir;
  /// The cluster address drivers connect to (HOST:PORT).
  std::string cluster_address;
  /// The head's credentials: each driver gets its job's credential from them, never the token.
  credentials creds;
  bool encrypt = true;
  std::string node_ip;
  /// The environment every driver starts from ("K=V"); the CELER_ variables of the head's
  /// own are left out.
  std::vector<std::string> base_env;
  /// Between SIGTERM and SIGKILL when a job is stopped.
  std::chrono::milliseconds stop_grace{5000};
  /// Unpacked bytes a working directory may hold.
  std::uint64_t unpack_limit = 1ull << 30;
};

struct submit_request {
  std::vector<std::string> argv;
  /// Empty: "celersubmit_" and 16 random hex digits.
  std::string submission_id;
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> metadata;
  double num_cpus = 0;
  double num_gpus = 0;
  int priority = 0;
  /// The digest of an uploaded working directory (put_package), or empty.
  std::string package;
  /// Shared namespaces the job is let into (its detached actors and those it calls live
  /// there); the first is its default (CELER_NAMESPACE).
  std::vector<std::string> namespaces;
};

/// Who asks: the admin (the token) sees everything; a job's credential its own job only.
struct asker {
  bool admin = false;
  job_id job;
};

/// A page of a job's log (job_manager::log_range).
struct log_page {
  std::string text;
  /// Where `text` starts in the log, and the log's size in bytes when it was read.
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
};

class job_manager {
public:
  using clock = std::function<std::chrono::system_clock::time_point()>;
  /// Loads the records `db` holds (a job a previous head left PENDING or RUNNING is FAILED:
  /// its driver stopped with that head). `db` may be null (nothing kept).
  job_manager(job_manager_config cfg, driver_launcher& launcher, job_hooks hooks,
              std::shared_ptr<store::table_db> db, clock now = {});
  /// The ids of the submitted jobs `db` holds records of (a restarted head: its submitted
  /// drivers stopped with the old one, so the jobs it finds running are drivers started
  /// with the token).
  [[nodiscard]] static std::unordered_set<job_id> submitted(store::table_db& db);
  ~job_manager();

  /// Starts a job. invalid_argument (no program, a bad env name, a submission id that is
  /// not [A-Za-z0-9_.-]{1,64}, entrypoint resources no node can ever hold), already_exists
  /// (the submission id), not_found (the package), permission_denied (a job's credential:
  /// only the admin submits). A program that cannot be started still makes a record,
  /// FAILED with the reason. A job with entrypoint resources stays PENDING until they are
  /// reserved (hooks.reserve), then starts.
  [[nodiscard]] expected<job_record> submit(const submit_request& r, const asker& who);
  /// Every job the asker may see, oldest first.
  [[nodiscard]] std::vector<job_record> list(const asker& who) const;
  /// By submission id or job id (hex). not_found, also for another job's.
  [[nodiscard]] expected<job_record> find(const std::string& id, const asker& who) const;
  /// Asks a running job to stop: true if it was running. not_found as find.
  [[nodiscard]] expected<bool> stop(const std::string& id, const asker& who);
  /// Forgets an ended job: its record, log and folder. failed_precondition while it runs;
  /// permission_denied for a job's credential.
  [[nodiscard]] expected<void> remove(const std::string& id, const asker& who);
  /// One page of the driver's log (stdout and stderr): at most `max_bytes` from byte `from`,
  /// cut back to a whole UTF-8 character when one straddles the page's end (unless that
  /// would leave it empty), and the log's size then. Reads only the page, never the whole
  /// log. A `from` past the end gives an empty page.
  [[nodiscard]] expected<log_page> log_range(const std::string& id, const asker& who, std::uint64_t from,
                                             std::uint64_t max_bytes) const;
  /// The driver's log from byte `from` to its end, whole (tests and small logs; HTTP serves
  /// log_range's pages).
  [[nodiscard]] expected<std::string> logs(const std::string& id, const asker& who, std::uint64_t from = 0) const;
  /// Waits up to `timeout` for the job to change state or its log to grow past `log_bytes`.
  void wait_for_change(const std::string& id, std::uint64_t log_bytes, std::chrono::milliseconds timeout) const;

  /// Stores an uploaded working directory (an archive of jobs/package.hpp) under its digest,
  /// after checking it. invalid_argument (digest mismatch, a malformed archive).
  [[nodiscard]] expected<void> put_package(const std::string& digest, std::string_view archive, const asker& who);
  [[nodiscard]] bool has_package(const std::string& digest) const;
  /// The archive of package `digest` for a node that starts workers of job `job`
  /// (package_fetch): not_found unless the job was submitted with that package.
  [[nodiscard]] expected<std::string> read_package(const job_id& job, const std::string& digest) const;

  /// Heartbeats for running jobs and those waiting for their resources; SIGKILL for
  /// stopped jobs past their grace.
  void tick();
  /// Stops every running job (the cluster is stopping): SIGTERM, at most `grace`, SIGKILL;
  /// returns once every driver has been reaped.
  void shutdown(std::chrono::milliseconds grace);

  /// The head's HTTP address, once its server listens: drivers started from then on get it
  /// as CELER_HEAD_URL (the session directory, where `celer` commands look for it, is out
  /// of a confined job's reach), and a TLS server's certificate `ca_cert` (a PEM file;
  /// empty: none) as CELER_TLS_CA, a copy in the job's own temporary directory.
  void serve_http(std::string url, std::filesystem::path ca_cert);

  /// Job counts by state (for /metrics).
  [[nodiscard]] std::map<job_state, std::size_t> counts() const;

private:
  struct entry {
    job_record record;
    std::optional<std::chrono::system_clock::time_point> kill_at;
  };
  [[nodiscard]] entry* lookup(const std::string& id, const asker& who);
  [[nodiscard]] const entry* lookup(const std::string& id, const asker& who) const;
  void exited(const job_id& job, int pid, int status);
  void persist(const job_record& r);
  /// Unpacks the working directory and starts the driver of the PENDING job `rec`; called
  /// without the lock.
  void launch(job_record rec);
  /// Waits (its own thread) until job `id`'s entrypoint resources are reserved, then
  /// launches it; ends it STOPPED when it is stopped first.
  void await_resources(job_id id);
  /// Refuses new work and joins the threads of await_resources (their jobs end STOPPED).
  void stop_waiters();
  [[nodiscard]] std::filesystem::path folder(const job_id& job) const;
  [[nodiscard]] std::int64_t now_ms() const;

  job_manager_config cfg_;
  driver_launcher& launcher_;
  job_hooks hooks_;
  std::shared_ptr<store::table_db> db_;
  clock now_;
  mutable std::mutex mutex_;  // guards jobs_, order_ and http_
  struct {
    std::string url;
    std::filesystem::path ca_cert;
  } http_;
  mutable std::condition_variable changed_;
  std::map<job_id, entry> jobs_;
  /// Job ids in submission order.
  std::vector<job_id> order_;
  bool shutting_down_ = false;
  /// Threads waiting for jobs' entrypoint resources (await_resources), joined at shutdown.
  std::vector<std::thread> waiters_;
  std::uint64_t next_sequence_ = 1;
};

} // namespace celer::jobs
