#pragma once
// A node's room: what of its resources and GPU devices is free, and the placement group
// bundles reserved here (each with its own free part, which only its job's work draws on).
//
//   node_room room(total, devices);
//   room.available(), room.gpus()                // the node's free part (dispatch takes from it)
//   room.account_of(w.in_bundle)                 // the free part work in a bundle draws on
//   auto why = room.reserve(m)                   // reserve_bundle: "" when reserved
//   for (auto& key : room.bundles_named(group, indices)) { ...; room.give_back(key); }
//
// One of the node agent's pieces: it owns the accounting; the agent decides what runs and
// what fails when a bundle goes. Threads: the agent's (one message at a time).

#include "protocol/messages.hpp"
#include "scheduler/device_pool.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace celer {

class node_room {
public:
  /// What a placement group's bundle reserved on this node, and what of it is free.
  struct bundle {
    /// The job whose group it is: only that job's work runs in it.
    job_id job;
    protocol::resource_set reserved;
    protocol::resource_set available;
    scheduling::device_pool gpus;
    std::vector<protocol::gpu_share> shares;
  };
  using bundle_key = std::pair<placement_group_id, std::int32_t>;

  node_room(protocol::resource_set total, std::vector<gpu::device> devices);

  /// The node's free part (bundles' reservations taken out).
  [[nodiscard]] protocol::resource_set& available() noexcept { return available_; }
  [[nodiscard]] const protocol::resource_set& available() const noexcept { return available_; }
  [[nodiscard]] scheduling::device_pool& gpus() noexcept { return gpus_; }
  [[nodiscard]] const scheduling::device_pool& gpus() const noexcept { return gpus_; }
  /// Whether `need` under `where` fits the node's free part now.
  [[nodiscard]] bool fits(const protocol::resource_set& need, const protocol::placement& where) const;

  /// The bundle `where` names, if reserved here.
  [[nodiscard]] bundle* bundle_of(const protocol::placement& where);
  /// The free resources work in `in_bundle` draws on: its bundle's, or (none, or gone) the
  /// node's.
  [[nodiscard]] protocol::resource_set& account_of(const protocol::placement& in_bundle);

  /// Reserves the bundle (a repeat is reserved already); "" when done, else why not.
  [[nodiscard]] std::string reserve(const protocol::reserve_bundle& m);
  /// The bundles of `group` reserved here among `indices` (all when empty).
  [[nodiscard]] std::vector<bundle_key> bundles_named(const placement_group_id& group,
                                                      const std::vector<std::int32_t>& indices) const;
  /// Gives a bundle's reservation back to the node.
  void give_back(const bundle_key& key);

private:
  std::vector<gpu::device> devices_;
  protocol::resource_set available_;
  scheduling::device_pool gpus_;
  std::map<bundle_key, bundle> bundles_;
};

} // namespace celer
