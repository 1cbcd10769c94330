#pragma once
// The head: the cluster's tables (nodes, actors, actor names) and the cluster scheduler for
// work a node cannot place itself. Plain logic behind `handle`; a CAF actor runs it (one
// message at a time, so no locks).

#include "protocol/messages.hpp"
#include "transport/transport.hpp"

#include <map>
#include <unordered_map>
#include <vector>

namespace celer {

class head {
public:
  head(transport& net, address self);
  void handle(protocol::message& m);

private:
  struct node_info {
    address addr;
    protocol::resource_set total;
    std::map<std::string, std::string> labels;
  };
  struct actor_info {
    protocol::task_spec spec;
    protocol::actor_state state = protocol::actor_state::pending;
    address worker;
    node_id node;
    protocol::failure_info fail;
    std::vector<address> subscribers;
  };

  void on(protocol::register_node& m);
  void on(protocol::submit_task& m);
  void on(protocol::create_actor& m);
  void on(protocol::actor_started& m);
  void on(protocol::actor_failed& m);
  void on(protocol::subscribe_actor& m);
  void on(protocol::lookup_actor& m);
  void on(protocol::kill_actor& m);
  void on(protocol::shutdown_component&) {}  // the shell stops the actor
  /// A node whose total resources cover `need`, or null; `why` explains a null.
  const std::pair<const node_id, node_info>* feasible_node(const protocol::resource_set& need,
                                                           std::string& why) const;
  void publish(const actor_id& id, actor_info& a);
  void mark_dead(const actor_id& id, actor_info& a, protocol::failure_info fail);

  transport& net_;
  address self_;
  std::map<node_id, node_info> nodes_;
  std::unordered_map<actor_id, actor_info> actors_;
  std::unordered_map<std::string, actor_id> names_;
};

} // namespace celer
