#include "cluster/daemon.hpp"

#include "cluster/head_join.hpp"
#include "cluster/process_wiring.hpp"
#include "cluster/session.hpp"
#include "crash.hpp"
#include "head/head.hpp"
#include "head/head_tables.hpp"
#include "host.hpp"
#include "http/api.hpp"
#include "http/gateway.hpp"
#include "http/jobs_api.hpp"
#include "jobs/driver_process.hpp"
#include "jobs/job_manager.hpp"
#include "http/server.hpp"
#include "log.hpp"
#include "node/node_agent.hpp"
#include "node/node_config.hpp"
#include "node/process_launcher.hpp"
#include "sandbox/job_sandbox.hpp"
#include "transport/bulk_lane.hpp"
#include "transport/zmq_transport.hpp"

#include <celer/store/table_db.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string_view>
#include <thread>
#include <vector>

#include <pthread.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

extern char** environ;

namespace celer::cluster {
namespace {

/// The head's submitted jobs (docs/jobs.md): their manager, its drivers' launcher, and a
/// thread that ticks it (heartbeats for running jobs, SIGKILL for stops past their grace).
struct head_jobs {
  jobs::driver_process_launcher launcher;
  jobs::job_manager manager;
  std::mutex m;
  std::condition_variable cv;
  bool stopping = false;
  std::thread ticker;

