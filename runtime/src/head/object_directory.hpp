#pragma once
// The head's object directory: which node's disk holds each durable object (DESIGN.md §5,
// docs/objects.md "Durable objects"). Nodes report what they wrote to disk
// (durable_objects); a process that lost an object's owner asks where it is
// (locate_object) and is told the holding node while that node is alive. The latest
// report wins: a node restarted under a new id reports what it found on its disk.
//
//   object_directory dir(net, tables, [&](const node_id& n) { return live_address(n); });
//   dir.restore(state.durable);            // what the tables held, once
//   dir.on(durable_objects), dir.on(locate_object)
//
// One of the head's managers: it owns its state, its handlers and its rows in the head's
// tables (head_tables' "durable" table), and asks the node table only whether a node is
// alive and where. Threads: the head's (one message at a time).

#include "head/head_tables.hpp"
#include "protocol/messages.hpp"
#include "transport/transport.hpp"

#include <functional>
#include <optional>
#include <unordered_map>
#include <vector>

namespace celer {

class object_directory {
public:
  /// The address of node `n` while it is alive; nullopt when it is dead or unknown.
  using live_node = std::function<std::optional<address>(const node_id& n)>;

  /// `tables`: where rows are written (null: nothing is kept, as in embedded mode).
  object_directory(transport& net, head_tables* tables, live_node where);

  /// Loads the rows a previous head wrote.
  void restore(const std::vector<durable_row>& rows);

  /// A node's report of objects it holds on disk: recorded, and written in one batch
  /// (only the rows that changed).
  void on(protocol::durable_objects& m);
  /// Answers where an object is: found when a live node holds it on disk.
  void on(protocol::locate_object& m);

  /// How many durable objects the directory knows.
  [[nodiscard]] std::size_t size() const noexcept { return holder_.size(); }

private:
  transport& net_;
  head_tables* tables_;
  live_node where_;
  std::unordered_map<object_id, node_id> holder_;
};

} // namespace celer
