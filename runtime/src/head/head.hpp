#pragma once
// The head: the cluster's tables (nodes, actors, actor names) and the cluster scheduler for
// work a node cannot place itself. Plain logic behind `handle`; a CAF actor runs it (one
// message at a time, so no locks).

#include "head/head_snapshot.hpp"
#include "head/head_tables.hpp"
#include "head/job_table.hpp"
#include "head/node_table.hpp"
#include "head/object_directory.hpp"
#include "head/task_table.hpp"
#include "protocol/messages.hpp"
#include "scheduler/cluster_view.hpp"
#include "transport/rate_limited_log.hpp"
#include "transport/transport.hpp"

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <unordered_set>
#include <vector>

namespace celer {

class head {
public:
  using clock = std::function<std::chrono::steady_clock::time_point()>;
  /// `node_timeout`: a node silent for longer is declared dead (checked on each tick;
  /// zero never declares one dead, as in embedded mode where nothing ticks). `now`: the
  /// time (steady_clock's when empty; tests pass a fake). `tables`: where the head keeps
  /// its tables on disk (none in embedded mode); what they hold is loaded first, so a head
  /// started again on the same tables knows the cluster the last one ran.
  head(transport& net, address self,
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
  void expect_ticks_every(std::chrono::milliseconds period) { tick_period_ = period; }

  /// Limits on what one job can make the head keep (each refusal logged, rate-limited):
  /// node-death subscriptions per job and in all, subscribers per actor, and the length of
  /// an address a job gives. A job's processes subscribe once each; 4,096 is more
  /// processes than one job runs on a large cluster. Bounded, the subscriptions stay in
  /// the tables (a restarted head still tells their processes of node deaths).
  static constexpr std::size_t max_cluster_subscriptions_per_job = 4096;
  static constexpr std::size_t max_cluster_subscriptions = 65536;
  static constexpr std::size_t max_actor_subscribers = 4096;
  static constexpr std::size_t max_endpoint_bytes = 512;

private:
  struct actor_info {
    protocol::task_spec spec;
    protocol::actor_state state = protocol::actor_state::pending;
    address worker;
    node_id node;
    protocol::failure_info fail;
    std::vector<address> subscribers;
    /// Order of starting (later is larger), and its GPU shares: for choosing what to preempt.
    std::uint64_t started = 0;
    std::vector<protocol::gpu_share> gpus;
    /// Times it was started again after dying (spec.max_restarts bounds it).
    std::uint32_t restarts = 0;
  };

  void on(protocol::register_node& m);
  void on(protocol::request_lease& m);
  void on(protocol::cancel_lease_requests& m);
  void on(protocol::create_actor& m);
  void on(protocol::actor_started& m);
  void on(protocol::actor_failed& m);
  void on(protocol::subscribe_actor& m);
  void on(protocol::lookup_actor& m);
  void on(protocol::kill_actor& m);
  void on(protocol::shutdown_component&) {}  // the shell stops the actor
  void on(protocol::heartbeat& m);
  void on(protocol::tick& m);
  void on(protocol::subscribe_cluster& m);
  void on(protocol::job_finished& m);
  void on(protocol::status_query& m);
  void on(protocol::resource_query& m);
  void on(protocol::unsubscribe_cluster& m);
  void on(protocol::explain_placement& m);
  void on(protocol::create_placement_group& m);
  void on(protocol::remove_placement_group& m);
  void on(protocol::placement_group_query& m);
  void on(protocol::bundle_reserved& m);
  /// Where `spec` goes (view_ decides); null, with `why`, when it can never run. A request
  /// that must wait goes where preempting lower-priority actors would make room, if any.
  node_table::entry* pick_node(const protocol::task_spec& spec, std::span<const protocol::node_bytes> locality,
                               std::string& why);
  /// Node `id` is dead: the node table marks it, then every other table lets go of it.
  void declare_dead(const node_id& id, const std::string& reason);
  /// Why `need` under `where` cannot start now ("" when some node has room for it).
  [[nodiscard]] std::string explain(const protocol::resource_set& need,
                                    const protocol::placement& where) const;

  /// A placement group: its bundles, where they are reserved, and work waiting for it.
  struct group_info {
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
  /// Tries to lay out a pending group now; asks the nodes to reserve its bundles.
  void try_reserve(group_info& g);
  /// Gives back what reserved bundles of `g` hold (`indices`; all when empty).
  void return_bundles(group_info& g, const std::vector<std::int32_t>& indices, const std::string& why);
  void remove_group(group_info& g, const std::string& why);
  /// Where work for a group goes: sets spec.where.bundle and returns the node; null with
  /// `why` (and `never`) when it cannot go yet, or ever.
  node_table::entry* route_to_group(protocol::task_spec& spec, std::string& why, bool& never);
  /// Sends the group's early requests on once it is created (or fails them).
  void release_waiting(group_info& g);
  void fail_request(const protocol::task_spec& spec, const std::string& why);
  static protocol::actor_update update_of(const actor_id& id, const actor_info& a);
  void publish(const actor_id& id, actor_info& a);
  /// Starts a dead actor again when `fail` is a system failure (its process or node died,
  /// or it was preempted) and it has restarts left; false when it stays dead.
  bool restart(const actor_id& id, actor_info& a, const protocol::failure_info& fail);
  /// Sends `a` (registered, not alive) to a node, or to its placement group's queue;
  /// false, with `why`, when it can never be placed.
  bool place_actor(actor_info& a, std::string& why);
  void mark_dead(const actor_id& id, actor_info& a, protocol::failure_info fail);
  /// Whether no node is alive now. Work placed then is parked, not failed: a cluster whose
  /// every node died (or missed its heartbeats) gets nodes back, restarted or new.
  [[nodiscard]] bool no_live_node() const { return !nodes_.any_alive(); }
  /// Places what was parked, once a node has joined.
  void unpark();
  /// The process at `endpoint` is gone: no cluster or actor subscription of its stays, and
  /// the transport drops its connection.
  void forget_subscriber(const std::string& endpoint);

  /// Moves every live node's and driver's last heartbeat forward by the time the head
  /// itself was away, as its late tick at `now` shows (head_liveness.cpp).
  void credit_own_stall(std::chrono::steady_clock::time_point now);

  /// Puts a new snapshot on board_ (head_snapshot.cpp).
  void publish_snapshot();

  /// Loads what the tables hold (the constructor, once).
  void restore(head_state s);
  /// Writes the row of an actor or a group to the tables (none: nothing).
  void persist(const actor_id& id, const actor_info& a);
  void persist(const group_info& g);

  /// False (and logged, a few lines a second at most) when job `sender` asks about what
  /// belongs to job `owner`; nil `sender` is the head or a node, which may.
  bool owned_by_sender(const job_id& sender, const job_id& owner, const std::string& what);
  /// Whether `spec` may run in the placement group it names: the group is its job's (or
  /// unknown: route_to_group says so). Logged when not (rate-limited).
  bool may_use_group(const protocol::task_spec& spec);
  /// protocol::validate_amounts, the refusal logged (rate-limited): an error to send back.
  expected<void> check_amounts(const protocol::resource_set& s, const std::string& what,
                               const job_id& sender);
  /// Where a named actor's name lives in names_: its namespace (task_spec::name_space) when
  /// shared, else its job's own, and the name.
  static std::string name_key(const job_id& job, const std::string& name_space, const std::string& name);

  /// Whether a job-given address is short enough to keep (logged when not).
  bool endpoint_ok(const address& a, const job_id& sender, const char* what);
  /// Adds `subscriber` to actor `id` (`what` asked, from job `sender`); false, logged,
  /// when its address is too long or the actor has max_actor_subscribers.
  bool add_subscriber(const actor_id& id, actor_info& a, const address& subscriber, const job_id& sender,
                      const char* what);

  transport& net_;
  /// The tables on disk; null in embedded mode. Written at each change of a node, actor,
  /// job, group or durable object, never per task.
  std::unique_ptr<head_tables> tables_;
  /// What was loaded from the tables, logged on the first tick.
  std::string recovered_;
  rate_limited_log denials_{"head"};
  address self_;
  std::chrono::milliseconds node_timeout_;
  clock now_;
  std::vector<address> cluster_subscribers_;
  /// Every cluster subscriber's endpoint and the job whose process it is (nil: subscribed
  /// by the head, a node or a process of this one), and how many each job has (bounded by
  /// max_cluster_subscriptions_per_job).
  std::unordered_map<std::string, job_id> subscriber_jobs_;
  std::unordered_map<job_id, std::size_t> subscriptions_of_;
  /// Subscribers not yet in the tables. The first few of a tick are written at once; past
  /// those, they are written together at the next tick, one synced write for them all (a
  /// write each would let a job's flood of subscriptions stall the head on the disk: 6 ms
  /// a write on the CI machine, 4,096 of them 25 s, past the node timeout).
  std::vector<address> unsaved_subscribers_;
  /// The same for actors whose subscribers changed (subscribe_actor): their rows.
  std::unordered_set<actor_id> unsaved_actors_;
  std::size_t subscribers_saved_this_tick_ = 0;
  static constexpr std::size_t subscriber_writes_per_tick = 8;
  /// Writes unsaved_subscribers_ still subscribed, and unsaved_actors_, to the tables
  /// (each tick).
  void save_subscribers();
  /// expect_ticks_every's period (zero: none) and when the last tick came.
  std::chrono::milliseconds tick_period_{0};
  std::optional<std::chrono::steady_clock::time_point> last_tick_;
  /// The nodes: membership, liveness, what their heartbeats said (register_node, heartbeat).
  node_table nodes_;
  /// The scheduler's view: each node's resources, labels, GPUs and queue.
  scheduling::cluster_view view_;
  /// Which node's disk holds each durable object (durable_objects, locate_object).
  object_directory objects_;
  /// Jobs, their drivers' heartbeats and task counts, packages (job_heartbeat,
  /// package_fetch).
  job_table jobs_;
  std::unordered_map<actor_id, actor_info> actors_;
  /// Named actors by name_key (namespace and name).
  std::unordered_map<std::string, actor_id> names_;
  /// The shared namespace each job named first (task_spec::name_space, lookup_actor): its
  /// processes that name none use it. Forgotten when the job ends.
  std::unordered_map<job_id, std::string> job_namespaces_;
  /// The namespace `name_space` of job `job` means (its remembered one when empty), and
  /// remembers a job's first.
  std::string namespace_of(const job_id& job, const std::string& name_space);
  std::unordered_map<placement_group_id, group_info> groups_;
  /// Live actors that opted in to preemption, and how many actors have started.
  std::unordered_set<actor_id> preemptible_;
  std::uint64_t started_ = 0;
  /// Whether preemptible_ changed since the view last took it (view_.set_preemptible, those
  /// outside placement groups: grouped there by node once, not per choice).
  bool preemptible_changed_ = false;
  /// Lease requests and actors (by id) that came while no node was alive.
  std::vector<protocol::request_lease> parked_leases_;
  std::vector<actor_id> parked_actors_;
  std::shared_ptr<head_snapshot_board> board_;
  /// Actor restarts since this head started.
  std::uint64_t restarts_total_ = 0;
  /// The time each heartbeat took to handle (published for /metrics).
  handling_histogram heartbeat_times_;
};

} // namespace celer