  head_jobs(jobs::job_manager_config cfg, jobs::job_hooks hooks, std::shared_ptr<store::table_db> db,
            std::chrono::milliseconds every, sandbox::job_sandbox* box)
    : launcher(box), manager(std::move(cfg), launcher, std::move(hooks), std::move(db)) {
    ticker = std::thread([this, every] {
      std::unique_lock lock(m);
      while (!cv.wait_for(lock, every, [&] { return stopping; })) {
        lock.unlock();
        manager.tick();
        lock.lock();
      }
    });
  }
  /// Stops every running job (SIGTERM, SIGKILL after 5 s) and the ticker; idempotent.
  void stop() {
    {
      std::lock_guard lock(m);
      if (stopping) return;
      stopping = true;
    }
    cv.notify_all();
    ticker.join();
    manager.shutdown(std::chrono::seconds(5));
  }
  ~head_jobs() { stop(); }
};

std::unique_ptr<head_jobs> start_jobs(const knob_values& k, const credentials& creds, zmq_transport& net, transport& local,
                                      const address& head_addr, const std::filesystem::path& session_dir,
                                      const std::string& cluster_address, const std::string& ip,
                                      std::shared_ptr<store::table_db> tables,
                                      std::shared_ptr<http::head_gateway> gateway,
                                      std::shared_ptr<head_snapshot_board> board, sandbox::job_sandbox& box) {
  jobs::job_manager_config cfg{.jobs_dir = session_dir / "jobs",
                               .packages_dir = session_dir / "packages",
                               .job_dir = box.job_dir(),
                               .cluster_address = cluster_address,
                               .creds = creds,
                               .encrypt = k.encryption != 0,
                               .node_ip = ip,
                               .base_env = {}};
  // The head's environment, less its own CELER_ settings (its token, its address), but
  // where sessions live and how much to log.
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view v(*e);
    if (!v.starts_with("CELER_") || v.starts_with("CELER_LOG_LEVEL=") || v.starts_with("CELER_TEMP_DIR="))
      cfg.base_env.emplace_back(v);
  }
  jobs::job_hooks hooks{
    .started = [&net, &local, head_addr](const job_id& job, const std::vector<std::string>& namespaces) {
      net.register_job(job, namespaces);  // its driver's and workers' connections are let in
      (void)local.send(head_addr, protocol::job_heartbeat{job});
    },
    .alive = [&local, head_addr](const job_id& job) { (void)local.send(head_addr, protocol::job_heartbeat{job}); },
    .ended = [&local, head_addr, &box](const job_id& job) {
      (void)local.send(head_addr, protocol::job_finished{job});
      box.job_finished(job, /*kill_left=*/true);  // its driver is over: its user and folder on this machine
    },
    .reserve = [gateway](const job_id& job, double cpus, double gpus) -> expected<placement_group_id> {
      auto need = protocol::make_request(cpus, gpus, 0, {});
      if (!need) return need.error();
      protocol::create_placement_group g;
      g.id = placement_group_id::random();
      g.name = "entrypoint of job " + job.short_hex();
      g.strategy = bundle_strategy::pack;
      g.bundles.push_back(protocol::bundle_spec{*need, {}});
      g.job = job;
      const placement_group_id id = g.id;
      if (auto ok = gateway->create_group(std::move(g), std::chrono::seconds(10)); !ok) return ok.error();
      return id;
    },
    .reserved = [board](const placement_group_id& id, std::string& why) -> std::optional<node_id> {
      auto s = board->latest();
      if (!s) return std::nullopt;
      for (const auto& g : s->groups) {
        if (g.id != id) continue;
        if (g.state == protocol::group_state::created && !g.nodes.empty()) return g.nodes.front();
        why = g.why;
      }
      return std::nullopt;
    }};
  return std::make_unique<head_jobs>(std::move(cfg), std::move(hooks), std::move(tables),
                                     std::chrono::milliseconds(std::max(10, k.heartbeat_ms)), &box);
}

/// How this daemon confines jobs' processes, from the job_* knobs (sandbox/job_sandbox.hpp).
std::unique_ptr<sandbox::job_sandbox> make_sandbox(const knob_values& k) {
  sandbox::options o;
  o.mode = k.job_isolation;
  unsigned first = 0, last = 0;
  char dash = 0;
  std::istringstream range(k.job_uids);
  if (range >> first >> dash >> last && dash == '-') {
    o.users.first = first;
    o.users.last = last;
  } else {
    o.users.first = 1;  // an empty range: job_users::open says why
    o.users.last = 0;
    CELER_LOG(warn, "sandbox", "job_uids '" + k.job_uids + "' is not FIRST-LAST: no user per job");
  }
  auto split = [](const std::string& list, std::vector<std::filesystem::path>& into) {
    std::stringstream paths(list);
    for (std::string p; std::getline(paths, p, ':');) {
      if (!p.empty()) into.emplace_back(p);
    }
  };
  split(k.job_read_paths, o.read_paths);
  split(k.job_write_paths, o.write_paths);
  o.job_dir = !k.job_dir.empty()       ? std::filesystem::path(k.job_dir)
              : ::geteuid() == 0 ? std::filesystem::path("/tmp/celer-jobs")
                                 : std::filesystem::path("/tmp/celer-jobs-" + std::to_string(::geteuid()));
  auto box = sandbox::job_sandbox::detect(std::move(o));
  CELER_LOG(info, "sandbox", "jobs' processes run confined: " + box->describe());
  return box;
}

/// Raises the soft limit on open files to the hard one: the head holds about three
/// descriptors per node (its connection to the node, the node's to it, a socket's mailbox).
/// Says so when the hard limit leaves room for fewer nodes than `connections` (or 4,096).
void raise_open_files(std::size_t connections) {
  rlimit nofile{};
  if (::getrlimit(RLIMIT_NOFILE, &nofile) != 0) return;
  if (nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &nofile);
  }
  const std::size_t nodes = static_cast<std::size_t>(nofile.rlim_cur / 3);
  if (nodes < std::min<std::size_t>(connections, 4096)) {
    CELER_LOG(warn, "head", "the open-file limit (" + std::to_string(nofile.rlim_cur) + ") lets the head serve about " +
                              std::to_string(nodes) + " nodes; raise it (ulimit -n) for a larger cluster");
  }
}

} // namespace

