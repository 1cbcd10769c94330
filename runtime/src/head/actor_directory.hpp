#pragma once
// The head's actor directory (DESIGN.md §3, docs/actors.md): every actor the cluster has,
// its state (pending, alive, restarting, dead), where it runs, who is told when it changes,
// its name in its namespace, its restarts, and which live actors may be preempted.
//
//   actor_directory actors(net, tables, nodes, groups, guard, events, place);
//   actors.restore(state.actors);           // what the tables held, once
//   actors.on(create_actor), on(actor_started), on(actor_failed), on(subscribe_actor),
//   actors.on(lookup_actor), on(kill_actor)
//
// Where an actor goes is the scheduler's: the directory hands each actor to be started (new,
// restarted, or waiting for a node) to `place`, the head's, which sends it to a node, parks
// it until a node is alive, or queues it for its placement group.
//
// One of the head's managers: it owns its state, its handlers and its rows in the head's
// tables ("actors"; the name index is rebuilt from those rows). It subscribes to node_died
// (the node's actors restart, or die) and job_ended (the job's actors are stopped and
// forgotten, its namespace too). A detached actor (task_spec::detached) runs as its shared
// namespace's job, so no job's end stops it; the jobs let into the namespace reach it. Threads: the head's (one message at a time).

#include "head/head_events.hpp"
#include "head/head_guard.hpp"
#include "head/head_snapshot.hpp"
#include "head/head_tables.hpp"
#include "head/node_table.hpp"
#include "head/placement_groups.hpp"
#include "protocol/messages.hpp"
#include "scheduler/cluster_view.hpp"
#include "transport/transport.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace celer {

class actor_directory {
public:
  /// An actor: what it runs, where, in which state, who hears of it, its restarts. The
  /// same struct as its row in the head's tables (head_tables.hpp).
  using actor = actor_row;
  /// What the scheduler did with an actor handed to it.
  enum class placing : unsigned char {
    started,  ///< sent to a node (its `node` set)
    parked,   ///< no node is alive: it waits for one (unpark)
    queued,   ///< its placement group is not created yet: it waits for it
    never,    ///< it can never be placed (`why` says so)
  };
  using placer = std::function<placing(actor& a, std::string& why)>;

  /// Subscribers one actor may have (each a process that holds its handle).
  static constexpr std::size_t max_subscribers = 4096;

  actor_directory(transport& net, head_tables* tables, node_table& nodes, placement_groups& groups,
                  head_guard& guard, head_events& events, placer place);

  /// Loads the actors a previous head wrote: names and preemptible ones come back; an actor
  /// that was being placed waits again (for its group, or a live node), and its node is
  /// asked to start it again (resend_starts, once nodes can be reached).
  void restore(std::vector<actor_row> rows);
  /// Asks each node an actor was being started on to start it (a head that restarted may
  /// have lost the start_actor); a node that has it already ignores the resend.
  void resend_starts();

  void on(protocol::create_actor& m);
  void on(protocol::actor_started& m);
  void on(protocol::actor_failed& m);
  void on(protocol::subscribe_actor& m);
  void on(protocol::lookup_actor& m);
  void on(protocol::kill_actor& m);

  /// Places the actors parked while no node was alive (a node joined), and how many wait.
  void unpark();
  [[nodiscard]] std::size_t parked() const noexcept { return parked_.size(); }
  /// Actor creations that waited for their group, now routed: started on `node`, or (null)
  /// ended for `why`.
  void placed_in_group(const protocol::task_spec& spec, node_table::entry* node, const std::string& why);
  /// An actor creation that can never be placed: its actor dies for `fail`.
  void fail_creation(const actor_id& id, protocol::failure_info fail);
  /// Placement group `group` was removed for `why`: its actors die.
  void group_removed(const placement_group_id& group, const std::string& why);
  /// The endpoints of the workers of the actors on node `id` (their processes died with it).
  void add_workers_on(const node_id& id, std::vector<std::string>& endpoints) const;
  /// The process at `endpoint` is gone: it is nobody's subscriber any more.
  void forget(const std::string& endpoint);
  /// Writes the rows whose subscribers changed past the tick's write budget (in the tick's
  /// batch).
  void save_unsaved();

