#pragma once
// What the tests of the head's managers share (actor_directory_test, placement_groups_test,
// cluster_subscriptions_test): the pieces a manager is made of, on the recording transport
// and an in-memory table, with a made-up clock (no manager reads the time but the node and
// job tables), and the messages they are driven with.
#include "fakes/memory_table_db.hpp"
#include "fakes/recording_transport.hpp"
#include "head/head_events.hpp"
#include "head/head_guard.hpp"
#include "head/head_tables.hpp"
#include "head/node_table.hpp"
#include "scheduler/cluster_view.hpp"

#include <celer/version.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace celer_test {

using namespace celer;

/// A node table and scheduler view with nodes in them, the guard and the events: what the
/// head gives each manager.
struct head_parts {
  fakes::recording_transport net;
  std::shared_ptr<fakes::memory_table_db::rows> rows = std::make_shared<fakes::memory_table_db::rows>();
  head_tables tables{std::make_shared<fakes::memory_table_db>(rows)};
  std::chrono::steady_clock::time_point now{};
  node_table nodes{net, &tables, [this] { return now; }};
  scheduling::cluster_view view{0.5};
  head_guard guard;
  head_events events;

  /// A live node with `cpus` CPUs, in the node table and the view; its address.
  address join(const node_id& n, double cpus = 2) {
    const address a{n, "tcp://10.0.0.1:" + std::to_string(7000 + n.lo % 1000)};
    protocol::register_node r;
    r.protocol_version = protocol_version;
    r.node = n;
    r.node_address = a;
    r.total = *protocol::make_request(cpus, 0, 0, {});
    (void)nodes.registered(r);
    view.add_node(n, r.total, {}, {});
    return a;
  }
  /// What the head does when a node dies, before it publishes node_died.
  void node_dies(const node_id& n, const std::string& why) {
    (void)nodes.mark_dead(n, why);
    view.mark_dead(n);
    events.node_died(n, why);
  }
};

inline protocol::task_spec actor_spec(const address& driver, const job_id& job, std::string name = {},
                                      int max_restarts = 0) {
  protocol::task_spec s;
  s.id = task_id::random();
  s.kind = protocol::task_kind::actor_creation;
  s.function = "make_counter";
  s.actor = actor_id::random();
  s.actor_name = std::move(name);
  s.owner = driver;
  s.job = job;
  s.resources = *protocol::make_request(1, 0, 0, {});
  s.max_restarts = max_restarts;
  return s;
}

inline protocol::create_actor create(const address& driver, protocol::task_spec spec) {
  protocol::create_actor c;
  c.request_id = 7;
  c.reply_to = driver;
  c.spec = std::move(spec);
  return c;
}

} // namespace celer_test
