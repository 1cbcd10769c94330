#pragma once
// The worker process: a job's own binary, started by a node agent in worker mode (the
// environment says so), serving as one worker until its node stops it. Its core, connected
// over a zmq_transport, is what the API calls of the tasks it runs reach. The cluster
// driver (cluster/driver.hpp) and the daemon (cluster/daemon.hpp) are the other processes
// of cluster mode.
//
//   if (cluster::worker_mode_requested()) {
//     cluster::worker_process w(knobs());
//     w.start();                 // once API calls reach w
//     w.wait_until_finished();
//     w.stop();
//   }

#include "runtime.hpp"

#include <memory>

namespace celer::cluster {

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

} // namespace celer::cluster
