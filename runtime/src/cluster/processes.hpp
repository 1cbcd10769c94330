#pragma once
// The processes of cluster mode, each built from the same components as the embedded
// runtime, hosted on a component_host and joined by a zmq_transport:
// - cluster_driver: a program that called celer::init with an address (also `celer status`);
// - worker_process: a job's binary started by a node agent in worker mode;
// - run_daemon: the head and/or node agent that `celer start` leaves running.

#include "protocol/messages.hpp"
#include "runtime.hpp"

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

namespace celer::cluster {

class cluster_driver final : public runtime_base {
public:
  enum class role { driver, observer };
  /// Connects to the head at `address` (HOST:PORT). A driver also picks its local node and
  /// starts a job; an observer (celer status) only asks questions. Throws celer::exception:
  /// invalid_argument (bad address), unauthenticated (no or wrong token), unavailable.
  cluster_driver(const knob_values& k, const std::string& address, role r = role::driver);
  ~cluster_driver() override;

  core_worker& core() noexcept override;
  [[nodiscard]] const node_id& node() const noexcept override;
  /// Ends the job (its actors and workers stop) and closes every connection.
  void stop() override;
  protocol::status_reply status();

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// True when this process was started by a node agent as a worker.
bool worker_mode_requested();

class worker_process final : public runtime_base {
public:
  /// Reads what the node agent put in the environment and connects; receives nothing
  /// until start().
  explicit worker_process(const knob_values& k);
  ~worker_process() override;
  core_worker& core() noexcept override;
  [[nodiscard]] const node_id& node() const noexcept override;
  void stop() override;
  /// Announces the worker to its node, which may then send it a task at once: call it
  /// once the process's API calls reach this runtime (tasks call the API).
  void start();
  /// Blocks until the node tells the worker to stop, or its actor exits.
  void wait_until_finished();

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

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
};

/// Runs a head and/or node agent until SIGTERM or SIGINT. `ready` is called once it serves
/// (with the address to print), or with an error; returns the process exit code.
int run_daemon(const knob_values& k, const daemon_options& o,
               const std::function<void(const expected<std::string>&)>& ready);

} // namespace celer::cluster
