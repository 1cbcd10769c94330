#pragma once
// The head's tables on disk, so that a head killed and started again on the same session
// finds the cluster it ran (DESIGN.md §7, docs/fault-tolerance.md "Head"). One row per node,
// actor, job, placement group and durable object, encoded with msgpack, in a
// store::table_db (RocksDB with a synced write-ahead log, in <session>/head/). Named actors
// need no table of their own: an actor's row holds its name, and the head rebuilds its
// name index from the rows of actors that are not dead.
//
//   head_tables t(std::move(db));              // a store::table_db
//   auto state = t.load();                     // what the last head wrote
//   t.save_node(row);                          // at each change, never per task
//
// A write that fails (a full disk) is logged, a few lines a second at most, and counted:
// the head goes on serving from memory, and a restart would find the table as it was
// before that write. Threads: the head's (one at a time).

#include "protocol/messages.hpp"
#include "transport/rate_limited_log.hpp"

#include <celer/store/table_db.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace celer {

/// A node as it registered, and whether the head has declared it dead.
struct node_row {
  protocol::register_node registration;
  bool alive = true;
  std::string dead_reason;
  CELER_MSGPACK_DEFINE(registration, alive, dead_reason)
};

/// An actor: what it runs, where, and in which state. Fields are only ever appended (a row
/// written by an older head reads with the new fields at their defaults).
struct actor_row {
  protocol::task_spec spec;
  protocol::actor_state state = protocol::actor_state::pending;
  address worker;
  node_id node;
  protocol::failure_info fail;
  /// Cores to tell when its state changes.
  std::vector<address> subscribers;
  /// Order of starting, and its GPU shares (what preemption weighs).
  std::uint64_t started = 0;
  std::vector<protocol::gpu_share> gpus;
  /// How many times it has been restarted.
  std::uint32_t restarts = 0;
  CELER_MSGPACK_DEFINE(spec, state, worker, node, fail, subscribers, started, gpus, restarts)
};

/// A durable object and the node whose disk holds it.
struct durable_row {
  object_id object;
  node_id node;
  CELER_MSGPACK_DEFINE(object, node)
};

/// Everything the tables held when they were loaded.
struct head_state {
  std::vector<node_row> nodes;
  std::vector<actor_row> actors;
  std::vector<job_id> jobs;
  std::vector<protocol::placement_group_info> groups;
  std::vector<durable_row> durable;
  /// Processes told of every node's death (drivers and workers: subscribe_cluster).
  std::vector<address> subscribers;
  /// Rows that could not be decoded (skipped, and logged).
  std::size_t unreadable = 0;
};

class head_tables {
public:
  /// `db` may be shared: the head's job manager keeps its records in it too.
  explicit head_tables(std::shared_ptr<store::table_db> db);

  /// Every row of every table. An error only when the database cannot be read at all.
  [[nodiscard]] expected<head_state> load() const;

  void save_node(const node_row& n);
  void save_actor(const actor_row& a);
  void drop_actor(const actor_id& id);
  void save_job(const job_id& id);
  void drop_job(const job_id& id);
  void save_group(const protocol::placement_group_info& g);
  void drop_group(const placement_group_id& id);
  /// One write for a node's report of its durable objects.
  void save_durable(const node_id& node, const std::vector<object_id>& objects);
  /// A process subscribed to the cluster's news, or stopped being (by its endpoint).
  void save_subscriber(const address& a);
  void drop_subscriber(const std::string& endpoint);

  /// The writes made from begin_batch() to commit_batch() go to the database together, as
  /// one write (one sync of its log), for a handler that changes many rows at once: a job
  /// that ends with 1,000 actors wrote 2,000 rows one sync each, and held the head (and
  /// every heartbeat behind it) for 2.5 to 6 s, long enough to have live nodes declared dead.
  /// A head killed before the commit loses those rows' changes, as one killed before the
  /// handler would have. Batches do not nest.
  void begin_batch() { batch_.emplace(); }
  void commit_batch();

  /// Writes that failed since this object was made.
  [[nodiscard]] std::uint64_t failed_writes() const noexcept { return failed_; }

private:
  void write(std::vector<store::table_write> w, const std::string& what);
  std::shared_ptr<store::table_db> db_;
  rate_limited_log errors_{"head"};
  std::uint64_t failed_ = 0;
  /// Writes that failed since the last one that succeeded.
  std::uint64_t failed_streak_ = 0;
  /// The writes of the open batch (none open: nullopt).
  std::optional<std::vector<store::table_write>> batch_;
};

} // namespace celer
