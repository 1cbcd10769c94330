// celer-bench-sim-cluster: a real head (`celer start --head`) with hundreds to 1,000
// simulated node agents (sim_agents.hpp: a few processes of many agents each, speaking the real
// protocol over real sockets) and a real driver (sim_driver.hpp), at each node count asked for.
// Reports the head's CPU and peak memory, its time per heartbeat, the end-to-end latency of
// tasks that spill to the head, the actor creation rate and the time the head takes to declare
// a silent node dead. docs/benchmarks.md, "A simulated cluster of 1,000 nodes".
//
//   celer-bench-sim-cluster --nodes 10,100,1000 --json sim.json      # the whole run
//   celer-bench-sim-cluster agents --head tcp://H:P --token-file F --count 250 --first 0
//   celer-bench-sim-cluster driver --json out.json                   # CELER_ADDRESS set
#include "sim_agents.hpp"
#include "sim_driver.hpp"

#include <CLI/CLI.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

namespace {

[[noreturn]] void die(const std::string& why) {
  std::cerr << "celer-bench-sim-cluster: " << why << "\n";
  std::exit(1);
}

// ---------------------------------------------------------------- child processes

/// A child process: its pid, and pipes to its stdin and from its stdout when asked for.
struct child {
  pid_t pid = -1;
  int in = -1, out = -1;
  std::string pending;  // stdout read but not yet a whole line

  /// The next line of its stdout; nullopt when `within` passes first or it closes.
  std::optional<std::string> line(std::chrono::milliseconds within) {
    const auto deadline = clock_type::now() + within;
    for (;;) {
      if (auto nl = pending.find('\n'); nl != std::string::npos) {
        std::string l = pending.substr(0, nl);
        pending.erase(0, nl + 1);
        return l;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{out, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[8192];
      const ssize_t n = ::read(out, buf, sizeof buf);
      if (n <= 0) return std::nullopt;
      pending.append(buf, static_cast<std::size_t>(n));
    }
  }
  void say(const std::string& l) const {
    const std::string text = l + "\n";
    (void)!::write(in, text.data(), text.size());
  }
  /// Waits for it to exit, at most `within` (then SIGKILL); its exit status.
  int wait(std::chrono::milliseconds within) {
    if (pid <= 0) return -1;
    const auto deadline = clock_type::now() + within;
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
      if (clock_type::now() > deadline) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pid = -1;
    if (in >= 0) ::close(in);
    if (out >= 0) ::close(out);
    in = out = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
};

/// Starts `argv` with `env` added; stderr (and stdout unless `pipe_out`) to `log`.
child spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
            const fs::path& log, bool pipe_in, bool pipe_out) {
  int in[2] = {-1, -1}, out[2] = {-1, -1};
  if (pipe_in && ::pipe2(in, O_CLOEXEC) != 0) die("pipe failed");
  if (pipe_out && ::pipe2(out, O_CLOEXEC) != 0) die("pipe failed");
  const pid_t pid = ::fork();
  if (pid < 0) die("fork failed");
  if (pid == 0) {
    const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (log_fd >= 0) {
      ::dup2(log_fd, STDERR_FILENO);
      if (!pipe_out) ::dup2(log_fd, STDOUT_FILENO);
    }
    if (pipe_in) ::dup2(in[0], STDIN_FILENO);
    else ::dup2(::open("/dev/null", O_RDONLY), STDIN_FILENO);
    if (pipe_out) ::dup2(out[1], STDOUT_FILENO);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    std::_Exit(127);
  }
  child c;
  c.pid = pid;
  if (pipe_in) {
    ::close(in[0]);
    c.in = in[1];
  }
  if (pipe_out) {
    ::close(out[1]);
    c.out = out[0];
  }
  return c;
}

// ---------------------------------------------------------------- the head, from outside

/// CPU seconds (user + system) of process `pid`, from /proc/<pid>/stat.
double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(stat.substr(close + 2));
  std::vector<std::string> f{std::istream_iterator<std::string>(fields), {}};
  // After "pid (comm) ": state is field 3, utime 14 and stime 15 (1-based, of the line).
  if (f.size() < 13) return 0;
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  return (std::stod(f[11]) + std::stod(f[12])) / ticks;
}

/// A field of /proc/<pid>/status in KiB (VmHWM: the peak resident set; VmRSS: now).
double status_kib(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string l; std::getline(in, l);) {
    if (l.rfind(field + ":", 0) == 0) return std::stod(l.substr(field.size() + 1));
  }
  return 0;
}

/// What the head's /metrics says, by sample name with its labels as written.
struct metrics {
  std::map<std::string, double> samples;
  /// The heartbeat histogram: each bucket's upper bound and cumulative count.
  std::vector<std::pair<double, double>> heartbeat_buckets;
  double get(const std::string& name) const {
    auto it = samples.find(name);
    return it == samples.end() ? 0 : it->second;
  }
};

std::optional<metrics> read_metrics(const std::string& url, const std::string& token) {
  httplib::Client c(url);
  c.set_bearer_token_auth(token);
  c.set_read_timeout(std::chrono::seconds(10));
  auto r = c.Get("/metrics");
  if (!r || r->status != 200) return std::nullopt;
  metrics m;
  std::istringstream in(r->body);
  const std::string bucket = "celer_head_heartbeat_seconds_bucket{le=\"";
  for (std::string l; std::getline(in, l);) {
    if (l.empty() || l[0] == '#') continue;
    const auto sp = l.rfind(' ');
    if (sp == std::string::npos) continue;
    const double v = std::stod(l.substr(sp + 1));
    const std::string name = l.substr(0, sp);
    m.samples[name] = v;
    if (name.rfind(bucket, 0) == 0) {
      const std::string le = name.substr(bucket.size(), name.size() - bucket.size() - 2);
      m.heartbeat_buckets.emplace_back(le == "+Inf" ? INFINITY : std::stod(le), v);
    }
  }
  return m;
}

/// The bound under which quantile `q` of the heartbeats between `a` and `b` fall.
double bucket_quantile(const metrics& a, const metrics& b, double q) {
  const auto& x = b.heartbeat_buckets;
  if (x.empty() || x.size() != a.heartbeat_buckets.size()) return 0;
  const double total = x.back().second - a.heartbeat_buckets.back().second;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (x[i].second - a.heartbeat_buckets[i].second >= q * total) return x[i].first;
  }
  return x.back().first;
}

