// The `celer` command line: start / stop / status of a cluster, and the knobs.
#include "cli/jobs_cli.hpp"
#include "cli/no_cluster.hpp"
#include "cli/terminal_text.hpp"
#include "cluster/daemon.hpp"
#include "cluster/driver.hpp"
#include "cluster/session.hpp"
#include "config/knobs.hpp"
#include "head/head_snapshot.hpp"

#include <celer/version.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <string_view>
#include <vector>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

namespace {

using namespace celer;

struct start_args {
  bool head = false;
  int port = 6380;
  std::string address;
  double num_cpus = -1;
  double num_gpus = -1;
  std::string gpus;
  double memory = 0;
  std::string resources;
  std::string labels;
  std::string node_ip;
  /// --token VALUE: refused (see token_for_start); only whether it was given matters.
  bool token_on_command_line = false;
  std::string token_file;
  bool token_stdin = false;
  bool block = false;
  bool resume = false;
  double object_store_memory = 0;
  std::string object_store_dir;
  /// Head: the HTTP server (-1: none; 0: any free port).
  int dashboard_port = 8266;
  bool dashboard_port_given = false;
  std::string dashboard_host = "127.0.0.1";
  std::string tls_cert;
  std::string tls_key;
};

std::map<std::string, double> parse_resources(const std::string& json) {
  std::map<std::string, double> out;
  if (json.empty()) return out;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json);
  } catch (const std::exception& e) {
    throw CLI::ValidationError("--resources", "not JSON: " + std::string(e.what()));
  }
  if (!j.is_object()) throw CLI::ValidationError("--resources", "expected an object {\"name\": n}");
  for (const auto& [k, v] : j.items()) {
    if (!v.is_number()) throw CLI::ValidationError("--resources", "'" + k + "' is not a number");
    out[k] = v.get<double>();
  }
  return out;
}

std::map<std::string, std::string> parse_labels(const std::string& text) {
  std::map<std::string, std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw CLI::ValidationError("--labels", "'" + item + "' is not key=value");
    }
    out[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return out;
}

