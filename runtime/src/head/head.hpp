#pragma once
// The head: the cluster's control plane, as managers that each own a table, its handlers
// and its rows on disk (node_table, job_table, object_directory, placement_groups,
// actor_directory, cluster_subscriptions), and the cluster scheduler for work a node cannot
// place itself. The head routes each message to the manager that owns it, places work
// (pick_node, with scheduling::cluster_view), and publishes what several managers act on as
// events (head_events.hpp: node died, job ended). Plain logic behind `handle`; a CAF actor
// runs it (one message at a time, so no locks).

#include "head/actor_directory.hpp"
#include "head/cluster_subscriptions.hpp"
#include "head/head_events.hpp"
#include "head/head_guard.hpp"
#include "head/head_liveness.hpp"
#include "head/head_snapshot.hpp"
#include "head/head_tables.hpp"
#include "head/job_table.hpp"
#include "head/node_table.hpp"
#include "head/object_directory.hpp"
#include "head/placement_groups.hpp"
#include "head/task_table.hpp"
#include "protocol/messages.hpp"
#include "scheduler/cluster_view.hpp"
#include "transport/transport.hpp"

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace celer {

class head {
public:
  using clock = head_liveness::clock;
  /// `node_timeout`: a node silent for longer is declared dead (checked on each tick;
  /// zero never declares one dead, as in embedded mode where nothing ticks). `now`: the
  /// time (steady_clock's when empty; tests pass a fake). `tables`: where the head keeps
  /// its tables on disk (none in embedded mode); what they hold is loaded first, so a head
  /// started again on the same tables knows the cluster the last one ran.
  explicit head(transport& net,
                std::chrono::milliseconds node_timeout = std::chrono::milliseconds(0),
                double spread_threshold = 0.5, clock now = {},
                std::unique_ptr<head_tables> tables = nullptr);
  void handle(protocol::message& m);

  /// The jobs the head knows (loaded from its tables, or heard from since): the daemon
  /// lets their drivers' and workers' keys in again after a restart.
  [[nodiscard]] std::vector<job_id> jobs() const;

  /// Leaves a copy of its actors and groups on `board` at each tick (head_snapshot.hpp).
  /// Before the head runs.
  void publish_to(std::shared_ptr<head_snapshot_board> board) { board_ = std::move(board); }
  /// Reads the package (working directory) a job was submitted with, for a node that starts
  /// the job's workers (package_fetch; jobs::job_manager::read_package). Before the head
  /// runs; without it, fetches are refused.
  using package_reader = job_table::package_reader;
  void serve_packages(package_reader read) { jobs_.serve_packages(std::move(read)); }
  /// The head is ticked every `period` (the daemon's heartbeat_ms). A tick later than two
  /// periods means the head itself stalled: that time counts against nobody's heartbeats
  /// (head_liveness.cpp). Before the head runs; without it, a late tick is not noticed.
  void expect_ticks_every(std::chrono::milliseconds period) { liveness_.expect_ticks_every(period); }

  /// Limits on what one job can make the head keep (each refusal logged, rate-limited):
  /// node-death subscriptions per job and in all, subscribers per actor, and the length of
  /// an address a job gives. Bounded, the subscriptions stay in the tables (a restarted
  /// head still tells their processes of node deaths).
  static constexpr std::size_t max_cluster_subscriptions_per_job = cluster_subscriptions::max_per_job;
  static constexpr std::size_t max_cluster_subscriptions = cluster_subscriptions::max_total;
  static constexpr std::size_t max_actor_subscribers = actor_directory::max_subscribers;
  static constexpr std::size_t max_endpoint_bytes = head_guard::max_endpoint_bytes;

private:
  // Handlers of what no manager owns: the cluster scheduler's (where work goes, why it
  // waits) and the events the head publishes (a node registered, died, a job ended).
  void on(protocol::register_node& m);
  void on(protocol::request_lease& m);
  void on(protocol::cancel_lease_requests& m);
  void on(protocol::shutdown_component&) {}  // the shell stops the actor
  void on(protocol::heartbeat& m);
  void on(protocol::tick& m);
  void on(protocol::job_finished& m);
  void on(protocol::status_query& m);
  void on(protocol::resource_query& m);
  void on(protocol::unsubscribe_cluster& m);
  void on(protocol::explain_placement& m);

  /// Where `spec` goes (view_ decides); null, with `why`, when it can never run. A request
  /// that must wait goes where preempting lower-priority actors would make room, if any.
  node_table::entry* pick_node(const protocol::task_spec& spec, std::span<const protocol::node_bytes> locality,
                               std::string& why);
  /// The actor directory's placer: sends `a` to a node, parks it while no node is alive,
  /// or queues it for its placement group.
  actor_directory::placing place_actor(actor_directory::actor& a, std::string& why);
  /// Requests that waited for a placement group, routed once it is created or removed.
  void route_released(std::vector<protocol::request_lease> leases, std::vector<protocol::task_spec> actors);
  void fail_lease(const protocol::task_spec& spec, const std::string& why);
  /// Node `id` is dead: the node table marks it, the processes that died with it are
  /// forgotten, and node_died is published (head_events.hpp).
  void declare_dead(const node_id& id, const std::string& reason);
  /// Why `need` under `where` cannot start now ("" when some node has room for it).
  [[nodiscard]] std::string explain(const protocol::resource_set& need, const protocol::placement& where) const;
  /// Whether no node is alive now. Work placed then is parked, not failed: a cluster whose
  /// every node died (or missed its heartbeats) gets nodes back, restarted or new.
  [[nodiscard]] bool no_live_node() const { return !nodes_.any_alive(); }
  /// Places what was parked, once a node has joined.
  void unpark();
  /// The process at `endpoint` is gone: no cluster or actor subscription of its stays, and
  /// the transport drops its connection.
  void forget_subscriber(const std::string& endpoint);
  /// Puts a new snapshot on board_ (head_snapshot.cpp).
  void publish_snapshot();
  /// Loads what the tables hold (the constructor, once; head_persistence.cpp).
  void restore(head_state s);

  transport& net_;
  /// The tables on disk; null in embedded mode. Written at each change of a node, actor,
  /// job, group or durable object, never per task.
  std::unique_ptr<head_tables> tables_;
  /// What was loaded from the tables, logged on the first tick.
  std::string recovered_;
  /// The clock, the node timeout, the ticks' timing and the heartbeats' handling times.
  head_liveness liveness_;
  /// Lease requests that came while no node was alive.
  std::vector<protocol::request_lease> parked_leases_;
  std::shared_ptr<head_snapshot_board> board_;

  // The managers, in the order they are made, which is the order they subscribe to events
  // and so react to them: on node_died the placement groups are laid out again before the
  // actors restart (an actor restarted in a group waits for it), and the subscribers are
  // told last; on job_ended the job's groups are removed (their actors die with them)
  // before its other actors are stopped.
  /// What every manager checks a job's message against, and its refusals' log.
  head_guard guard_;
  head_events events_;
  /// The nodes: membership, liveness, what their heartbeats said (register_node, heartbeat).
  node_table nodes_;
  /// The scheduler's view: each node's resources, labels, GPUs and queue.
  scheduling::cluster_view view_;
  /// Which node's disk holds each durable object (durable_objects, locate_object).
  object_directory objects_;
  /// Jobs, their drivers' heartbeats and task counts, packages (job_heartbeat,
  /// package_fetch).
  job_table jobs_;
  /// Placement groups: bundles reserved on nodes, work waiting for them.
  placement_groups groups_;
  /// Actors, their names and namespaces, restarts, subscribers, preemptible ones.
  actor_directory actors_;
  /// Processes told of node deaths (subscribe_cluster).
  cluster_subscriptions subscriptions_;
};

} // namespace celer
