#pragma once
// What a node agent is built from, the same way in both places that start one: the
// embedded runtime (celer::init without an address) and `celer start` (run_daemon). Its
// resources come from explicit values (init_options, celer start's flags), else knobs,
// else the machine; its pool and store sizes from knobs.
//
//   auto nc = node_config(k, id, self, head, node_offer{.num_cpus = 4});
//   nc.spill_to_head = true;  // what only one of the two sets, the caller adds
//   auto agent = std::make_shared<node_agent>(net, launcher, std::move(nc));

#include "config/knobs.hpp"
#include "node/node_agent.hpp"

#include <celer/gpu.hpp>

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace celer {

/// The machine's physical memory in bytes (0 when unknown).
double physical_memory();

/// Bytes of shared memory for a node's object store: object_store_memory, else 30% of
/// physical memory (Ray's default).
std::size_t object_store_capacity(const knob_values& k);

/// The resource every node offers one of under its own name, "node:<32 hex digits>" (as
/// Ray's "node:<ip>"): asking for a little of it pins work to that node.
inline std::string node_resource_name(const node_id& id) { return "node:" + id.hex(); }

/// A node's GPUs: those `declared` ("A100-80GB:2"), else those NVML finds. `num_gpus`
/// >= 0 keeps that many (a whole number), adding plain devices (model "GPU") past those
/// found; negative keeps all. Throws celer::exception (invalid_argument) on a bad spec.
std::vector<gpu::device> node_gpus(double num_gpus, const std::string& declared);

/// Resources a node offers: explicit values, else knobs, else the machine's.
protocol::resource_set node_resources(const knob_values& k, double cpus, double gpus,
                                      double memory, const std::map<std::string, double>& custom);

/// What a node is asked to offer; what is left unset comes from knobs, else the machine.
struct node_offer {
  /// Negative: the num_cpus knob, else the machine's CPUs.
  double num_cpus = -1;
  /// Negative: every GPU declared or found; else that many (node_gpus).
  double num_gpus = -1;
  /// GPUs declared instead of discovered ("A100-80GB:2"); empty: the gpus knob, else NVML.
  std::string gpus;
  /// Bytes; zero: the memory knob, else the machine's.
  double memory = 0;
  std::map<std::string, double> resources;
};

/// A node agent's configuration as both the embedded runtime and a daemon's node start
/// with: id and addresses, GPUs, total resources (with the node's own, node_resource_name),
/// idle workers kept (max_idle_workers, else twice the CPUs), the object store's capacity
/// (object_store_capacity) and spilling, and the preemption grace. The rest (labels, store
/// directory, head timeouts, spilling work to the head) is the caller's. Throws
/// celer::exception (invalid_argument) when the offer cannot be met (node_gpus,
/// node_resources).
node_agent::config node_config(const knob_values& k, const node_id& id, const address& self,
                               const address& head, const node_offer& offer);

} // namespace celer
