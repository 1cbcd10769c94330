#pragma once
// The embedded runtime: one process holding a head, a node agent, the process's core and
// worker threads, each component a CAF actor wired through local_transport.

#include "config/knobs.hpp"
#include "core/core_worker.hpp"
#include "transport/local_transport.hpp"

#include <celer/options.hpp>

#include <memory>

namespace celer {

class embedded_runtime {
public:
  /// Starts every component; throws celer::exception on bad options.
  embedded_runtime(const knob_values& knobs, const init_options& options);
  ~embedded_runtime();
  embedded_runtime(const embedded_runtime&) = delete;
  embedded_runtime& operator=(const embedded_runtime&) = delete;

  core_worker& core() noexcept { return *core_; }
  [[nodiscard]] const node_id& node() const noexcept { return node_; }
  /// Stops every component and joins every thread the runtime started.
  void stop();

private:
  struct impl;
  std::unique_ptr<impl> impl_;
  std::unique_ptr<core_worker> core_;
  node_id node_;
};

} // namespace celer
