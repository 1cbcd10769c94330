#pragma once
// What a request asks of its node beyond amounts (GPU model and memory, node labels, a
// strategy), the GPUs a node has, and the devices a grant hands out. Part of the wire:
// changing a field changes celer::protocol_version.

#include "protocol/decode_budget.hpp"
#include "protocol/resources.hpp"

#include <celer/codec.hpp>
#include <celer/gpu.hpp>
#include <celer/ids.hpp>
#include <celer/options.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace celer::protocol {

enum class label_op : std::uint8_t { equals, not_equals, in, not_in, exists, not_exists };

/// One condition on a node's labels: "zone=a", "kind!=spot", "zone=a|b", "gpu", "!spot".
struct label_selector {
  std::string key;
  label_op op = label_op::equals;
  std::vector<std::string> values;
  CELER_MSGPACK_DEFINE(key, op, values)
  bool operator==(const label_selector&) const = default;
};

/// Where a request may go and how to choose, beyond its resource amounts.
struct placement {
  scheduling_strategy::kind how = scheduling_strategy::kind::hybrid;
  node_id node;  ///< node_affinity's node
  bool soft = false;
  std::string accelerator_type;
  std::uint64_t gpu_memory_bytes = 0;  ///< the least each device given must have
  std::vector<label_selector> labels;
  /// placement_group: the group and bundle (-1: any of its bundles).
  placement_group_id group;
  std::int32_t bundle = -1;
  CELER_MSGPACK_DEFINE(how, node, soft, accelerator_type, gpu_memory_bytes, labels, group, bundle)
  bool operator==(const placement&) const = default;

  /// Whether anything beyond amounts constrains the devices.
  [[nodiscard]] bool constrains_gpus() const noexcept {
    return !accelerator_type.empty() || gpu_memory_bytes > 0;
  }
};

/// Bytes of a request's arguments that one node holds (the default policy prefers the
/// node holding most).
struct node_bytes {
  node_id node;
  std::uint64_t bytes = 0;
  CELER_MSGPACK_DEFINE(node, bytes)
};

/// One bundle of a placement group: what it reserves.
struct bundle_spec {
  resource_set need;
  placement where;  ///< what its GPUs must be (accelerator_type, gpu_memory_bytes)
  CELER_MSGPACK_DEFINE(need, where)
};

/// A share of one device: `amount` in resource units (resource_unit is a whole device).
struct gpu_share {
  std::int32_t index = 0;
  std::int64_t amount = 0;
  CELER_MSGPACK_DEFINE(index, amount)
};

} // namespace celer::protocol

MSGPACK_ADD_ENUM(celer::protocol::label_op);
MSGPACK_ADD_ENUM(celer::scheduling_strategy::kind);
MSGPACK_ADD_ENUM(celer::bundle_strategy);

// celer::gpu::device travels as an array of its fields (the gpu module knows no msgpack).
namespace msgpack {
MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) {
namespace adaptor {

template <>
struct pack<celer::gpu::device> {
  template <class Stream>
  packer<Stream>& operator()(packer<Stream>& o, const celer::gpu::device& d) const {
    o.pack_array(9);
    o.pack(d.index).pack(d.uuid).pack(d.model).pack(d.name).pack(d.memory_bytes);
    o.pack(d.compute_major).pack(d.compute_minor).pack(d.speed).pack(d.declared);
    return o;
  }
};

template <>
struct pack<celer::gpu::sample> {
  template <class Stream>
  packer<Stream>& operator()(packer<Stream>& o, const celer::gpu::sample& s) const {
    o.pack_array(6);
    o.pack(s.index).pack(s.utilisation).pack(s.memory_used_bytes).pack(s.temperature_c);
    o.pack(s.throttled).pack(s.throttle_reasons);
    return o;
  }
};

template <>
struct convert<celer::gpu::sample> {
  const msgpack::object& operator()(const msgpack::object& o, celer::gpu::sample& s) const {
    if (o.type != msgpack::type::ARRAY || o.via.array.size != 6) throw msgpack::type_error();
    const auto* f = o.via.array.ptr;
    f[0].convert(s.index);
    f[1].convert(s.utilisation);
    f[2].convert(s.memory_used_bytes);
    f[3].convert(s.temperature_c);
    f[4].convert(s.throttled);
    f[5].convert(s.throttle_reasons);
    return o;
  }
};

template <>
struct convert<celer::gpu::device> {
  const msgpack::object& operator()(const msgpack::object& o, celer::gpu::device& d) const {
    if (o.type != msgpack::type::ARRAY || o.via.array.size != 9) throw msgpack::type_error();
    const auto* f = o.via.array.ptr;
    f[0].convert(d.index);
    f[1].convert(d.uuid);
    f[2].convert(d.model);
    f[3].convert(d.name);
    f[4].convert(d.memory_bytes);
    f[5].convert(d.compute_major);
    f[6].convert(d.compute_minor);
    f[7].convert(d.speed);
    f[8].convert(d.declared);
    return o;
  }
};

} // namespace adaptor
} // MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS)
} // namespace msgpack
