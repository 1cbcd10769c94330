#pragma once
// What celer::init starts in this process. Three kinds:
// - embedded_runtime: head, node agent, this process's core and worker threads, all here;
// - cluster_driver (cluster/driver.hpp): this process's core, connected to a cluster;
// - a worker process's runtime (cluster/worker_process.hpp).

#include "config/knobs.hpp"
#include "core/core_worker.hpp"

#include <celer/options.hpp>

#include <memory>

namespace celer {

class runtime_base {
public:
  virtual ~runtime_base() = default;
  virtual core_worker& core() noexcept = 0;
  /// The node this process runs on.
  [[nodiscard]] virtual const node_id& node() const noexcept = 0;
  /// Stops every component and joins every thread the runtime started.
  virtual void stop() = 0;
};

class embedded_runtime final : public runtime_base {
public:
  /// Starts every component; throws celer::exception on bad options.
  embedded_runtime(const knob_values& knobs, const init_options& options);
  ~embedded_runtime() override;
  embedded_runtime(const embedded_runtime&) = delete;
  embedded_runtime& operator=(const embedded_runtime&) = delete;

  core_worker& core() noexcept override { return *core_; }
  [[nodiscard]] const node_id& node() const noexcept override { return node_; }
  void stop() override;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
  std::unique_ptr<core_worker> core_;
  node_id node_;
};

} // namespace celer
