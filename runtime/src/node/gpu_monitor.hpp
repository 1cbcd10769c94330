#pragma once
// A node's GPUs as its heartbeat reports them: devices NVML knows are sampled at each
// heartbeat; declared ones (no NVML, or a test's) carry what their workers last reported
// (gpu_usage: utilisation and memory). Which job may report which device is the node
// agent's check (a job reports only devices one of its workers sees).
//
//   gpu_monitor gpus(devices);
//   gpus.reported(m)                  // a gpu_usage the agent let through
//   h.gpu_samples = gpus.samples()    // each heartbeat
//
// One of the node agent's pieces. Threads: the agent's (one message at a time).

#include "protocol/messages.hpp"

#include <algorithm>
#include <map>
#include <vector>

namespace celer {

class gpu_monitor {
public:
  explicit gpu_monitor(std::vector<gpu::device> devices) : devices_(std::move(devices)) {}

  /// What a worker reported of the devices it sees.
  void reported(const protocol::gpu_usage& m) {
    for (auto index : m.devices) {
      auto& s = reported_[index];
      s.index = index;
      s.utilisation = std::clamp(m.utilisation, 0.0, 1.0);
      s.memory_used_bytes = m.memory_used_bytes;
    }
  }
  /// A sample of each device, in the node's order: NVML's for real devices, the last
  /// report for declared ones, an empty sample for a device nobody reported.
  [[nodiscard]] std::vector<gpu::sample> samples() const {
    const bool any_real = std::any_of(devices_.begin(), devices_.end(), [](const gpu::device& d) { return !d.declared; });
    const auto sampled = any_real ? gpu::sample_devices() : std::vector<gpu::sample>{};
    std::vector<gpu::sample> out;
    out.reserve(devices_.size());
    for (const auto& d : devices_) {
      auto real = std::find_if(sampled.begin(), sampled.end(), [&](const gpu::sample& s) { return s.index == d.index; });
      if (!d.declared && real != sampled.end()) {
        out.push_back(*real);
      } else if (auto r = reported_.find(d.index); r != reported_.end()) {
        out.push_back(r->second);
      } else {
        gpu::sample none;
        none.index = d.index;
        out.push_back(none);
      }
    }
    return out;
  }

private:
  std::vector<gpu::device> devices_;
  /// Declared devices' monitoring, as their workers last reported it (by device index).
  std::map<int, gpu::sample> reported_;
};

} // namespace celer
