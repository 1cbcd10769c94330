#pragma once
// The head's job table: the jobs whose drivers heartbeat, when each was last heard from,
// the jobs ended because their driver went silent (a driver that speaks again is told
// why), what each job's tasks did (its driver's heartbeats: counts, a latency histogram,
// its recent tasks for /api/tasks), and the working-directory packages nodes fetch for a
// job's workers (docs/jobs.md).
//
//   job_table jobs(net, tables, now, live_node);
//   jobs.restore(state.jobs, heard);        // what the tables held, once
//   jobs.on(job_heartbeat), jobs.on(package_fetch), jobs.on(user_log)
//   on each tick: for (auto j : jobs.silence_quiet(now, timeout)) end the job (the head)
//   when a job ends: jobs.ended(job)        // its counts kept among the ended jobs'
//
// One of the head's managers: it owns its state, its handlers and its rows in the head's
// tables ("jobs"); it asks the node table only whether a node is alive and where. Ending a
// job's actors and groups is the head's (they are its tables, for now). Threads: the
// head's (one message at a time); task_list() is shared with the HTTP server's threads
// (task_table is thread-safe).

#include "head/head_guard.hpp"
#include "head/head_snapshot.hpp"
#include "head/head_tables.hpp"
#include "head/task_table.hpp"
#include "protocol/messages.hpp"
#include "transport/transport.hpp"

#include <celer/error.hpp>

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace celer {

class job_table {
public:
  using time_point = std::chrono::steady_clock::time_point;
  using clock = std::function<time_point()>;
  /// The address of node `n` while it is alive; nullopt when it is dead or unknown.
  using live_node = std::function<std::optional<address>(const node_id& n)>;
  /// Reads the package a job was submitted with (jobs::job_manager::read_package).
  using package_reader = std::function<expected<std::string>(const job_id& job, const std::string& digest)>;

  /// Jobs ended for a silent driver that are still answered with job_ended.
  static constexpr std::size_t max_silenced_jobs = 1000;
  /// Ended jobs whose last counts are kept (the oldest dropped).
  static constexpr std::size_t max_ended_jobs = 1000;

  /// `tables`: where rows are written (null: nothing is kept).
  job_table(transport& net, head_tables* tables, clock now, live_node where);

  /// Without it, package fetches are answered with an error.
  void serve_packages(package_reader read) { read_package_ = std::move(read); }
  /// Loads the jobs a previous head knew, as last heard from at `heard` (their drivers too
  /// must heartbeat in time).
  void restore(const std::vector<job_id>& jobs, time_point heard);

  /// A driver's heartbeat (or the job manager's, for a submitted job): the job is alive;
  /// what its driver reports of its tasks is capped (cap_report) and kept. A job ended for
  /// silence stays ended: its driver is told why.
  void on(protocol::job_heartbeat& m);
  /// A live node asks for a package for a job's workers: the archive, or why not.
  void on(protocol::package_fetch& m);
  /// Lines a job's worker printed (celer::print): passed to the job's driver, the core its
  /// own heartbeats name; dropped while it has none (a submitted job before its driver's
  /// first heartbeat). Admission checked `job` against the sender's.
  void on(protocol::user_log& m);

  /// Job `job` ended (its driver finished, was stopped or went silent): it is forgotten
  /// and its row dropped; its task counts join the ended jobs'.
  void ended(const job_id& job);
  /// The jobs whose drivers have been silent for longer than `timeout` at `now`: each is
  /// remembered as silenced (its driver will be told why) and logged. The caller ends them.
  [[nodiscard]] std::vector<job_id> silence_quiet(time_point now, std::chrono::milliseconds timeout);
  /// The head itself was away for `away` (a late tick): that time counts against no driver.
  void credit(std::chrono::steady_clock::duration away, time_point now);

  /// Every job known to be running.
  [[nodiscard]] std::vector<job_id> jobs() const;
  [[nodiscard]] bool running(const job_id& job) const { return heard_.contains(job); }
  /// Copies the task counts into a snapshot for the HTTP server.
  void fill(head_snapshot& s) const;

  /// Caps what a job reports in a heartbeat: task names and details, the rows of one
  /// heartbeat, the latency histogram's buckets.
  static void cap_report(protocol::task_counts& t);

private:
  transport& net_;
  head_tables* tables_;
  clock now_;
  live_node where_;
  package_reader read_package_;
  /// Jobs whose drivers heartbeat, and when each was last heard from.
  std::unordered_map<job_id, time_point> heard_;
  /// Each job's driver core, as its heartbeats name it (where user_log goes).
  std::unordered_map<job_id, address> drivers_;
  /// Jobs ended because their driver went silent, and what the driver is told if it speaks
  /// again (the most recent max_silenced_jobs).
  std::deque<std::pair<job_id, std::string>> silenced_;
  /// What each running job's driver says its tasks did, and the totals of the jobs that
  /// ended since this head started (so that counters never go down).
  std::unordered_map<job_id, protocol::task_counts> tasks_;
  protocol::task_counts ended_tasks_;
  /// The last counts of the jobs that ended most recently.
  std::deque<std::pair<job_id, protocol::task_counts>> ended_job_tasks_;
  /// Each job's recent tasks, from the changes its driver's heartbeats carry (shared with
  /// the snapshots: the HTTP server pages through it).
  std::shared_ptr<task_table> task_list_ = std::make_shared<task_table>();
};

} // namespace celer
