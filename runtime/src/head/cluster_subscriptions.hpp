#pragma once
// The processes the head tells of every node's death (subscribe_cluster: drivers and
// workers, so that calls to a dead node fail at once instead of waiting). Bounded per job and
// in all (a job cannot make the head keep without limit), kept in the head's tables (a
// restarted head still tells them), written in batches past the tick's write budget.
//
//   cluster_subscriptions subs(net, tables, guard, events);
//   subs.restore(state.subscribers);          // what the tables held, once
//   subs.on(subscribe_cluster)
//   subs.forget(endpoint)                     // the process is gone
//   subs.save_unsaved()                       // each tick, in its batch
//
// One of the head's managers: it owns its state and its rows ("subscribers"). It
// subscribes to node_died (every subscriber is told) and job_ended (the job's subscriptions
// go). Threads: the head's (one message at a time).

#include "head/head_events.hpp"
#include "head/head_guard.hpp"
#include "head/head_tables.hpp"
#include "protocol/messages.hpp"
#include "transport/transport.hpp"

#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

namespace celer {

class cluster_subscriptions {
public:
  /// A job's processes subscribe once each; 4,096 is more processes than one job runs on a
  /// large cluster.
  static constexpr std::size_t max_per_job = 4096;
  static constexpr std::size_t max_total = 65536;

  cluster_subscriptions(transport& net, head_tables* tables, head_guard& guard, head_events& events);

  /// Loads the subscribers a previous head wrote; a job's process listens at
  /// "...#job=<hex>", so its subscription counts against its job again.
  void restore(std::vector<address> rows);

  void on(protocol::subscribe_cluster& m);
  /// The process at `endpoint` is gone: its subscription (if any) goes, row too.
  void forget(const std::string& endpoint);
  /// Writes the subscriptions past the tick's write budget (in the tick's batch).
  void save_unsaved();

  [[nodiscard]] std::size_t size() const noexcept { return subscribers_.size(); }

private:
  void job_ended(const job_id& job);

  transport& net_;
  head_tables* tables_;
  head_guard& guard_;
  std::vector<address> subscribers_;
  /// Every subscriber's endpoint and the job whose process it is (nil: subscribed by the
  /// head, a node or a process of this one), and how many each job has.
  std::unordered_map<std::string, job_id> job_of_;
  std::unordered_map<job_id, std::size_t> per_job_;
  /// Subscribers not yet in the tables (past the tick's write budget).
  std::vector<address> unsaved_;
};

} // namespace celer