// ---------------------------------------------------------------- one run

struct run_options {
  std::string celer;
  std::string self;
  int procs = 4;
  double idle_seconds = 10;
  int latency_tasks = 200;
  int batch_tasks = 2000;
  int actors = 0;  // 0: as many as nodes
  int node_timeout_ms = 0;  // 0: the knob's default
  double join_window = 2;   // seconds the agents' first hellos are spread over
  bool keep = false;
};

std::int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

/// Runs one cluster of `nodes` simulated agents; its figures, or "error" and why.
nlohmann::json run_cluster(int nodes, const run_options& o) {
  nlohmann::json r{{"nodes", nodes}};
  // When each phase began (unix ms), to line logs up with.
  auto phase = [&](const char* name) { r["phases_unix_ms"][name] = unix_ms(); };
  phase("start");
  char tmpl[] = "/tmp/celer-sim-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) die("cannot make a temporary directory");
  const fs::path tmp = tmpl;
  std::map<std::string, std::string> env{{"CELER_TEMP_DIR", (tmp / "celer").string()}};
  if (o.node_timeout_ms > 0) env["CELER_NODE_TIMEOUT_MS"] = std::to_string(o.node_timeout_ms);
  std::vector<child> agents;
  child head, driver;
  auto finish = [&](const std::string& error) {
    for (auto& a : agents) {
      if (a.pid > 0) a.say("quit");
    }
    for (auto& a : agents) {
      if (a.pid <= 0) continue;
      for (auto l = a.line(std::chrono::seconds(10)); l; l = a.line(std::chrono::seconds(10))) {
        if (l->rfind("stats ", 0) == 0) r["agent_processes"].push_back(nlohmann::json::parse(l->substr(6)));
      }
      a.wait(std::chrono::seconds(5));
    }
    if (driver.pid > 0) driver.wait(std::chrono::seconds(1));
    if (head.pid > 0) {
      ::kill(head.pid, SIGTERM);
      head.wait(std::chrono::seconds(20));
    }
    if (!error.empty()) {
      r["error"] = error;
      std::cerr << "celer-bench-sim-cluster: " << nodes << " nodes: " << error << " (logs in " << tmp << ")\n";
    } else if (!o.keep) {
      std::error_code ec;
      fs::remove_all(tmp, ec);
    }
    return r;
  };

  // The head, with a node of its own (1 CPU, no sim_node): the driver's local node.
  head = spawn({o.celer, "start", "--head", "--block", "--port", "0", "--num-cpus", "1", "--dashboard-port", "0"},
               env, tmp / "head.out", false, false);
  std::string address, session, url;
  for (const auto t0 = clock_type::now(); address.empty();) {
    std::ifstream in(tmp / "head.out");
    for (std::string l; std::getline(in, l);) {
      const std::string ready = "celer: serving at ";
      if (l.rfind(ready, 0) != 0) continue;
      std::istringstream f(l.substr(ready.size()));
      std::string log;
      f >> address >> session >> log >> url;
    }
    if (clock_type::now() - t0 > std::chrono::seconds(30)) return finish("the head did not start");
    if (address.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::string token;
  std::ifstream(fs::path(session) / "token") >> token;
  const double cpu_start = cpu_seconds(head.pid);
  const auto t_start = clock_type::now();

  // The agents: `procs` processes (fewer for few nodes), the nodes shared out among them.
  const int procs = std::max(1, std::min(o.procs, (nodes + 9) / 10));
  const auto join_t0 = clock_type::now();
  for (int p = 0, first = 0; p < procs; ++p) {
    const int count = nodes / procs + (p < nodes % procs ? 1 : 0);
    agents.push_back(spawn({o.self, "agents", "--head", "tcp://" + address, "--token-file",
                            (fs::path(session) / "token").string(), "--count", std::to_string(count),
                            "--first", std::to_string(first), "--total", std::to_string(nodes),
                            "--join-window-ms", std::to_string(static_cast<int>(1000 * o.join_window))},
                           env, tmp / ("agents-" + std::to_string(p) + ".log"), true, true));
    first += count;
  }
  int joined = 0, failed = 0, unanswered = 0;
  for (auto& a : agents) {
    // Up to node_head_timeout_ms (60 s by default) of retries, after the window.
    auto l = a.line(std::chrono::seconds(180));
    if (!l || l->rfind("joined ", 0) != 0) return finish("an agent process did not join: " + l.value_or("(nothing)"));
    std::istringstream f(l->substr(7));
    int j = 0, x = 0, u = 0;
    double ms = 0;
    f >> j >> x >> ms >> u;
    joined += j;
    failed += x;
    unanswered += u;
  }
  // Every agent registered: the head counts them (and its own node) alive.
  std::optional<metrics> m;
  for (;;) {
    m = read_metrics(url, token);
    // (The heartbeat histogram comes with the head's first snapshot, on its first tick.)
    if (m && m->get("celer_nodes{state=\"alive\"}") >= nodes + 1 && !m->heartbeat_buckets.empty()) break;
    if (clock_type::now() - join_t0 > std::chrono::seconds(180)) {
      return finish("the head counts " + std::to_string(m ? m->get("celer_nodes{state=\"alive\"}") : 0) +
                    " live nodes, not " + std::to_string(nodes + 1));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  r["join"] = {{"seconds", std::chrono::duration<double>(clock_type::now() - join_t0).count()},
               {"window_seconds", o.join_window},
               {"agents_joined", joined},
               {"agents_failed", failed},
               {"hellos_unanswered", unanswered},
               {"head_nodes_alive", m->get("celer_nodes{state=\"alive\"}")}};

  // Idle: heartbeats only.
  phase("idle");
  const auto before = *m;
  const double cpu0 = cpu_seconds(head.pid);
  const auto t0 = clock_type::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(o.idle_seconds));
  const double cpu1 = cpu_seconds(head.pid);
  const double idle_s = std::chrono::duration<double>(clock_type::now() - t0).count();
  auto after = read_metrics(url, token);
  if (!after) return finish("the head's /metrics did not answer");
  const double beats = after->get("celer_head_heartbeat_seconds_count") - before.get("celer_head_heartbeat_seconds_count");
  const double beat_s = after->get("celer_head_heartbeat_seconds_sum") - before.get("celer_head_heartbeat_seconds_sum");
  r["idle"] = {{"seconds", idle_s},
               {"head_cpu_percent", 100 * (cpu1 - cpu0) / idle_s},
               {"heartbeats_per_second", beats / idle_s},
               {"heartbeat_handler_mean_us", beats > 0 ? 1e6 * beat_s / beats : 0},
               {"heartbeat_handler_p50_us_at_most", 1e6 * bucket_quantile(before, *after, 0.5)},
               {"heartbeat_handler_p99_us_at_most", 1e6 * bucket_quantile(before, *after, 0.99)},
               {"head_cpu_us_per_heartbeat", beats > 0 ? 1e6 * (cpu1 - cpu0) / beats : 0}};

  // The driver's work.
  phase("driver");
  auto env_driver = env;
  env_driver["CELER_ADDRESS"] = address;
  env_driver["CELER_LEASE_IDLE_MS"] = "0";  // each task takes a lease through the head
  const auto driver_json = tmp / "driver.json";
  const double cpu2 = cpu_seconds(head.pid);
  const auto t2 = clock_type::now();
  driver = spawn({o.self, "driver", "--latency-tasks", std::to_string(o.latency_tasks), "--batch-tasks",
                  std::to_string(o.batch_tasks), "--actors", std::to_string(o.actors > 0 ? o.actors : nodes),
                  "--json", driver_json.string()},
                 env_driver, tmp / "driver.log", false, false);
  const int driver_rc = driver.wait(std::chrono::seconds(600));
  const double work_s = std::chrono::duration<double>(clock_type::now() - t2).count();
  nlohmann::json d;
  try {
    std::ifstream in(driver_json);
    d = nlohmann::json::parse(in);
  } catch (const std::exception&) {
    return finish("the driver wrote no results (exit " + std::to_string(driver_rc) + ")");
  }
  r["driver"] = d;
  r["driver"]["head_cpu_percent"] = 100 * (cpu_seconds(head.pid) - cpu2) / work_s;
  if (driver_rc != 0) return finish("the driver failed (exit " + std::to_string(driver_rc) + ")");

  // A node goes silent: how long until the head declares it dead (its view, which it sends
  // to every live node; the silent agent hears it and says how long after its last heartbeat).
  phase("silence");
  agents.front().say("silence 0");
  const int timeout_ms = o.node_timeout_ms > 0 ? o.node_timeout_ms : 5000;
  auto dead = agents.front().line(std::chrono::milliseconds(4 * timeout_ms + 5000));
  if (!dead || dead->rfind("dead 0 ", 0) != 0) return finish("the head did not declare the silent node dead");
  r["dead_node"] = {{"detected_ms", std::stod(dead->substr(7))}, {"node_timeout_ms", timeout_ms}};

  r["head"] = {{"cpu_seconds", cpu_seconds(head.pid) - cpu_start},
               {"wall_seconds", std::chrono::duration<double>(clock_type::now() - t_start).count()},
               {"peak_rss_mib", status_kib(head.pid, "VmHWM") / 1024},
               {"rss_mib", status_kib(head.pid, "VmRSS") / 1024}};
  r["head"]["cpu_percent"] = 100 * r["head"]["cpu_seconds"].get<double>() / r["head"]["wall_seconds"].get<double>();
  phase("end");
  finish("");
  // Checked: every agent joined and heartbeated without being declared dead by mistake.
  std::uint64_t false_deaths = 0, refused = 0;
  for (const auto& p : r["agent_processes"]) {
    false_deaths += p["false_deaths"].get<std::uint64_t>();
    refused += p["refused"].get<std::uint64_t>() + p["zap_refused"].get<std::uint64_t>();
  }
  r["false_deaths"] = false_deaths;
  r["refused"] = refused;
  // Each agent's time from its first hello to the answer: the worst process's figures.
  for (const char* q : {"p50", "p99", "max"}) {
    double worst = 0;
    for (const auto& p : r["agent_processes"]) worst = std::max(worst, p["join_ms"][q].get<double>());
    r["join"][std::string("hello_answered_ms_") + q] = worst;
  }
  std::uint64_t withdraws = 0, given_back = 0, most_queued = 0;
  for (const auto& p : r["agent_processes"]) {
    withdraws += p["withdraws"].get<std::uint64_t>();
    given_back += p["tasks_given_back"].get<std::uint64_t>();
    most_queued = std::max(most_queued, p["most_tasks_queued_per_worker"].get<std::uint64_t>());
  }
  r["pipelining"] = {{"withdraws", withdraws}, {"tasks_given_back", given_back},
                     {"most_tasks_queued_per_worker", most_queued}};
  return r;
}

std::string fixed(double v, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

void print_table(const nlohmann::json& runs) {
  auto num = [](const nlohmann::json& j, const char* a, const char* b, int digits) -> std::string {
    if (!j.contains(a) || !j[a].contains(b)) return "-";
    return fixed(j[a][b].get<double>(), digits);
  };
  std::cout << "| nodes | join s | hellos retried | head CPU idle % | head CPU run % | head peak RSS MiB | heartbeats/s | "
               "handler mean us | head CPU us/heartbeat | spill p50 ms | spill p99 ms | batch tasks/s | "
               "actors/s | dead after ms |\n"
            << "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : runs) {
    const auto d = r.value("driver", nlohmann::json::object());
    std::cout << "| " << r["nodes"].get<int>() << " | " << num(r, "join", "seconds", 1) << " | "
              << num(r, "join", "hellos_unanswered", 0) << " | "
              << num(r, "idle", "head_cpu_percent", 1) << " | " << num(r, "driver", "head_cpu_percent", 1) << " | "
              << num(r, "head", "peak_rss_mib", 0) << " | " << num(r, "idle", "heartbeats_per_second", 0) << " | "
              << num(r, "idle", "heartbeat_handler_mean_us", 1) << " | "
              << num(r, "idle", "head_cpu_us_per_heartbeat", 0) << " | " << num(d, "latency", "p50_ms", 2) << " | "
              << num(d, "latency", "p99_ms", 2) << " | " << num(d, "batch", "per_second", 0) << " | "
              << num(d, "actors", "per_second", 0) << " | " << num(r, "dead_node", "detected_ms", 0) << " |"
              << (r.contains("error") ? " error: " + r["error"].get<std::string>() : std::string()) << "\n";
  }
}

/// Whether run `r` completed with everything checked: every agent joined and the head
/// counted it alive, every task and actor answered with the value sent, no agent was declared
/// dead while it heartbeated (and the silent one was), nothing was refused.
bool checked(const nlohmann::json& r, const run_options& o) {
  if (r.contains("error") || !r.contains("join") || !r.contains("driver") || !r.contains("dead_node")) return false;
  const int nodes = r["nodes"].get<int>();
  const auto& d = r["driver"];
  const int actors = o.actors > 0 ? o.actors : nodes;
  std::uint64_t answered = 0;
  for (const auto& p : r.value("agent_processes", nlohmann::json::array())) answered += p["tasks_answered"].get<std::uint64_t>();
  return r["join"]["agents_joined"].get<int>() == nodes && r["join"]["agents_failed"].get<int>() == 0 &&
         r["join"]["head_nodes_alive"].get<double>() >= nodes + 1 && d.value("wrong_results", 1) == 0 &&
         d["latency"]["tasks"].get<int>() == o.latency_tasks && d["batch"]["tasks"].get<int>() == o.batch_tasks &&
         d["actors"]["actors"].get<int>() == actors &&
         answered >= static_cast<std::uint64_t>(o.latency_tasks + o.batch_tasks + actors) &&
         r.value("false_deaths", 1) == 0 && r.value("refused", 1) == 0;
}

std::string read_token(const std::string& file) {
  std::string token;
  std::ifstream(file) >> token;
  if (token.empty()) die("no token in " + file);
  return token;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"celer-bench-sim-cluster: a real head with up to 1,000 simulated node agents"};
  std::string nodes_list = "10,100,1000", json;
  run_options o;
  bool check = false;
  app.add_option("--nodes", nodes_list, "node counts to run, comma-separated")->capture_default_str();
  app.add_option("--procs", o.procs, "processes the simulated agents are spread over")->capture_default_str();
  app.add_option("--idle-seconds", o.idle_seconds, "how long the heartbeat-only phase lasts")->capture_default_str();
  app.add_option("--latency-tasks", o.latency_tasks, "tasks run one at a time (latency)")->capture_default_str();
  app.add_option("--batch-tasks", o.batch_tasks, "tasks submitted at once (throughput)")->capture_default_str();
  app.add_option("--actors", o.actors, "actors created (default: one per node)");
  app.add_option("--node-timeout-ms", o.node_timeout_ms, "the head's node_timeout_ms (default: the knob's)");
  app.add_option("--join-window", o.join_window, "seconds the agents' first hellos are spread over")->capture_default_str();
  app.add_option("--celer", o.celer, "the celer CLI (default: ../runtime/celer beside this program)");
  app.add_option("--json", json, "write the figures here as JSON");
  app.add_flag("--check", check, "exit 1 unless every node joined, every result was right and the dead node was found");
  app.add_flag("--keep", o.keep, "keep each run's temporary directory (logs)");

  auto* agents_cmd = app.add_subcommand("agents", "run simulated node agents (one process of them)");
  celer::bench::sim_agents_options ao;
  std::string token_file;
  agents_cmd->add_option("--head", ao.head, "the head's endpoint, tcp://host:port")->required();
  agents_cmd->add_option("--token-file", token_file, "the cluster token's file")->required();
  agents_cmd->add_option("--count", ao.count, "agents in this process")->capture_default_str();
  agents_cmd->add_option("--first", ao.first, "the index of the first")->capture_default_str();
  agents_cmd->add_option("--total", ao.total, "agents in the whole run (for the join window)")->capture_default_str();
  agents_cmd->add_option("--join-window-ms", ao.join_window_ms, "the first hellos are spread over this")->capture_default_str();
  agents_cmd->add_option("--cpus", ao.cpus, "CPUs each offers")->capture_default_str();
  agents_cmd->add_option("--ip", ao.ip, "the address they listen on")->capture_default_str();

  auto* driver_cmd = app.add_subcommand("driver", "the real driver's phases (on CELER_ADDRESS)");
  celer::bench::sim_driver_options dopt;
  driver_cmd->add_option("--latency-tasks", dopt.latency_tasks)->capture_default_str();
  driver_cmd->add_option("--batch-tasks", dopt.batch_tasks)->capture_default_str();
  driver_cmd->add_option("--actors", dopt.actors)->capture_default_str();
  driver_cmd->add_option("--json", dopt.json);
  CLI11_PARSE(app, argc, argv);

  if (agents_cmd->parsed()) {
    ao.token = read_token(token_file);
    return celer::bench::run_sim_agents(ao);
  }
  if (driver_cmd->parsed()) return celer::bench::run_sim_driver(dopt);

  std::signal(SIGPIPE, SIG_IGN);
  o.self = fs::read_symlink("/proc/self/exe").string();
  if (o.celer.empty()) o.celer = (fs::path(o.self).parent_path().parent_path() / "runtime" / "celer").string();
  if (!fs::exists(o.celer)) die("no celer CLI at " + o.celer + " (--celer)");
  nlohmann::json runs = nlohmann::json::array();
  std::istringstream list(nodes_list);
  bool ok = true;
  for (std::string n; std::getline(list, n, ',');) {
    auto r = run_cluster(std::stoi(n), o);
    std::ifstream load("/proc/loadavg");
    std::string la;
    std::getline(load, la);
    r["loadavg"] = la;
    ok = ok && checked(r, o);
    runs.push_back(std::move(r));
  }
  print_table(runs);
  std::cout << (ok ? "sim_cluster_checked all runs completed with every result checked\n"
                   : "sim_cluster_checked FAILED: a run did not complete, or a result, a node or a death was wrong\n");
  if (!json.empty()) std::ofstream(json) << nlohmann::json{{"runs", runs}}.dump(2) << "\n";
  return check && !ok ? 1 : 0;
}