  /// Live actors that may be preempted, outside placement groups, when that set changed
  /// since the last call (the scheduler regroups only then); nullopt when it did not.
  [[nodiscard]] bool any_preemptible() const noexcept { return !preemptible_.empty(); }
  std::optional<std::vector<scheduling::cluster_view::preemptible>> preemptible_if_changed();

  /// Actor `id`, or null.
  [[nodiscard]] const actor* find(const actor_id& id) const;
  /// Counts the actors of `job` (all when nil) alive and waiting to be placed.
  void count(const job_id& job, std::uint32_t& alive, std::uint32_t& pending) const;
  /// Every actor and the number of restarts, for the head's snapshot.
  void fill(head_snapshot& s) const;

private:
  /// Starts a dead actor again when `fail` is a system failure (its process or node died,
  /// or it was preempted) and it has restarts left; false when it stays dead.
  bool restart(const actor_id& id, actor& a, const protocol::failure_info& fail);
  /// Hands `a` to the scheduler; false, with `why`, when it can never be placed.
  bool place(actor& a, std::string& why);
  void mark_dead(const actor_id& id, actor& a, protocol::failure_info fail);
  void publish(const actor_id& id, const actor& a);
  static protocol::actor_update update_of(const actor_id& id, const actor& a);
  void persist(const actor& a);
  /// Adds `subscriber` to actor `id` (`what` asked, from job `sender`); false, logged,
  /// when its address is too long or the actor has max_subscribers.
  bool add_subscriber(const actor_id& id, actor& a, const address& subscriber, const job_id& sender,
                      const char* what);
  /// Where a named actor's name lives in names_: its namespace (task_spec::name_space) when
  /// shared, else its job's own, and the name.
  static std::string name_key(const job_id& job, const std::string& name_space, const std::string& name);
  /// The namespace `name_space` of job `job` means (its remembered one when empty), and
  /// remembers a job's first.
  std::string namespace_of(const job_id& job, const std::string& name_space);
  void node_died(const node_id& id, const std::string& reason);
  void job_ended(const job_id& job);
  /// Whether job `sender` may reach actor `a` (subscribe, kill, call, find): its own job's,
  /// or a detached actor's whose namespace it is let into; refused and logged otherwise.
  bool may_reach(const job_id& sender, const actor& a, const std::string& what);
  /// Whether job `job` is let into shared namespace `name_space`: its own namespace job,
  /// the head or a node (nil), or a job the head's grants let in (transport::may_enter).
  [[nodiscard]] bool let_in(const job_id& job, const std::string& name_space) const;
  /// A detached actor's creation: its name and shared namespace checked, the creator's
  /// job let into it, and its spec's job made the namespace's (namespace_job); or why not.
  expected<void> detach(protocol::task_spec& spec);

  transport& net_;
  head_tables* tables_;
  node_table& nodes_;
  placement_groups& groups_;
  head_guard& guard_;
  placer place_;
  std::unordered_map<actor_id, actor> actors_;
  /// Named actors by name_key (namespace and name).
  std::unordered_map<std::string, actor_id> names_;
  /// The shared namespace each job named first (task_spec::name_space, lookup_actor): its
  /// processes that name none use it. Forgotten when the job ends.
  std::unordered_map<job_id, std::string> job_namespaces_;
  /// Live actors that opted in to preemption, whether that set changed since the
  /// scheduler last took it, and how many actors have started.
  std::unordered_set<actor_id> preemptible_;
  bool preemptible_changed_ = false;
  std::uint64_t started_ = 0;
  /// Actors (by id) handed to the scheduler while no node was alive.
  std::vector<actor_id> parked_;
  /// Actors whose subscribers changed past the tick's write budget: their rows.
  std::unordered_set<actor_id> unsaved_;
  /// Actor restarts since this head started.
  std::uint64_t restarts_total_ = 0;
};

} // namespace celer
