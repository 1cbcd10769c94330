#pragma once
// The cluster driver: this process's core, connected to a cluster's head over a
// zmq_transport. A program that called celer::init with an address runs one (role driver,
// for a job of its own); `celer status` and the other questions of the CLI run one as an
// observer. The worker process (cluster/worker_process.hpp) and the daemon
// (cluster/daemon.hpp) are the other processes of cluster mode.
//
//   cluster::cluster_driver d(knobs(), "10.0.0.1:6380");
//   d.core().submit_task(...);
//   d.stop();

#include "protocol/messages.hpp"
#include "runtime.hpp"

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
  /// `env_vars`: the job's for its workers (init_options::env_vars), over those its
  /// submission gave it (CELER_ENV_VARS names them).
  cluster_driver(const knob_values& k, const std::string& address, role r = role::driver,
                 const std::map<std::string, std::string>& env_vars = {});
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

} // namespace celer::cluster
