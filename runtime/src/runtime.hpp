#pragma once
// What celer::init starts in this process. Three kinds:
// - embedded_runtime: head, node agent, this process's core and worker threads, all here;
// - cluster_driver (cluster/driver.hpp): this process's core, connected to a cluster;
// - a worker process's runtime (cluster/worker_process.hpp).

#include "config/knobs.hpp"
#include "core/core_worker.hpp"

#include <celer/gpu.hpp>
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

/// The machine's physical memory in bytes (0 when unknown).
double physical_memory();

/// Bytes of shared memory for a node's object store: object_store_memory, else 30% of
/// physical memory (Ray's default).
std::size_t object_store_capacity(const knob_values& k);

/// The resource every node offers one of under its own name, "node:<32 hex digits>" (as
/// Ray's "node:<ip>"): asking for a little of it pins work to that node.
inline std::string node_resource_name(const node_id& id) { return "node:" + id.hex(); }

/// Resources a node offers: explicit values, else knobs, else the machine's.
/// A node's GPUs: those `declared` ("A100-80GB:2"), else those NVML finds. `num_gpus`
/// >= 0 keeps that many (a whole number), adding plain devices (model "GPU") past those
/// found; negative keeps all. Throws celer::exception (invalid_argument) on a bad spec.
std::vector<gpu::device> node_gpus(double num_gpus, const std::string& declared);

protocol::resource_set node_resources(const knob_values& k, double cpus, double gpus,
                                      double memory, const std::map<std::string, double>& custom);

} // namespace celer
