#pragma once
// The head's node table: the cluster's membership and liveness. Which nodes registered, at
// which address, whether each is alive (and why not), when each was last heard from, and
// what its last heartbeat said (its workers, store, waiting work, GPUs' samples,
// preemptions). What the scheduler weighs (resources, labels, queues) is the cluster
// view's (scheduler/cluster_view.hpp), which the head feeds from here.
//
//   node_table nodes(net, tables, now);
//   nodes.restore(state.nodes, now);          // what the tables held, once
//   switch (nodes.registered(m)) { ... }      // register_node: joined, resent or dead
//   if (nodes.heard(hb)) view.refresh(...)    // heartbeat: false for unknown or dead nodes
//   for (auto& [id, why] : nodes.silent(now, timeout)) declare it dead (the head)
//   nodes.live_address(n)                     // what every other manager asks
//
// One of the head's managers: it owns its state and its rows in the head's tables
// ("nodes"). Declaring a node dead is the head's: it marks it here (mark_dead), then tells
// the other tables. Threads: the head's (one message at a time).

#include "head/head_tables.hpp"
#include "protocol/messages.hpp"
#include "transport/transport.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace celer {

class node_table {
public:
  using time_point = std::chrono::steady_clock::time_point;
  using clock = std::function<time_point()>;

  /// What the head knows of a node beyond what its scheduler weighs.
  struct node {
    address addr;
    bool alive = true;
    std::string dead_reason;
    time_point last_seen;
    std::uint32_t workers = 0;
    /// Its worker processes' endpoints, as of its last heartbeat.
    std::vector<std::string> worker_endpoints;
    protocol::store_counters store;
    /// Its oldest waiting requests, and its GPUs' monitoring, as of its last heartbeat.
    std::vector<protocol::waiting_request> waiting;
    std::vector<gpu::sample> gpu_samples;
    std::vector<protocol::preemption_state> preempting;
    /// What it registered with (kept for the tables).
    protocol::register_node registration;
  };
  using entry = std::pair<const node_id, node>;

  /// `tables`: where rows are written (null: nothing is kept, as in embedded mode).
  node_table(transport& net, head_tables* tables, clock now);

  /// Loads the nodes a previous head knew, as last heard from at `heard` (each has a fresh
  /// grace to heartbeat). The caller adds them to its view.
  void restore(std::vector<node_row> rows, time_point heard);

  /// What a registration did.
  enum class registration : unsigned char {
    joined,  ///< a new node, or one whose address, resources or labels changed: recorded
    resent,  ///< a known node registering again as it is (a lost reply, a head restart)
    dead,    ///< a node declared dead earlier: it stays dead, and is told so
  };
  /// A node's registration (its protocol version and amounts checked by the caller).
  registration registered(const protocol::register_node& m);
  /// A node's heartbeat: what it reports is kept. False for an unknown node, and for one
  /// declared dead (told so again: it leaves when it hears it).
  bool heard(protocol::heartbeat& m);

  /// The live nodes silent for longer than `timeout` at `now`, and why each is to be
  /// declared dead.
  [[nodiscard]] std::vector<std::pair<node_id, std::string>> silent(time_point now,
                                                                    std::chrono::milliseconds timeout) const;
  /// The head itself was away for `away` (a late tick): that time counts against no node.
  void credit(std::chrono::steady_clock::duration away, time_point now);
  /// Node `id` is dead for `reason`: written to the tables, its last report dropped. The
  /// endpoints of its worker processes (as of its last heartbeat) and its own are
  /// returned: nothing subscribed from them lives on. Null entry: nothing.
  std::vector<std::string> mark_dead(const node_id& id, const std::string& reason);

  /// The address of node `n` while it is alive; nullopt when it is dead or unknown.
  [[nodiscard]] std::optional<address> live_address(const node_id& n) const;
  /// Whether any node is alive.
  [[nodiscard]] bool any_alive() const;
  /// Node `n`, or null when unknown.
  [[nodiscard]] entry* find(const node_id& n);
  [[nodiscard]] const entry* find(const node_id& n) const;
  /// Every node the head knows, dead ones too, by id.
  [[nodiscard]] const std::map<node_id, node>& all() const noexcept { return nodes_; }

  /// Sends `m` to node `n` if it is alive; false when it is not (or the send failed).
  template <class Message>
  bool send_to(const node_id& n, Message m) {
    auto a = live_address(n);
    return a && net_.send(*a, std::move(m));
  }
  /// Sends `m` to every live node but `except`.
  template <class Message>
  void send_to_live(const Message& m, const node_id& except = {}) {
    for (const auto& [id, n] : nodes_) {
      if (n.alive && id != except) (void)net_.send(n.addr, m);
    }
  }

private:
  void persist(const node_id& id, const node& n);

  transport& net_;
  head_tables* tables_;
  clock now_;
  std::map<node_id, node> nodes_;
};

} // namespace celer
