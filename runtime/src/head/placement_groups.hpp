#pragma once
// The head's placement groups (DESIGN.md §4, docs/placement-groups.md): bundles of
// resources reserved on nodes all or nothing, the work that waits for a group, and removal.
//
//   placement_groups groups(net, tables, nodes, view, guard, events, {released, removed});
//   groups.restore(state.groups);                 // what the tables held, once
//   groups.on(create_placement_group), on(bundle_reserved), on(remove_placement_group),
//   groups.on(placement_group_query)
//   node = groups.route(spec, why, never)         // where work for a group goes (the head's
//                                                 // scheduler asks)
//   groups.wait_for(lease) / wait_for(actor)      // until the group is created
//   groups.tick()                                 // lays out pending groups again
//
// Reserving is two-phase: the cluster view proposes a node per bundle, each node reserves
// its bundle (reserve_bundle, answered by bundle_reserved), and the group is created when
// all said yes; what was reserved goes back when one said no, and the group is tried again
// at the next tick. When it is created, the requests that waited for it are handed back to
// the head (`released`), which routes them; when it is removed, `removed` tells the actor
// directory, whose actors in it die with their bundles.
//
// One of the head's managers: it owns its state, its handlers and its rows in the head's
// tables ("groups"). It subscribes to node_died (a group with a bundle on the dead node is
// laid out again, its other bundles given back) and job_ended (the job's groups are
// removed). Threads: the head's (one message at a time).

#include "head/head_events.hpp"
#include "head/head_guard.hpp"
#include "head/head_snapshot.hpp"
#include "head/head_tables.hpp"
#include "head/node_table.hpp"
#include "protocol/messages.hpp"
#include "scheduler/cluster_view.hpp"
#include "transport/transport.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

namespace celer {

class placement_groups {
public:
  /// What the groups hand back to the head.
  struct hooks {
    /// A group was created (or removed): the requests that waited for it, to be routed now
    /// (route() places them, or says why they never can be).
    std::function<void(std::vector<protocol::request_lease> leases, std::vector<protocol::task_spec> actors)>
      released;
    /// A group was removed for `why`: its actors die.
    std::function<void(const placement_group_id& id, const std::string& why)> removed;
  };

  placement_groups(transport& net, head_tables* tables, node_table& nodes, scheduling::cluster_view& view,
                   head_guard& guard, head_events& events, hooks h);

  /// Loads the groups a previous head wrote. One that was being reserved is laid out again
  /// (live nodes give back what they held of it).
  void restore(std::vector<protocol::placement_group_info> rows);

  void on(protocol::create_placement_group& m);
  void on(protocol::bundle_reserved& m);
  void on(protocol::remove_placement_group& m);
  void on(protocol::placement_group_query& m);
  /// Tries again to lay out the groups still pending.
  void tick();

  /// Whether `spec` may run in the placement group it names: the group is its job's (or
  /// unknown: route says so). Logged when not.
  bool may_use(const protocol::task_spec& spec);
  /// Where work for a group goes: sets spec.where.bundle and returns the node; null with
  /// `why` (and `never`) when it cannot go yet, or ever.
  node_table::entry* route(protocol::task_spec& spec, std::string& why, bool& never);
  /// Work that waits for its group to be created (route said not yet).
  void wait_for(protocol::request_lease m);
  void wait_for(protocol::task_spec actor);
  /// Why work needing `need` in group `where` cannot start now.
  [[nodiscard]] std::string explain(const protocol::resource_set& need, const protocol::placement& where) const;
  /// Group `id`, or null when unknown.
  [[nodiscard]] const protocol::placement_group_info* find(const placement_group_id& id) const;
  /// Every group, for the head's snapshot.
  void fill(head_snapshot& s) const;

private:
  struct group {
    protocol::placement_group_info info;
    /// Replies still expected from nodes asked to reserve a bundle, and those that said yes.
    std::size_t replies_due = 0;
    std::vector<bool> reserved, answered;
    std::string refusal;
    /// Requests for the group that came before it was created.
    std::vector<protocol::request_lease> leases;
    std::vector<protocol::task_spec> actors;
    /// Round-robin position for work that takes any bundle.
    std::size_t next_bundle = 0;
  };

  /// The live (pending or created) group of `job` named `name`, or null; null for "".
  /// Names are unique among a job's live groups.
  [[nodiscard]] const group* live_named(const job_id& job, const std::string& name) const;
  /// Asks the nodes to reserve a pending group's bundles, when the view has room.
  void try_reserve(group& g);
  /// Gives back what reserved bundles of `g` hold (`indices`).
  void return_bundles(group& g, const std::vector<std::int32_t>& indices, const std::string& why);
  void remove(group& g, const std::string& why);
  void release_waiting(group& g);
  void persist(const group& g);
  void node_died(const node_id& id);
  void job_ended(const job_id& job);

  transport& net_;
  head_tables* tables_;
  node_table& nodes_;
  scheduling::cluster_view& view_;
  head_guard& guard_;
  hooks hooks_;
  std::unordered_map<placement_group_id, group> groups_;
};

} // namespace celer