int run_daemon(const knob_values& k, const daemon_options& o,
               const std::function<void(const expected<std::string>&)>& ready) {
  // Signals are taken by sigwait below; every thread started from here inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  install_crash_handler();
  // Nothing of a daemon's is open to other processes of its user (jobs' processes, when
  // they run as it): no ptrace, and /proc/PID/environ, fd/ and mem become root's.
  ::prctl(PR_SET_DUMPABLE, 0);
  const auto box = make_sandbox(k);

  std::string head_host;
  std::string cluster_address;
  if (o.head) {
    head_host = o.node_ip.empty() ? local_ip_towards("127.0.0.1") : o.node_ip;
    cluster_address = head_host + ":" + std::to_string(o.port);
  } else {
    auto parts = parse_address(o.head_address);
    if (!parts) {
      ready(parts.error());
      return 2;
    }
    cluster_address = parts->host + ":" + std::to_string(parts->port);
  }
  std::string token;
  std::filesystem::path session_dir;
  std::string ip;
  try {
    if (o.head && o.resume) {
      // The old head's session: its token (so every process keeps the keys it holds), its
      // logs and its tables.
      if (o.port <= 0) {
        ready(error(error_code::invalid_argument, "--resume needs the old head's --port"));
        return 2;
      }
      auto s = resume_session(cluster_address);
      if (!k.token.empty() && k.token != s.token) {
        ready(error(error_code::invalid_argument,
                    "the token given differs from the one of the session resumed (" +
                      s.dir.string() + "); leave it out to resume"));
        return 2;
      }
      token = s.token;
      session_dir = s.dir;
      ip = head_host;
    } else if (o.head) {
      // The session directory is made once the port is bound: a head that cannot start
      // leaves the running cluster's session_latest alone.
      token = k.token.empty() ? make_token() : k.token;  // celer start's --token-file etc.
      ip = head_host;
    } else {
      auto t = find_token(o.head_address);
      if (!t) {
        // Without a token there is no hello to say; but when nothing listens at the address
        // that matters first (a head not started yet, or a wrong port), and a plain
        // connection tells.
        if (t.error().code() == error_code::unauthenticated) {
          if (auto up = accepts_connections(*parse_address(o.head_address), std::chrono::milliseconds(2000));
              !up && up.error().code() == error_code::unavailable) {
            ready(error(error_code::unavailable,
                        up.error().message() + ", so there is no head to join there (and this machine " +
                          "has no token for it either). Start the head first (celer start --head " +
                          "--port " + cluster_address.substr(cluster_address.rfind(':') + 1) +
                          " on its machine), or check the address"));
            return 1;
          }
        }
        ready(t.error());
        return 2;
      }
      token = *t;
      session_dir = session_for_joining(o.head_address);
      auto parts = parse_address(o.head_address);
      ip = o.node_ip.empty() ? local_ip_towards(parts->host) : o.node_ip;
    }
  } catch (const exception& e) {
    ready(error(e.code(), e.what()));
    return 1;
  }

  component_host host(k.scheduler_threads > 0 ? k.scheduler_threads : 2);
  auto creds = credentials::for_cluster(token);
  if (!creds) {
    ready(creds.error());
    return 2;
  }
  auto zo = transport_options(
    k, o.head && o.port > 0 ? "tcp://" + ip + ":" + std::to_string(o.port) : bind_for(ip), *creds);
  // A node asks the head whose a job's key is; the head knows (drivers register with it).
  if (!o.head) zo.key_authority = "tcp://" + cluster_address;
  // The head answers every node (each one's probes, at least once a second): it keeps a
  // connection to each rather than closing and opening them again past max_connections.
  if (o.head) {
    zo.max_peers = std::max(zo.max_peers, static_cast<std::size_t>(std::max(1, k.head_max_connections)));
    raise_open_files(zo.max_peers);
  }
  std::unique_ptr<zmq_transport> net;
  try {
    net = std::make_unique<zmq_transport>(host.local(), zo);
  } catch (const exception& e) {
    ready(error(e.code(), e.what()));
    return 1;
  }
  if (o.head && !o.resume) {
    cluster_address = net->endpoint().substr(6);  // the real port when --port 0
    try {
      session_dir = create_session(cluster_address, token).dir;
    } catch (const exception& e) {
      ready(error(e.code(), e.what()));
      return 1;
    }
  }
  const address head_addr{head_component, o.head ? net->endpoint() : "tcp://" + cluster_address};
  if (!o.head) {
    // A head busy with many nodes joining at once may not answer one hello in time: the node
    // tries again, with backoff and jitter, for up to node_head_timeout_ms (head_join.hpp).
    head_join join({.head = head_addr.endpoint,
                    .attempt_timeout = std::chrono::milliseconds(std::max(1, k.connect_timeout_ms)),
                    .give_up_after = std::chrono::milliseconds(std::max(0, k.node_head_timeout_ms)),
                    .give_up_knob = "node_head_timeout_ms"},
                   std::chrono::steady_clock::now(), std::random_device{}() ^ static_cast<std::uint64_t>(::getpid()));
    auto ok = join_head(
      join, [&](std::chrono::milliseconds within) { return net->probe(head_addr.endpoint, within); },
      [&](std::chrono::milliseconds pause) {
        // SIGTERM or SIGINT (blocked here, taken by sigwait below) stops the wait.
        const timespec ts{static_cast<time_t>(pause.count() / 1000), static_cast<long>(pause.count() % 1000) * 1000000L};
        return pause.count() == 0 || sigtimedwait(&stop_signals, nullptr, &ts) < 0;
      },
      [] { return std::chrono::steady_clock::now(); },
      [](const std::string& line) { CELER_LOG(warn, "node", line); });
    if (!ok) {
      const bool silent = ok.error().code() == error_code::unavailable;
      ready(error(ok.error().code(), "cannot join the cluster at " + cluster_address + ": " +
                                       ok.error().message() +
                                       (silent ? ". Is its head running? Start it first (celer start --head --port " +
                                                   cluster_address.substr(cluster_address.rfind(':') + 1) +
                                                   " on its machine), or check the address"
                                               : std::string())));
      return 1;
    }
  }
  std::vector<address> tick_targets;
  // The head's tables: its own and the submitted jobs' records.
  std::shared_ptr<store::table_db> tables;
  auto board = std::make_shared<head_snapshot_board>();
  // The job manager, once the HTTP server's part starts it: the head reads submitted jobs'
  // working directories from it for nodes that start their workers (package_fetch).
  auto job_packages = std::make_shared<std::atomic<const jobs::job_manager*>>(nullptr);
  if (o.head) {
    // The head's tables, in the session: a head started again with --resume loads them.
    const auto tables_dir = session_dir / "head";
    std::error_code ec;
    std::filesystem::create_directories(tables_dir, ec);
    auto db = store::open_table_db(tables_dir.string());
    if (!db) {
      ready(db.error());
      return 1;
    }
    tables = std::move(*db);
    auto h = std::make_shared<head>(*net, std::chrono::milliseconds(k.node_timeout_ms),
                                    k.spread_threshold, head::clock{}, std::make_unique<head_tables>(tables));
    // Drivers and workers of the jobs it knows reconnect with their job's keys. Submitted
    // drivers stopped with the old head; the others hold the token, and are let into every
    // shared namespace again.
    const auto submitted = jobs::job_manager::submitted(*tables);
    for (const auto& job : h->jobs()) {
      net->register_job(job, submitted.contains(job) ? std::vector<std::string>{}
                                                     : std::vector<std::string>{std::string(namespace_grants::every)});
    }
    h->publish_to(board);  // what the HTTP server lists
    h->expect_ticks_every(std::chrono::milliseconds(std::max(10, k.heartbeat_ms)));  // ticked below
    h->serve_packages([job_packages](const job_id& job, const std::string& digest) -> expected<std::string> {
      const auto* manager = job_packages->load();
      if (manager == nullptr) return error(error_code::unavailable, "the head runs no jobs (it was started with --dashboard-port -1)");
      return manager->read_package(job, digest);
    });
    host.spawn(head_addr.id, as_component(std::move(h)), "head");
    tick_targets.push_back(head_addr);
  }
  std::unique_ptr<process_launcher> launcher;
  std::unique_ptr<bulk_lane> lane;  // outlives the agent, which sends on it
  std::shared_ptr<node_agent> agent;
  struct lost_head {
    std::mutex mutex;
    std::string why;
  };
  auto head_lost = std::make_shared<lost_head>();
  node_id nid;
  if (!o.head || o.with_node) {
    nid = node_id::random();
    const address node_addr{nid, net->endpoint()};
    node_agent::config nc;
    try {
      nc = node_config(k, nid, node_addr, head_addr,
                       node_offer{.num_cpus = o.num_cpus,
                                  .num_gpus = o.num_gpus,
                                  .gpus = o.gpus,
                                  .memory = o.memory,
                                  .resources = o.resources});
    } catch (const exception& e) {
      ready(error(e.code(), e.what()));
      return 2;
    }
    nc.labels = o.labels;
    nc.isolation = box->describe();
    nc.spill_to_head = true;
    nc.worker_start_timeout = std::chrono::milliseconds(k.worker_start_timeout_ms);
    // Submitted jobs' working directories, unpacked once per machine (the head keeps the
    // archives in <session>/packages).
    nc.packages_dir = session_dir / "workdirs";
    if (!o.head) {
      // A node whose head is gone says so, and stops after node_head_timeout_ms: the
      // signal below wakes this thread, which stops the workers and exits.
      nc.head_missing_after = std::chrono::milliseconds(std::max(1, k.node_timeout_ms));
      nc.head_timeout = std::chrono::milliseconds(std::max(0, k.node_head_timeout_ms));
      nc.head_lost = [lost = head_lost](const std::string& why) {
        {
          std::lock_guard lock(lost->mutex);
          lost->why = why;
        }
        ::kill(::getpid(), SIGTERM);
      };
    }
    // With encryption, pulled chunks travel sealed on a lane of their own, outside CURVE
    // (transport/bulk_lane.hpp): the chunks it receives go to the agent like any message.
    if (k.encryption != 0 && k.object_transfer_lane != 0) {
      auto opened = bulk_lane::open("tcp://" + ip, node_store::max_chunk_bytes + 64,
                                    [&local = host.local(), nid](protocol::store_chunk&& c) {
                                      (void)local.send(address{nid, {}}, protocol::message{std::move(c)});
                                    });
      if (opened) {
        lane = std::move(*opened);
        nc.lane = lane.get();
      } else {
        CELER_LOG(warn, "node", opened.error().message() + "; pulled chunks go on the CURVE connection");
      }
    }
    launcher = std::make_unique<process_launcher>(
      *net, process_launcher::config{nid, node_addr, head_addr, *creds, k.encryption != 0, ip,
                                     session_dir / "logs", !nc.gpus.empty(), nc.packages_dir, box.get()});
    // The disk tier: object_store_dir, else the first of <session>/objects/0, 1, ... that no
    // other node on this machine holds (a node restarted here takes its old one back, and
    // finds its durable objects again).
    for (int slot = 0;; ++slot) {
      nc.store_dir = k.object_store_dir.empty()
                       ? (session_dir / "objects" / std::to_string(slot)).string()
                       : k.object_store_dir;
      std::error_code ec;
      std::filesystem::create_directories(nc.store_dir, ec);
      try {
        agent = std::make_shared<node_agent>(*net, *launcher, nc);
        break;
      } catch (const exception& e) {
        const bool held = std::string_view(e.what()).find("lock") != std::string_view::npos;
        if (!k.object_store_dir.empty() || !held || slot >= 63) {
          ready(error(e.code(), e.what()));
          return 1;
        }
      }
    }
    agent->start();
    host.spawn(nid, as_component(agent), "node");
    tick_targets.push_back(node_addr);
  }
  host.start_ticks(tick_targets, std::chrono::milliseconds(std::max(10, k.heartbeat_ms)));
  net->start();
  // The head's HTTP server: its routes ask the head through a gateway component, as `celer
  // status` asks over the network; credentials are the token and the running jobs'.
  std::unique_ptr<http::server> web;
  std::optional<address> gateway_at;
  std::unique_ptr<head_jobs> jobs;
  if (o.head && o.http_port >= 0) {
    const address gateway_addr{unique_id::random(), net->endpoint()};
    gateway_at = gateway_addr;
    auto gateway = std::make_shared<http::head_gateway>(*net, gateway_addr, head_addr);
    host.spawn(gateway_addr.id, as_component(gateway), "http-gateway");
    constexpr auto ask_within = std::chrono::seconds(3);
    // A job's credential counts while the transport accepts the job's key: its driver
    // registered it and it has not ended.
    auto* transport = net.get();
    // Dashboard sessions are kept in the head's tables: a head started again keeps its
    // browsers logged in.
    http::authenticator auth(*creds, [transport] { return transport->accepted_jobs(); },
                             std::make_shared<http::session_store>(std::chrono::hours(12), tables));
    auto server_slot = std::make_shared<http::server*>(nullptr);
    jobs = start_jobs(k, *creds, *net, host.local(), head_addr, session_dir, cluster_address, ip, tables, gateway, board,
                      *box);
    auto* jm = &jobs->manager;
    job_packages->store(jm);
    auto routes = http::state_routes({.status = [gateway, ask_within] { return gateway->status(ask_within); },
                                      .responses = [server_slot] {
                                        return *server_slot ? (*server_slot)->responses_by_code() : std::map<int, std::uint64_t>{};
                                      },
                                      .jobs = [transport] { return transport->accepted_jobs(); },
                                      .snapshot = [board] { return board->latest(); },
                                      .job_states = [jm] {
                                        std::map<std::string, std::size_t> out;
                                        for (const auto& [state, n] : jm->counts()) out[jobs::job_state_name(state)] = n;
                                        return out;
                                      },
                                      .kill_actor = [gateway](const actor_id& a, bool no_restart, const std::string& why) {
                                        return gateway->kill_actor(a, no_restart, why);
                                      }});
    auto more = http::job_routes(*jm, [board](const job_id& job) -> std::optional<protocol::task_counts> {
      auto s = board->latest();
      return s ? s->tasks_of(job) : std::nullopt;
    });
    routes.insert(routes.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
    const http::server_options ho{.host = o.http_host, .port = o.http_port, .tls_cert = o.tls_cert, .tls_key = o.tls_key};
    auto started = http::server::start(ho, auth, routes);
    if (!started && o.http_port_fallback && started.error().code() == error_code::unavailable) {
      CELER_LOG(warn, "head", "HTTP port " + std::to_string(o.http_port) + " is taken: serving on a free port (the URL is in " +
                                (session_dir / "http_url").string() + ")");
      auto any = ho;
      any.port = 0;
      started = http::server::start(any, std::move(auth), std::move(routes));
    }
    if (!started) {
      ready(error(started.error().code(), "the HTTP server: " + started.error().message() +
                                            " (--dashboard-port -1 starts the head without it)"));
      const protocol::shutdown_component bye{"the HTTP server did not start"};
      (void)host.local().send(gateway_addr, bye);
      (void)host.local().send(head_addr, bye);
      if (agent) (void)host.local().send(address{nid, {}}, bye);
      if (launcher) launcher->stop(std::chrono::seconds(5));
      jobs->stop();
      if (lane) lane->stop();
      host.stop();
      net->stop();
      return 1;
    }
    web = std::move(*started);
    *server_slot = web.get();
    if (http::exposed(o.http_host))
      CELER_LOG(warn, "head", "the HTTP server listens on " + o.http_host + ", beyond this machine: every request still needs "
                              "the token or a job's credential" + std::string(web->tls() ? "" : ", but it crosses the network unencrypted (--tls-cert, --tls-key)"));
    std::ofstream(session_dir / "http_url") << web->url() << "\n";
    jm->serve_http(web->url(), web->tls() ? std::filesystem::path(o.tls_cert) : std::filesystem::path());
    // The certificate (public), for clients on this machine to trust a self-signed one.
    if (web->tls()) {
      std::error_code ec;
      std::filesystem::copy_file(o.tls_cert, session_dir / "http_cert.pem", std::filesystem::copy_options::overwrite_existing, ec);
      if (ec) CELER_LOG(warn, "head", "cannot copy the TLS certificate into the session (" + ec.message() + "): celer commands here need CELER_TLS_CA");
    }
  }
  const auto pid_file =
    write_pid_file(session_dir, o.head ? "head" : "node-" + nid.short_hex());
  const auto log_file =
    session_dir / "logs" / (o.head ? std::string("head.log") : "node-" + nid.short_hex() + ".log");
  ready(cluster_address + " " + session_dir.string() + " " + log_file.string() + " " + (web ? web->url() : std::string("-")));
  CELER_LOG(warn, o.head ? "head" : "node",
            std::string(o.head ? "head" : "node") + " serving at " + net->endpoint() +
              (nid.nil() ? "" : ", node " + nid.hex()) +
              (lane ? ", bulk lane at " + lane->endpoint() : std::string()) + ", session " +
              session_dir.string());

  int sig = 0;
  while (sigwait(&stop_signals, &sig) != 0) {
  }
  std::string lost;
  {
    std::lock_guard lock(head_lost->mutex);
    lost = head_lost->why;
  }
  CELER_LOG(warn, o.head ? "head" : "node",
            lost.empty() ? std::string("stopping (signal ") + std::to_string(sig) + ")"
                         : "stopping: " + lost);
  const protocol::shutdown_component bye{"the daemon is stopping"};
  if (agent) (void)host.local().send(address{nid, {}}, bye);  // tells its workers to stop
  if (o.head) (void)host.local().send(head_addr, bye);
  // Jobs first: their drivers stop (SIGTERM, SIGKILL after 5 s) and end STOPPED while the
  // head can still hear job_finished.
  if (jobs) jobs->stop();
  if (web) web->stop();
  if (gateway_at) (void)host.local().send(*gateway_at, bye);
  if (launcher) launcher->stop(std::chrono::seconds(5));
  if (lane) lane->stop();
  host.stop();
  net->stop();
  std::error_code ec;
  std::filesystem::remove(pid_file, ec);
  return lost.empty() ? 0 : 3;
}

} // namespace celer::cluster
