#pragma once
// The daemon that `celer start` leaves running: a head, a node agent, or (the head's
// machine, unless --num-cpus 0) both, hosted on one component_host and joined by one
// zmq_transport. The cluster driver (cluster/driver.hpp) and the worker process
// (cluster/worker_process.hpp) are the other processes of cluster mode.
//
//   cluster::daemon_options o;
//   o.head = true;
//   return cluster::run_daemon(k, o, [](const expected<std::string>& r) { ... });

#include "config/knobs.hpp"

#include <celer/error.hpp>

#include <functional>
#include <map>
#include <string>

namespace celer::cluster {

struct daemon_options {
  bool head = false;
  /// Head: the port to listen on. Node: the head's HOST:PORT.
  int port = 6380;
  std::string head_address;
  /// Negative: the machine's (CPUs) or none (GPUs).
  double num_cpus = -1;
  double num_gpus = -1;
  /// GPUs declared instead of discovered ("A100-80GB:2"); empty: the gpus knob, else NVML.
  std::string gpus;
  double memory = 0;
  std::map<std::string, double> resources;
  std::map<std::string, std::string> labels;
  std::string node_ip;
  /// Head: whether it runs a node agent of its own (false with --num-cpus 0).
  bool with_node = true;
  /// Head: take back the session of the head that last served at this port on this
  /// machine (its token, logs and tables) and recover the cluster from its tables, instead
  /// of starting a new session. For a head restarted after a crash.
  bool resume = false;
  /// Head: the HTTP server (REST API, /metrics; docs/dashboard.md). Port 0: any free port;
  /// negative: no HTTP server. It binds to loopback unless `http_host` says otherwise.
  int http_port = 8266;
  /// When http_port is taken: serve on a free port instead (the default port) rather than
  /// fail (a port the operator chose).
  bool http_port_fallback = false;
  std::string http_host = "127.0.0.1";
  /// Both or neither: PEM certificate and key for HTTPS.
  std::string tls_cert;
  std::string tls_key;
};

/// Runs a head and/or node agent until SIGTERM or SIGINT. `ready` is called once it serves
/// (with "ADDRESS SESSION_DIR LOG_FILE HTTP_URL", HTTP_URL "-" without an HTTP server), or
/// with an error; returns the process exit code.
int run_daemon(const knob_values& k, const daemon_options& o,
               const std::function<void(const expected<std::string>&)>& ready);

} // namespace celer::cluster
