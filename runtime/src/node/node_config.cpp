#include "node/node_config.hpp"

#include "scheduler/device_pool.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include <unistd.h>

namespace celer {

double physical_memory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0.0;
}

std::size_t object_store_capacity(const knob_values& k) {
  if (k.object_store_memory > 0) return static_cast<std::size_t>(k.object_store_memory);
  return static_cast<std::size_t>(0.3 * physical_memory());
}

protocol::resource_set node_resources(const knob_values& k, double cpus, double gpus,
                                      double memory, const std::map<std::string, double>& custom) {
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  cpus = cpus >= 0 ? cpus : k.num_cpus > 0 ? k.num_cpus : static_cast<double>(hw);
  gpus = std::max(0.0, gpus);
  memory = memory > 0 ? memory : k.memory > 0 ? k.memory : physical_memory();
  auto total = protocol::make_request(cpus, gpus, memory, custom);
  if (!total) throw exception(total.error().code(), "celer: " + total.error().message());
  return std::move(*total);
}

std::vector<gpu::device> node_gpus(double num_gpus, const std::string& declared) {
  std::vector<gpu::device> devices;
  if (!declared.empty()) {
    auto parsed = gpu::parse_declared(declared);
    if (!parsed) throw exception(parsed.error().code(), "celer: " + parsed.error().message());
    devices = std::move(*parsed);
  } else {
    devices = gpu::discover();
    // Found devices are measured (declared ones carry their declared or nominal score).
    if (knobs().gpu_probe != 0) {
      for (auto& d : devices) {
        if (auto tflops = gpu::probe_speed(d.index)) d.speed = *tflops;
      }
    }
  }
  if (num_gpus < 0) return devices;
  if (num_gpus != std::floor(num_gpus)) {
    throw exception(error_code::invalid_argument,
                    "celer: a node offers whole GPUs, not " + protocol::format_amount(num_gpus));
  }
  return scheduling::with_count(std::move(devices), static_cast<std::size_t>(num_gpus));
}

node_agent::config node_config(const knob_values& k, const node_id& id, const address& self,
                               const address& head, const node_offer& offer) {
  node_agent::config nc;
  nc.id = id;
  nc.self = self;
  nc.head = head;
  nc.gpus = node_gpus(offer.num_gpus, offer.gpus.empty() ? k.gpus : offer.gpus);
  nc.total = node_resources(k, offer.num_cpus, static_cast<double>(nc.gpus.size()),
                            offer.memory, offer.resources);
  nc.total.set(node_resource_name(id), 1);
  const double cpus = nc.total.get(protocol::cpu);
  nc.max_idle_workers =
    k.max_idle_workers > 0 ? k.max_idle_workers : static_cast<int>(2 * std::max(1.0, cpus));
  nc.store_capacity = object_store_capacity(k);
  nc.store_spill = k.object_spilling != 0;
  nc.preemption_grace = std::chrono::milliseconds(std::max(0, k.preemption_grace_ms));
  nc.memory_threshold = k.memory_usage_threshold > 0 ? k.memory_usage_threshold : 1.0;
  nc.memory_limit_bytes = k.memory_limit_mb > 0 ? static_cast<std::uint64_t>(k.memory_limit_mb * 1024.0 * 1024.0) : 0;
  return nc;
}

} // namespace celer
