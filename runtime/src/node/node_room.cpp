// A node's room (node_room.hpp).
#include "node/node_room.hpp"

#include <algorithm>

namespace celer {

node_room::node_room(protocol::resource_set total, std::vector<gpu::device> devices)
  : devices_(std::move(devices)), available_(std::move(total)), gpus_(devices_) {}

bool node_room::fits(const protocol::resource_set& need, const protocol::placement& where) const {
  return available_.covers(need) && gpus_.fits(need.units(protocol::gpu), where);
}

node_room::bundle* node_room::bundle_of(const protocol::placement& where) {
  auto it = bundles_.find({where.group, where.bundle});
  return it == bundles_.end() ? nullptr : &it->second;
}

protocol::resource_set& node_room::account_of(const protocol::placement& in_bundle) {
  if (!in_bundle.group.nil()) {
    if (auto* b = bundle_of(in_bundle)) return b->available;
  }
  return available_;
}

std::string node_room::reserve(const protocol::reserve_bundle& m) {
  const auto& need = m.bundle.need;
  const std::int64_t gpu_units = need.units(protocol::gpu);
  if (bundles_.contains({m.group, m.index})) return {};  // a repeated request
  if (auto valid = protocol::validate_amounts(need, "bundle " + std::to_string(m.index)); !valid) {
    return "invalid_argument: " + valid.error().message();
  }
  if (!available_.covers(need) || !gpus_.fits(gpu_units, m.bundle.where)) {
    return "it needs " + need.to_string() + ", and " + available_.to_string() + " is free";
  }
  bundle b;
  b.job = m.job;
  b.reserved = need;
  b.available = need;
  b.shares = *gpus_.take(gpu_units, m.bundle.where);
  std::vector<gpu::device> devices;
  std::vector<std::int64_t> free;
  for (const auto& s : b.shares) {
    for (const auto& d : devices_) {
      if (d.index == s.index) devices.push_back(d);
    }
    free.push_back(s.amount);
  }
  b.gpus = scheduling::device_pool(std::move(devices), std::move(free));
  available_.subtract(need);
  bundles_.emplace(bundle_key{m.group, m.index}, std::move(b));
  return {};
}

std::vector<node_room::bundle_key> node_room::bundles_named(const placement_group_id& group,
                                                            const std::vector<std::int32_t>& indices) const {
  std::vector<bundle_key> out;
  for (const auto& [key, b] : bundles_) {
    if (key.first != group) continue;
    if (indices.empty() || std::find(indices.begin(), indices.end(), key.second) != indices.end()) {
      out.push_back(key);
    }
  }
  return out;
}

void node_room::give_back(const bundle_key& key) {
  auto it = bundles_.find(key);
  if (it == bundles_.end()) return;
  available_.add(it->second.reserved);
  gpus_.give_back(it->second.shares);
  bundles_.erase(it);
}

} // namespace celer
