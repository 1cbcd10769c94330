// `celer submit` and `celer job ...` (jobs_cli.hpp).
#include "cli/jobs_cli.hpp"

#include "cli/head_http.hpp"
#include "cli/terminal_text.hpp"
#include "jobs/package.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include <unistd.h>

namespace celer::cli {
namespace {

struct job_args {
  std::string address;
  // submit
  std::string working_dir;
  std::vector<std::string> excludes;
  double working_dir_limit_mib = 100;
  std::vector<std::string> env;
  std::vector<std::string> metadata;
  double num_cpus = 0;
  double num_gpus = 0;
  std::string submission_id;
  int priority = 0;
  std::vector<std::string> namespaces;
  bool follow = false;
  std::vector<std::string> command;
  // job logs
  bool raw = false;
  // job ...
  std::string id;
  bool no_wait = false;
};

std::map<std::string, std::string> key_values(const std::vector<std::string>& items, const char* flag) {
  std::map<std::string, std::string> out;
  for (const auto& kv : items) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) fail(std::string(flag) + " takes KEY=VALUE, not '" + kv + "'");
    out[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return out;
}

std::string when(const nlohmann::json& ms) {
  if (!ms.is_number()) return "-";
  const std::time_t t = ms.get<std::int64_t>() / 1000;
  std::tm tm{};
  localtime_r(&t, &tm);
  std::ostringstream s;
  s << std::put_time(&tm, "%Y-%m-%d %H:%M:%S");
  return s.str();
}

std::string duration(const nlohmann::json& job) {
  if (!job["start_time"].is_number()) return "-";
  const auto end = job["end_time"].is_number()
                     ? job["end_time"].get<std::int64_t>()
                     : std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  const double s = static_cast<double>(end - job["start_time"].get<std::int64_t>()) / 1000.0;
  std::ostringstream out;
  out << std::fixed << std::setprecision(1) << s << " s";
  return out.str();
}

/// The driver's exit code as `celer submit --follow` and `celer job logs --follow` end
/// with it: 0 when it succeeded, its own code when it failed with one, else 1.
int exit_code_of(const nlohmann::json& job) {
  if (job.value("status", "") == "SUCCEEDED") return 0;
  if (job["driver_exit_code"].is_number()) {
    const int c = job["driver_exit_code"].get<int>();
    if (c != 0) return c;
  }
  return 1;
}

nlohmann::json job_details(httplib::Client& c, const head_link& link, const std::string& id) {
  return expect_json(c.Get("/api/jobs/" + id), link, "job " + id);
}

/// Writes a job's log to standard output: as it is, or, when standard output is a terminal
/// (and not --raw), with control characters but newline and tab escaped, so that the job's
/// output cannot drive the terminal. A UTF-8 character cut between two pieces is held back
/// for the next.
class log_output {
public:
  explicit log_output(bool raw) : escape_(!raw && ::isatty(STDOUT_FILENO) == 1) {}
  void write(std::string_view piece) {
    if (!escape_) {
      std::cout.write(piece.data(), static_cast<std::streamsize>(piece.size()));
      std::cout.flush();
      return;
    }
    held_.append(piece);
    std::size_t whole = held_.size();
    for (std::size_t back = 0; back < 3 && back < held_.size(); ++back) {
      const auto b = static_cast<unsigned char>(held_[held_.size() - 1 - back]);
      if ((b & 0xC0) == 0x80) continue;
      const std::size_t need = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
      if (need > back + 1) whole = held_.size() - 1 - back;
      break;
    }
    std::cout << printable(std::string_view(held_).substr(0, whole), keep::newlines);
    std::cout.flush();
    held_.erase(0, whole);
  }
  ~log_output() {
    if (escape_ && !held_.empty()) std::cout << printable(held_, keep::newlines);
    std::cout.flush();
  }

private:
  bool escape_;
  std::string held_;
};

/// Streams the job's log until it ends; returns its final record.
nlohmann::json follow_logs(const head_link& link, const std::string& id, bool raw) {
  log_output out(raw);
  auto c = client_for(link, std::chrono::hours(24));
  int status = 0;
  std::string error_body;
  auto r = c->Get(
    "/api/jobs/" + id + "/logs/tail", httplib::Headers{},
    [&](const httplib::Response& res) {
      status = res.status;
      return true;
    },
    [&](const char* data, std::size_t n) {
      if (status != 200) {
        error_body.append(data, n);
      } else {
        out.write(std::string_view(data, n));
      }
      return true;
    });
  if (!r) fail("the log stream of job " + id + " broke: " + httplib::to_string(r.error()));
  if (status != 200) {
    std::string why = error_body;
    try {
      why = nlohmann::json::parse(error_body).value("error", error_body);
    } catch (const std::exception&) {
    }
    fail("job " + id + ": " + why);
  }
  return job_details(*client_for(link, std::chrono::seconds(30)), link, id);
}

int submit(const job_args& a) {
  if (a.command.empty()) fail("celer submit needs the command to run after --, e.g. celer submit -- ./my_app --steps 10");
  const auto link = find_head(a.address);
  auto c = client_for(link, std::chrono::seconds(120));
  nlohmann::json body{{"entrypoint_argv", a.command},
                      {"entrypoint_num_cpus", a.num_cpus},
                      {"entrypoint_num_gpus", a.num_gpus},
                      {"priority", a.priority}};
  if (!a.submission_id.empty()) body["submission_id"] = a.submission_id;
  if (!a.namespaces.empty()) body["namespaces"] = a.namespaces;
  nlohmann::json runtime_env = nlohmann::json::object();
  if (!a.env.empty()) runtime_env["env_vars"] = key_values(a.env, "--env");
  if (!a.metadata.empty()) body["metadata"] = key_values(a.metadata, "--metadata");
  if (!a.working_dir.empty()) {
    jobs::pack_options po;
    po.limit_bytes = static_cast<std::uint64_t>(a.working_dir_limit_mib * 1024 * 1024);
    po.excludes = a.excludes;
    auto archive = jobs::pack_directory(a.working_dir, po);
    if (!archive) fail("--working-dir " + a.working_dir + ": " + archive.error().message());
    const std::string digest = jobs::package_digest(*archive);
    auto have = c->Get("/api/packages/" + digest);
    if (!have || have->status != 200) {
      std::cerr << "uploading " << a.working_dir << " (" << std::fixed << std::setprecision(1)
                << static_cast<double>(archive->size()) / (1024.0 * 1024.0) << " MiB)\n";
      (void)expect_json(c->Put("/api/packages/" + digest, *archive, "application/octet-stream"), link,
                        "uploading the working directory");
    }
    runtime_env["working_dir"] = "celerpkg://" + digest;
  }
  if (!runtime_env.empty()) body["runtime_env"] = runtime_env;
  auto reply = expect_json(c->Post("/api/jobs/", body.dump(), "application/json"), link, "submitting the job");
  const std::string id = reply.value("submission_id", "");
  if (!a.follow) {
    std::cout << printable(id) << "\n";
    std::cerr << "job " << printable(id) << " submitted (" << printable(reply.value("status", "")) << ")\n"
              << "  logs:   celer job logs " << id << " --follow\n"
              << "  status: celer job status " << id << "\n"
              << "  stop:   celer job stop " << id << "\n";
    return reply.value("status", "") == "FAILED" ? 1 : 0;
  }
  std::cerr << "job " << id << " submitted; following its log (Ctrl-C leaves it running)\n";
  auto job = follow_logs(link, id, /*raw=*/false);
  std::cerr << "job " << printable(id) << " " << printable(job.value("status", "")) << ": "
            << printable(job.value("message", "")) << "\n";
  return exit_code_of(job);
}

int list(const job_args& a) { return list_jobs(a.address); }

} // namespace

int list_jobs(const std::string& address) {
  const auto link = find_head(address);
  auto jobs = expect_json(client_for(link, std::chrono::seconds(30))->Get("/api/jobs/"), link, "listing jobs");
  std::cout << jobs.size() << " job(s)\n";
  if (jobs.empty()) return 0;
  std::cout << std::left << std::setw(30) << "SUBMISSION ID" << std::setw(11) << "STATUS" << std::setw(21) << "SUBMITTED"
            << std::setw(11) << "DURATION" << "ENTRYPOINT\n";
  for (const auto& j : jobs) {
    std::cout << std::left << std::setw(30) << printable(j.value("submission_id", "")) << std::setw(11)
              << printable(j.value("status", "")) << std::setw(21) << when(j["start_time"]) << std::setw(11) << duration(j)
              << printable(j.value("entrypoint", "")) << "\n";
  }
  return 0;
}

namespace {
int status(const job_args& a) {
  const auto link = find_head(a.address);
  auto j = job_details(*client_for(link, std::chrono::seconds(30)), link, a.id);
  std::cout << "job " << printable(j.value("submission_id", "")) << " (celer job " << printable(j.value("job_id", "")) << ")\n"
            << "  status:     " << printable(j.value("status", "")) << "\n"
            << "  message:    " << printable(j.value("message", "")) << "\n"
            << "  entrypoint: " << printable(j.value("entrypoint", "")) << "\n"
            << "  submitted:  " << when(j["start_time"]) << "\n"
            << "  ended:      " << when(j["end_time"]) << "\n"
            << "  duration:   " << duration(j) << "\n";
  if (j["driver_exit_code"].is_number()) std::cout << "  exit code:  " << j["driver_exit_code"].get<int>() << "\n";
  if (j.value("priority", 0) != 0) std::cout << "  priority:   " << j.value("priority", 0) << "\n";
  if (j.contains("namespaces") && j["namespaces"].is_array() && !j["namespaces"].empty()) {
    std::string names;
    for (const auto& n : j["namespaces"]) names += (names.empty() ? "" : ", ") + printable(n.get<std::string>());
    std::cout << "  namespaces: " << names << "\n";
  }
  if (j["tasks"].is_object()) {
    const auto& t = j["tasks"];
    std::cout << "  tasks:      " << t.value("SUBMITTED", 0) << " submitted, " << t.value("FINISHED", 0) << " finished, "
              << t.value("FAILED", 0) << " failed, " << t.value("RUNNING", 0) << " running, " << t.value("WAITING", 0)
              << " waiting\n";
  }
  return 0;
}

int logs(const job_args& a) {
  const auto link = find_head(a.address);
  if (a.follow) return exit_code_of(follow_logs(link, a.id, a.raw));
  // Page by page (the head serves at most 1 MiB at once), up to the size the first page saw.
  auto c = client_for(link, std::chrono::seconds(60));
  c->set_keep_alive(true);  // one connection for every page
  log_output out(a.raw);
  std::uint64_t offset = 0;
  for (;;) {
    auto j = expect_json(c->Get("/api/jobs/" + a.id + "/logs?offset=" + std::to_string(offset)), link, "job " + a.id);
    out.write(j.value("logs", ""));
    const auto next = j.value("next_offset", std::uint64_t{0});
    if (!j.value("more", false) || next <= offset) return 0;
    offset = next;
  }
}

int stop(const job_args& a) {
  const auto link = find_head(a.address);
  auto c = client_for(link, std::chrono::seconds(30));
  auto r = expect_json(c->Post("/api/jobs/" + a.id + "/stop", "", "application/json"), link, "stopping job " + a.id);
  if (!r.value("stopped", false)) {
    auto j = job_details(*c, link, a.id);
    std::cout << "job " << printable(a.id) << " is not running (" << printable(j.value("status", "")) << ")\n";
    return 0;
  }
  if (a.no_wait) {
    std::cout << "job " << a.id << ": stop asked (SIGTERM; SIGKILL after the grace period)\n";
    return 0;
  }
  for (;;) {
    auto j = job_details(*c, link, a.id);
    const std::string s = j.value("status", "");
    if (s != "RUNNING" && s != "PENDING") {
      std::cout << "job " << printable(a.id) << " " << printable(s) << ": " << printable(j.value("message", "")) << "\n";
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

int remove(const job_args& a) {
  const auto link = find_head(a.address);
  (void)expect_json(client_for(link, std::chrono::seconds(30))->Delete("/api/jobs/" + a.id), link, "deleting job " + a.id);
  std::cout << "job " << a.id << " deleted (its record, log and working directory)\n";
  return 0;
}

void address_option(CLI::App* cmd, job_args& a) {
  cmd->add_option("--address", a.address,
                  "the head: HOST:PORT (its session on this machine gives the HTTP URL and token) or the HTTP server's "
                  "http(s):// URL (the token then from CELER_TOKEN); default: CELER_ADDRESS, else the latest session");
}

} // namespace

std::function<int()> add_job_commands(CLI::App& app) {
  auto a = std::make_shared<job_args>();
  auto* submit_cmd = app.add_subcommand(
    "submit", "submit a job to the head: it runs COMMAND (an argument vector, never through a shell) as the job's driver");
  address_option(submit_cmd, *a);
  submit_cmd->add_option("--working-dir", a->working_dir,
                         "pack this folder and send it with the job; the driver runs inside its copy (relative paths "
                         "in COMMAND are taken from there)");
  submit_cmd->add_option("--exclude", a->excludes, "leave this relative path of --working-dir out (repeatable), e.g. build");
  submit_cmd->add_option("--working-dir-limit", a->working_dir_limit_mib, "MiB the packed working directory may take")
    ->capture_default_str();
  submit_cmd->add_option("--env", a->env, "KEY=VALUE in the driver's environment (repeatable)");
  submit_cmd->add_option("--metadata", a->metadata, "KEY=VALUE kept with the job's record (repeatable)");
  submit_cmd->add_option("--entrypoint-num-cpus", a->num_cpus, "CPUs the driver itself needs");
  submit_cmd->add_option("--entrypoint-num-gpus", a->num_gpus, "GPUs the driver itself needs");
  submit_cmd->add_option("--submission-id", a->submission_id, "the job's id (default: celersubmit_ and random hex)");
  submit_cmd->add_option("--priority", a->priority,
                         "the job's priority: its tasks and actors get it (higher goes first and may preempt "
                         "preemptible actors of lower priority)");
  submit_cmd->add_option("--namespace", a->namespaces,
                         "a shared namespace the job is let into (repeatable): it may make detached actors there and "
                         "find and call those others made; the first is its default (CELER_NAMESPACE)");
  submit_cmd->add_flag("--follow", a->follow, "stream the job's log until it ends, and exit with its driver's code");
  submit_cmd->add_option("command", a->command, "the program and its arguments, after --")->expected(-1);
  submit_cmd->footer(
    "Example: celer submit --working-dir . --exclude build -- ./bin/trainer --steps 100\n"
    "Prints the job's submission id; see docs/jobs.md.");

  auto* job_cmd = app.add_subcommand("job", "list, inspect, follow, stop and delete submitted jobs");
  job_cmd->require_subcommand(1);
  auto* list_cmd = job_cmd->add_subcommand("list", "every job the credential may see, oldest first");
  address_option(list_cmd, *a);
  auto* status_cmd = job_cmd->add_subcommand("status", "a job's state, why, and its driver's exit code");
  auto* logs_cmd = job_cmd->add_subcommand("logs", "a job's driver log (stdout and stderr)");
  logs_cmd->add_flag("--follow", a->follow, "keep streaming until the job ends, and exit with its driver's code");
  logs_cmd->add_flag("--raw", a->raw,
                     "write the log's bytes as they are even to a terminal (by default control characters but newline "
                     "and tab are escaped when standard output is a terminal)");
  auto* stop_cmd = job_cmd->add_subcommand("stop", "stop a running job: SIGTERM to its driver, SIGKILL after 5 s");
  stop_cmd->add_flag("--no-wait", a->no_wait, "return once the stop is asked, without waiting for the job to end");
  auto* delete_cmd = job_cmd->add_subcommand("delete", "forget an ended job: its record, log and working directory");
  for (auto* cmd : {status_cmd, logs_cmd, stop_cmd, delete_cmd}) {
    cmd->add_option("id", a->id, "the job's submission id (or its job id)")->required();
    address_option(cmd, *a);
  }
  return [=]() -> int {
    if (*submit_cmd) return submit(*a);
    if (*list_cmd) return list(*a);
    if (*status_cmd) return status(*a);
    if (*logs_cmd) return logs(*a);
    if (*stop_cmd) return stop(*a);
    if (*delete_cmd) return remove(*a);
    return -1;
  };
}

} // namespace celer::cli