std::string mib(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

/// One line of standard input, without echo when it is a terminal.
std::string read_token_line() {
  termios saved{};
  const bool tty = ::isatty(STDIN_FILENO) == 1 && ::tcgetattr(STDIN_FILENO, &saved) == 0;
  if (tty) {
    std::cerr << "cluster token: " << std::flush;
    termios quiet = saved;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
  }
  std::string line;
  std::getline(std::cin, line);
  if (tty) {
    ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
    std::cerr << "\n";
  }
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

/// The token `celer start` uses: --token-file, --token-stdin or CELER_TOKEN (already in
/// `from_env`), never the command line, where every user could read it in
/// /proc/PID/cmdline and ps. "" when none was given (a head makes one; a node reads the
/// one in this machine's session directory).
expected<std::string> token_for_start(const start_args& a, const std::string& from_env) {
  if (a.token_on_command_line) {
    return error(error_code::invalid_argument,
                 "--token is not accepted: a token on the command line can be read by every "
                 "user of the machine (ps, /proc/PID/cmdline). Give it with --token-file PATH "
                 "(a file of yours with mode 0600), --token-stdin (one line on standard "
                 "input), or CELER_TOKEN=... in the environment");
  }
  std::string token = from_env;
  std::string source = "CELER_TOKEN";
  if (!a.token_file.empty()) {
    auto t = cluster::read_secret_file(a.token_file, cluster::follow_symlinks::yes);
    if (!t) return t.error();
    token = *t;
    source = "the token file " + a.token_file;
  } else if (a.token_stdin) {
    token = read_token_line();
    source = "standard input";
    if (token.empty()) return error(error_code::invalid_argument, "--token-stdin: no token on standard input");
  }
  if (token.empty()) {
    if (!a.token_file.empty()) {
      return error(error_code::invalid_argument, "the token file " + a.token_file + " is empty");
    }
    return token;
  }
  // It travels in the hello (at most 1 KiB) and is written as one line.
  for (const char c : token) {
    if (c <= ' ' || c > '~') {
      return error(error_code::invalid_argument,
                   "the cluster token from " + source + " has a blank or non-ASCII character");
    }
  }
  if (token.size() > 256) {
    return error(error_code::invalid_argument,
                 "the cluster token from " + source + " is longer than 256 characters");
  }
  if (a.head && token.size() < 16) {
    return error(error_code::invalid_argument,
                 "the cluster token from " + source + " is too short to protect a cluster "
                 "(" + std::to_string(token.size()) + " characters, at least 16); leave it "
                 "out and the head makes a random 256-bit one");
  }
  return token;
}

/// Starts the head or a node agent in the background; returns once it serves (or failed).
int start(const start_args& a) {
  if (a.head == !a.address.empty()) {
    std::cerr << "celer start: give either --head or --address HOST:PORT\n";
    return 2;
  }
  knob_values k = load_knobs(0, nullptr);
  auto token = token_for_start(a, k.token);
  if (!token) {
    std::cerr << "celer start: " << token.error().message() << "\n";
    return 2;
  }
  k.token = *token;
  if (a.object_store_memory > 0) k.object_store_memory = a.object_store_memory;
  if (!a.object_store_dir.empty()) k.object_store_dir = a.object_store_dir;
  set_knobs(k);
  cluster::daemon_options o;
  o.head = a.head;
  o.port = a.port;
  o.head_address = a.address;
  o.num_cpus = a.num_cpus;
  o.num_gpus = a.num_gpus;
  o.gpus = a.gpus;
  o.memory = a.memory;
  o.resources = parse_resources(a.resources);
  o.labels = parse_labels(a.labels);
  o.node_ip = a.node_ip.empty() ? k.node_ip : a.node_ip;
  o.resume = a.resume;
  o.http_port = a.dashboard_port;
  o.http_port_fallback = !a.dashboard_port_given;
  o.http_host = a.dashboard_host;
  o.tls_cert = a.tls_cert;
  o.tls_key = a.tls_key;
  o.with_node = !(a.head && a.num_cpus == 0 && a.num_gpus <= 0 && a.gpus.empty() &&
                  o.resources.empty());

  if (a.block) {
    return cluster::run_daemon(k, o, [](const expected<std::string>& r) {
      if (r) {
        std::cout << "celer: serving at " << *r << std::endl;
      } else {
        std::cerr << "celer start: " << r.error().to_string() << std::endl;
      }
    });
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    std::perror("celer start: pipe");
    return 1;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    std::perror("celer start: fork");
    return 1;
  }
  if (pid == 0) {
    ::close(fds[0]);
    ::setsid();
    const int null_fd = ::open("/dev/null", O_RDWR);
    if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
    const int code = cluster::run_daemon(k, o, [&](const expected<std::string>& r) {
      std::string line;
      if (r) {
        // From here on the daemon logs to its file in the session directory.
        std::istringstream in(*r);
        std::string addr, dir, log;
        in >> addr >> dir >> log;
        const int log_fd =
          ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (log_fd >= 0) {
          ::dup2(log_fd, STDOUT_FILENO);
          ::dup2(log_fd, STDERR_FILENO);
          ::close(log_fd);
        }
        line = "ok " + *r + "\n";
      } else {
        line = "error " + r.error().to_string() + "\n";
      }
      (void)!::write(fds[1], line.data(), line.size());
      ::close(fds[1]);
    });
    std::_Exit(code);
  }
  ::close(fds[1]);
  std::string reply;
  char buf[512];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n > 0) {
      reply.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  ::close(fds[0]);
  if (reply.rfind("ok ", 0) != 0) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (reply.rfind("error ", 0) == 0) {
      std::cerr << "celer start: " << reply.substr(6);
    } else {
      std::cerr << "celer start: the daemon exited during startup\n";
    }
    return 1;
  }
  std::istringstream in(reply.substr(3));
  std::string addr, dir, log, http_url;
  in >> addr >> dir >> log >> http_url;
  if (a.head) {
    std::cout << "celer head " << (a.resume ? "resumed" : "started") << " at " << addr
              << " (pid " << pid << ")\n"
              << "  session directory: " << dir << "\n"
              << "  log: " << log << "\n";
    if (!http_url.empty() && http_url != "-")
      std::cout << "  REST API and metrics: " << http_url
                << " (every request needs 'Authorization: Bearer' and the token in " << dir << "/token)\n";
    std::cout << "\n"
              << "To add a node on this machine:\n"
              << "  celer start --address " << addr << "\n"
              << "On another machine, with the token from " << dir << "/token copied to\n"
              << "~/.celer/token there (chmod 600; never put it on a command line):\n"
              << "  celer start --address " << addr << " --token-file ~/.celer/token\n"
              << "To run a program on the cluster:\n"
              << "  CELER_ADDRESS=" << addr << " ./your_program\n"
              << "To see it: celer status     To stop what this machine started: celer stop\n";
  } else {
    std::cout << "celer node started and joined " << addr << " (pid " << pid << ")\n"
              << "  log: " << log << "\n";
  }
  return 0;
}

bool is_celer_process(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
  std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return cmd.find("celer") != std::string::npos;
}

int stop(bool force) {
  set_knobs(load_knobs(0, nullptr));
  auto recorded = cluster::recorded_daemons();
  if (!recorded) {
    std::cerr << "celer stop: " << recorded.error().message() << "\n";
    return 1;
  }
  const auto& daemons = *recorded;
  std::vector<int> signalled;
  for (const auto& [pid, file] : daemons) {
    if (::kill(pid, 0) != 0 || !is_celer_process(pid)) {
      std::error_code ec;
      std::filesystem::remove(file, ec);  // stale: the process is gone
      continue;
    }
    ::kill(pid, force ? SIGKILL : SIGTERM);
    signalled.push_back(pid);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  for (int pid : signalled) {
    while (::kill(pid, 0) == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (::kill(pid, 0) == 0) {
      std::cerr << "celer stop: pid " << pid << " did not stop in 15 s; killing it\n";
      ::kill(pid, SIGKILL);
    }
  }
  for (const auto& [pid, file] : daemons) {
    std::error_code ec;
    if (::kill(pid, 0) != 0) std::filesystem::remove(file, ec);
  }
  std::cout << "celer stop: stopped " << signalled.size() << " process(es)\n";
  return 0;
}

std::string usage(const protocol::resource_set& total, const protocol::resource_set& available,
                  bool alive) {
  std::string out;
  const auto free = available.to_map();
  for (const auto& [name, amount] : total.to_map()) {
    if (name.starts_with("node:")) continue;  // the node's own resource: its id is shown
    if (!out.empty()) out += ", ";
    const double left = free.contains(name) ? free.at(name) : 0.0;
    if (name == protocol::memory) {
      std::ostringstream gib;
      gib << std::fixed << std::setprecision(1) << (amount - left) / (1 << 30) << "/"
          << amount / (1 << 30) << " GiB";
      out += "memory " + (alive ? gib.str() : "-");
    } else {
      out += name + " " + (alive ? protocol::format_amount(amount - left) + "/" : "") +
             protocol::format_amount(amount);
    }
  }
  return out;
}

/// The cluster a command asks: --address, else CELER_ADDRESS, else this machine's latest
/// session; "" (with a message on stderr) when there is none.
std::string cluster_address(std::string address, const knob_values& k, const char* command) {
  if (address.empty()) address = k.address;
  if (address.empty()) {
    auto latest = cluster::latest_session();
    if (!latest) {
      std::cerr << "celer " << command << ": " << latest.error().message() << "\n";
      return {};
    }
    if (*latest) address = cluster::session_address(**latest);
  }
  if (address.empty()) {
    std::cerr << "celer " << command << ": no cluster: give --address HOST:PORT, set "
              << "CELER_ADDRESS, or start one with celer start --head\n";
  }
  return address;
}

/// Says why `command` could not ask the cluster at `address`, and what to do. A token that
/// is missing matters less than a head that is not there: without a token there was no
/// hello to say, so a plain connection tells whether anything listens at the address.
void report_failure(const char* command, const std::string& address, const celer::exception& e) {
  if (e.code() == error_code::unauthenticated) {
    if (auto parts = cluster::parse_address(address)) {
      auto up = cluster::accepts_connections(*parts, std::chrono::milliseconds(2000));
      if (!up && up.error().code() == error_code::unavailable) {
        std::cerr << "celer " << command << ": " << to_string(up.error().code()) << ": " << up.error().message() << "\n"
                  << cli::unreachable_hint(error_code::unavailable);
        return;
      }
    }
  }
  std::cerr << "celer " << command << ": " << to_string(e.code()) << ": " << cli::printable(e.what()) << "\n"
            << cli::unreachable_hint(e.code());
}

int list_placement_groups(std::string address) {
  knob_values k = load_knobs(0, nullptr);
  set_knobs(k);
  address = cluster_address(std::move(address), k, "list placement-groups");
  if (address.empty()) return 1;
  if (auto why = cli::dead_head_message(address)) {
    std::cerr << "celer list placement-groups: " << *why;
    return 1;
  }
  try {
    cluster::cluster_driver client(k, address, cluster::cluster_driver::role::observer);
    auto groups = client.core().query_placement_groups({});
    client.stop();
    std::cout << groups.size() << " placement group(s)\n";
    for (const auto& g : groups) {
      const char* state = group_state_name(g.state);
      std::cout << "group " << g.id.hex() << (g.name.empty() ? "" : "  " + cli::printable(g.name)) << "  "
                << bundle_strategy_name(g.strategy) << "  " << state << "  job " << g.job.short_hex()
                << "\n";
      for (std::size_t i = 0; i < g.bundles.size(); ++i) {
        std::cout << "  bundle " << i << ": " << g.bundles[i].need.to_string();
        if (i < g.nodes.size() && !g.nodes[i].nil()) std::cout << "  on node " << g.nodes[i].short_hex();
        std::cout << "\n";
      }
      if (!g.why.empty()) std::cout << "  " << cli::printable(g.why) << "\n";
    }
    return 0;
  } catch (const celer::exception& e) {
    report_failure("list placement-groups", address, e);
    return 1;
  }
}

int status(std::string address) {
  knob_values k = load_knobs(0, nullptr);
  set_knobs(k);
  address = cluster_address(std::move(address), k, "status");
  if (address.empty()) return 1;
  // A head killed or crashed leaves its session here: say so now, not after the hello's
  // timeout (connect_timeout_ms).
  if (auto why = cli::dead_head_message(address)) {
    std::cerr << "celer status: " << *why;
    return 1;
  }
  try {
    cluster::cluster_driver client(k, address, cluster::cluster_driver::role::observer);
    auto st = client.status();
    client.stop();
    std::size_t alive = 0, queued = 0;
    for (const auto& n : st.nodes) {
      alive += n.alive ? 1 : 0;
      queued += n.alive ? n.queued : 0;
    }
    std::cout << "cluster " << address << ": " << st.nodes.size() << " node(s), " << alive
              << " alive, " << st.nodes.size() - alive << " dead\n"
              << "actors: " << st.actors_alive << " alive, " << st.actors_pending
              << " pending; tasks queued on nodes: " << queued << "\n"
              << "(use and queues as of each node's last heartbeat)\n\n";
    for (const auto& n : st.nodes) {
      std::cout << "node " << n.node.short_hex() << "  " << (n.alive ? "alive" : "DEAD") << "  "
                << n.addr.endpoint << "\n";
      std::cout << "  resources (used/total): " << usage(n.total, n.available, n.alive) << "\n";
      if (n.alive) {
        std::cout << "  queued " << n.queued << ", workers " << n.workers << "\n";
        const auto& o = n.store;
        std::cout << "  objects: " << mib(o.bytes_in_memory) << " of " << mib(o.capacity)
                  << " in memory (" << o.objects_in_memory << " objects), "
                  << o.objects_on_disk_only << " on disk only; spilled " << o.spilled_objects
                  << " (" << mib(o.spilled_bytes) << "), restored " << o.restored_objects
                  << " (" << mib(o.restored_bytes) << "), pulled " << o.pulled_objects << " ("
                  << mib(o.pulled_bytes) << ")\n";
      } else {
        std::cout << "  dead: " << cli::printable(n.dead_reason) << "\n";
      }
      if (!n.isolation.empty()) std::cout << "  jobs confined by: " << n.isolation << "\n";
      if (!n.labels.empty()) {
        std::cout << "  labels:";
        for (const auto& [key, v] : n.labels) std::cout << " " << cli::printable(key) << "=" << cli::printable(v);
        std::cout << "\n";
      }
      for (std::size_t i = 0; i < n.gpus.size(); ++i) {
        const auto& d = n.gpus[i];
        const double used =
          i < n.gpu_free.size() && n.alive
            ? 1.0 - static_cast<double>(n.gpu_free[i]) / protocol::resource_unit
            : 0.0;
        std::cout << "  gpu " << d.index << ": " << d.name << " (" << d.model << ", "
                  << std::fixed << std::setprecision(1)
                  << static_cast<double>(d.memory_bytes) / 1e9 << " GB"
                  << (d.compute_major > 0 ? ", cc " + std::to_string(d.compute_major) + "." +
                                              std::to_string(d.compute_minor)
                                          : std::string())
                  << ")  speed " << std::setprecision(2) << d.speed
                  << (d.declared ? " declared" : "") << "  in use " << used;
        for (const auto& s : n.gpu_samples) {
          if (s.index != d.index) continue;
          std::cout << "  util " << std::setprecision(0) << s.utilisation * 100 << "%  memory "
                    << std::setprecision(1) << static_cast<double>(s.memory_used_bytes) / 1e9
                    << " GB";
          if (s.temperature_c > 0) std::cout << "  " << s.temperature_c << " C";
          if (s.throttled) std::cout << "  throttled: " << s.throttle_reasons;
        }
        std::cout << "\n" << std::defaultfloat;
      }
      for (const auto& w : n.waiting) {
        std::cout << "  waiting " << w.waiting_ms << " ms: "
                  << (w.kind == protocol::task_kind::actor_creation ? "actor " : "task ")
                  << cli::printable(w.function) << " (job " << w.job.short_hex();
        if (w.priority != 0) std::cout << ", priority " << w.priority;
        std::cout << "): " << cli::printable(w.why) << "\n";
      }
      for (const auto& p : n.preempting) {
        std::cout << "  preempting actor " << p.actor.short_hex() << " (" << cli::printable(p.function)
                  << ", priority " << p.priority << "): "
                  << (p.ms_left > 0 ? "stops within " + std::to_string(p.ms_left) + " ms"
                                    : std::string("stopping"))
                  << "; it " << cli::printable(p.reason) << "\n";
      }
    }
    return 0;
  } catch (const celer::exception& e) {
    report_failure("status", address, e);
    return 1;
  }
}

/// `celer microbenchmark ...` runs celer-microbenchmark (built from bench/), found next to
/// this program, in the build tree's bench/, or on PATH.
[[noreturn]] void exec_microbenchmark(int argc, char** argv) {
  std::vector<std::string> candidates;
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back((self.parent_path() / "celer-microbenchmark").string());
    candidates.push_back((self.parent_path().parent_path() / "bench" / "celer-microbenchmark").string());
  }
  std::vector<char*> args{nullptr};
  for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  for (auto& c : candidates) {
    if (::access(c.c_str(), X_OK) == 0) {
      args[0] = c.data();
      ::execv(c.c_str(), args.data());
    }
  }
  std::string name = "celer-microbenchmark";
  args[0] = name.data();
  ::execvp(name.c_str(), args.data());
  std::cerr << "celer microbenchmark: cannot find celer-microbenchmark next to celer or on PATH\n";
  std::exit(127);
}

} // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "microbenchmark") exec_microbenchmark(argc, argv);
  CLI::App app{"celer: an actor-model distributed task runtime for machine-learning work"};
  app.set_version_flag("--version", std::string("celer ") + celer::version_string +
                                      " (protocol " + std::to_string(celer::protocol_version) +
                                      ")");
  bool knobs = false;
  app.add_flag("--help-knobs", knobs,
               "list every runtime knob: its CELER_* variable, --celer-* flag and default");
  app.footer(
    "Programs built with celer read --celer-<knob>=value flags and CELER_<KNOB> variables;\n"
    "see --help-knobs. Documentation: docs/ in the source tree.");

  start_args sa;
  auto* start_cmd = app.add_subcommand("start", "start a head (--head) or a node agent joining "
                                                "one (--address) in the background");
  start_cmd->add_flag("--head", sa.head, "start the head (with a node agent of its own unless "
                                         "--num-cpus 0)");
  start_cmd->add_option("--port", sa.port, "head: the port to listen on")->capture_default_str();
  start_cmd->add_option("--address", sa.address, "node: the head's HOST:PORT");
  start_cmd->add_option("--num-cpus", sa.num_cpus, "CPUs this node offers (default: all)");
  start_cmd->add_option("--num-gpus", sa.num_gpus,
                        "GPUs this node offers (default: those NVML finds, or --gpus)");
  start_cmd->add_option("--gpus", sa.gpus,
                        "GPUs to declare instead of discovering, e.g. "
                        "'A100-80GB:2,V100-16GB:2@15.7' (model-memory:count@speed score)");
  start_cmd->add_option("--memory", sa.memory, "bytes of memory this node offers");
  start_cmd->add_option("--resources", sa.resources,
                        "custom resources as JSON, e.g. '{\"disk\": 2}'");
  start_cmd->add_option("--labels", sa.labels, "labels, e.g. zone=a,kind=spot");
  start_cmd->add_option("--node-ip-address", sa.node_ip,
                        "the IP this node listens on and advertises (default: the one that "
                        "routes to the head; 127.0.0.1 for a head)");
  // Hidden, and refused with a message that says what to use instead.
  std::string refused_token;
  auto* token_opt =
    start_cmd->add_option("--token", refused_token)->expected(0, 1)->group("");
  auto* token_file_opt = start_cmd->add_option(
    "--token-file", sa.token_file,
    "read the cluster token from this file (yours, mode 0600): a node on another machine. "
    "Or --token-stdin, or CELER_TOKEN in the environment; never on the command line");
  start_cmd
    ->add_flag("--token-stdin", sa.token_stdin, "read the cluster token from standard input")
    ->excludes(token_file_opt);
  auto* dashboard_port_opt = start_cmd->add_option(
    "--dashboard-port", sa.dashboard_port,
    "head: the HTTP server's port: REST API and /metrics (default 8266, or a free one when "
    "8266 is taken; 0: a free one; -1: no HTTP server)");
  start_cmd->add_option("--dashboard-host", sa.dashboard_host,
                        "head: the address the HTTP server binds (default 127.0.0.1: this machine "
                        "only; every request needs a credential wherever it binds)")
    ->capture_default_str();
  start_cmd->add_option("--tls-cert", sa.tls_cert, "head: serve HTTPS with this PEM certificate (with --tls-key)");
  start_cmd->add_option("--tls-key", sa.tls_key, "head: the PEM private key of --tls-cert");
  start_cmd->add_flag("--block", sa.block, "run in the foreground until SIGTERM/SIGINT");
  start_cmd->add_flag("--resume", sa.resume,
                      "head: restart the head that last served at --port on this machine (after "
                      "a crash): take back its session, token and tables, and let its nodes and "
                      "drivers reconnect");
  start_cmd->add_option("--object-store-memory", sa.object_store_memory,
                        "bytes of shared memory for this node's objects (default: 30% of "
                        "memory); past it, objects spill to disk");
  start_cmd->add_option("--object-store-dir", sa.object_store_dir,
                        "where this node keeps spilled and durable objects (default: "
                        "objects/ in the session directory)");

  bool force = false;
  auto* stop_cmd = app.add_subcommand("stop", "stop every head and node this machine started");
  stop_cmd->add_flag("--force", force, "SIGKILL instead of a clean stop");

  std::string status_address;
  auto* status_cmd =
    app.add_subcommand("status", "every node (alive or dead), its resources and the pending work");
  status_cmd->add_option("--address", status_address,
                         "the head's HOST:PORT (default: CELER_ADDRESS, else this machine's "
                         "latest session)");

  std::string list_address;
  auto* list_cmd = app.add_subcommand("list", "list the cluster's state");
  auto* list_groups_cmd =
    list_cmd->add_subcommand("placement-groups", "every placement group, its bundles and nodes");
  list_groups_cmd->add_option("--address", list_address,
                              "the head's HOST:PORT (default: CELER_ADDRESS, else this "
                              "machine's latest session)");
  auto* list_jobs_cmd = list_cmd->add_subcommand("jobs", "every submitted job (as celer job list)");
  std::string list_http_address;
  list_jobs_cmd->add_option("--address", list_http_address, "the head's HOST:PORT or its HTTP URL");
  std::vector<std::pair<std::string, CLI::App*>> list_http_cmds;
  celer::cli::task_filter task_filter;
  for (const auto& [name, what] : std::vector<std::pair<std::string, std::string>>{
         {"nodes", "every node, alive or dead, and its resources"},
         {"actors", "every actor: class, name, state, job, node, restarts, and why it died"},
         {"tasks", "task counts by state, the most recent tasks (--job, --state, --limit), and what waits in the nodes' queues, and why"},
         {"objects", "each node's object store: bytes and objects in memory, spilled, restored"}}) {
    auto* c = list_cmd->add_subcommand(name, what);
    c->add_option("--address", list_http_address, "the head's HOST:PORT or its HTTP URL");
    if (name == "tasks") {
      c->add_option("--job", task_filter.job, "only this job's tasks (its id, or the first 8 digits)");
      c->add_option("--state", task_filter.state, "only tasks in this state: WAITING, RUNNING, FINISHED or FAILED");
      c->add_option("--limit", task_filter.limit, "how many tasks to list, newest first (default 20, at most 10000)")
        ->check(CLI::Range(1, 10000));
    }
    list_http_cmds.emplace_back(name, c);
  }
  list_cmd->require_subcommand(1);
  auto* actor_cmd = app.add_subcommand("actor", "act on one actor: celer actor kill");
  auto* actor_kill_cmd = actor_cmd->add_subcommand(
    "kill", "stop a live actor, by its id (or its first 8 digits) or its name, as celer::kill does "
            "from a program (the cluster's token: any actor; a job's credential: its own)");
  std::string actor_which, actor_address;
  bool actor_no_restart = true;
  actor_kill_cmd->add_option("actor", actor_which, "its id, or its name (celer list actors shows both)")->required();
  actor_kill_cmd->add_option("--no-restart", actor_no_restart,
                             "true (the default): dead for good; false: an actor with restarts left restarts")
    ->capture_default_str();
  actor_kill_cmd->add_option("--address", actor_address, "the head's HOST:PORT or its HTTP URL");
  actor_cmd->require_subcommand(1);
  auto run_job_command = celer::cli::add_job_commands(app);

  app.add_subcommand("microbenchmark",
                     "Ray's microbenchmark workloads on celer: celer microbenchmark --help");

  CLI11_PARSE(app, argc, argv);
  sa.token_on_command_line = token_opt->count() > 0;
  sa.dashboard_port_given = dashboard_port_opt->count() > 0;
  refused_token.assign(refused_token.size(), '\0');  // not kept around
  try {
    if (*start_cmd) return start(sa);
    if (*stop_cmd) return stop(force);
    if (*status_cmd) return status(status_address);
    if (*list_groups_cmd) return list_placement_groups(list_address);
    if (*list_jobs_cmd) return celer::cli::list_jobs(list_http_address);
    for (const auto& [name, c] : list_http_cmds)
      if (*c) return celer::cli::list_state(name, list_http_address, task_filter);
    if (*actor_kill_cmd) return celer::cli::kill_actor(actor_which, actor_no_restart, actor_address);
    if (const int rc = run_job_command(); rc >= 0) return rc;
  } catch (const CLI::Error& e) {
    return app.exit(e);
  } catch (const celer::exception& e) {
    std::cerr << "celer: " << celer::to_string(e.code()) << ": " << e.what() << "\n";
    return 1;
  }
  if (knobs) {
    for (const auto& k : celer::knob_list()) {
      std::string upper, dashed;
      for (const char* c = k.name; *c; ++c) {
        upper += static_cast<char>(std::toupper(*c));
        dashed += *c == '_' ? '-' : *c;
      }
      std::cout << "CELER_" << upper << "  "
                << (k.command_line ? "--celer-" + dashed : std::string("(environment only)"))
                << "  (default " << k.default_value << ")\n    " << k.description << "\n";
    }
    return 0;
  }
  if (argc == 1) {
    std::cout << app.help();
  }
  return 0;
}
