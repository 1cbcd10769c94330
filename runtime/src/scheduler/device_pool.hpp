#pragma once
// A node's GPUs and how much of each is free. A request of up to one GPU takes a share of
// one device; a request above one takes that many whole devices. Shares are fixed-point
// (protocol::resource_unit is a whole device), so fractions never add up past a device.
// Both the node agent (which hands devices out) and the head's cluster view (which places
// work on nodes) keep one per node.

#include "protocol/placement.hpp"

#include <celer/gpu.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace celer::scheduling {

class device_pool {
public:
  device_pool() = default;
  explicit device_pool(std::vector<gpu::device> devices);
  /// Devices of which only `free` (units, in the same order) are to be had: the shares a
  /// placement group's bundle reserved.
  device_pool(std::vector<gpu::device> devices, std::vector<std::int64_t> free);

  /// Why `amount` (resource units) of devices that `p` accepts can never be had here, ""
  /// when they can. An amount of zero with a GPU constraint needs one matching device.
  [[nodiscard]] std::string never(std::int64_t amount, const protocol::placement& p) const;
  /// Whether never() is "" (without building its text).
  [[nodiscard]] bool could(std::int64_t amount, const protocol::placement& p) const;
  /// Whether `amount` of accepted devices is free now.
  [[nodiscard]] bool fits(std::int64_t amount, const protocol::placement& p) const;
  /// Whether it would be once the `returned` shares were given back (without copying).
  [[nodiscard]] bool fits_after(std::int64_t amount, const protocol::placement& p,
                                std::span<const protocol::gpu_share> returned) const;
  /// Takes `amount` of accepted devices, or nothing when they are not free now. A share
  /// goes to the fullest device it fits on (keeping whole devices whole) or, by speed, to
  /// the device where it would finish first; whole devices go lowest index first or, by
  /// speed, fastest first.
  [[nodiscard]] std::optional<std::vector<protocol::gpu_share>> take(std::int64_t amount,
                                                                     const protocol::placement& p);
  void give_back(const std::vector<protocol::gpu_share>& shares);
  /// Replaces the free amounts (a node's report); ignored when the count differs.
  void set_free(const std::vector<std::int64_t>& free);

  [[nodiscard]] const std::vector<gpu::device>& devices() const noexcept { return devices_; }
  [[nodiscard]] const std::vector<std::int64_t>& free() const noexcept { return free_; }
  [[nodiscard]] bool empty() const noexcept { return devices_.empty(); }
  /// Sum of the speed scores of the devices `p` accepts.
  [[nodiscard]] double speed_of(const protocol::placement& p) const;
  /// How many devices `p` accepts.
  [[nodiscard]] std::size_t count_of(const protocol::placement& p) const;
  /// Units in use on the devices `p` accepts.
  [[nodiscard]] std::int64_t busy_of(const protocol::placement& p) const;
  /// Which devices `p` accepts: bit i for the i-th device (of the first 64), for callers
  /// that ask the same of many decisions (the cluster view caches it per request shape).
  [[nodiscard]] std::uint64_t accepted_mask(const protocol::placement& p) const;

private:
  [[nodiscard]] bool accepts(const gpu::device& d, const protocol::placement& p) const;
  std::vector<gpu::device> devices_;
  std::vector<std::int64_t> free_;
  /// Which devices each accelerator type asked for so far matches (matching parses names;
  /// a cluster sees few types, and the scheduler asks for every node on every decision).
  mutable std::vector<std::pair<std::string, std::vector<bool>>> matches_;
};

/// `devices` made `count` long: the first `count`, then plain devices (model "GPU", no
/// memory known, speed 1) for GPUs a node offers without knowing them.
[[nodiscard]] std::vector<gpu::device> with_count(std::vector<gpu::device> devices,
                                                  std::size_t count);

/// "A100 with at least 40 GB": what `p` asks of each device, for messages; "" when nothing.
[[nodiscard]] std::string describe_gpu_constraint(const protocol::placement& p);

} // namespace celer::scheduling
