#pragma once
// A node agent driven message by message on the recording transport, with a launcher that
// starts no process (and one in cluster mode whose head is timed by a clock the test moves):
// what node_agent_test and node_isolation_test share.
#include "fakes/recording_transport.hpp"
#include "node/node_agent.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace celer_test {

using namespace celer;

struct node_fixture {
  fakes::recording_transport net;
  fakes::fake_launcher launcher;
  address head{unique_id::random(), {}};
  node_agent node;
  address self;

  explicit node_fixture(double cpus, double gpus = 0)
    : node(net, launcher, make_config(cpus, gpus, head)) {
    node.start();
    self = net.take<protocol::register_node>().at(0).second.node_address;
  }
  static node_agent::config make_config(double cpus, double gpus, const address& head) {
    node_agent::config c;
    c.id = node_id::random();
    c.self = address{c.id, {}};
    c.head = head;
    c.total = *protocol::make_request(cpus, gpus, 0, {});
    c.max_idle_workers = 8;
    return c;
  }
  [[nodiscard]] const address& node_address() const { return self; }
  protocol::task_spec task(double cpus, double gpus = 0) {
    protocol::task_spec s;
    s.id = task_id::random();
    s.function = "f";
    s.resources = *protocol::make_request(cpus, gpus, 0, {});
    return s;
  }
  /// Asks for a lease for tasks shaped like `s` (s.id names the request).
  void submit(const protocol::task_spec& s) {
    protocol::message m = protocol::request_lease{s, false};
    node.handle(m);
  }
  /// The owner returns the lease it holds on `w`.
  void done(const worker_id& w) {
    protocol::message m = protocol::return_lease{w, lent_for.at(w)};
    node.handle(m);
  }
  /// Leases granted since the last call: (owner, reply).
  std::vector<std::pair<address, protocol::lease_reply>> granted() {
    auto g = net.take<protocol::lease_reply>();
    for (const auto& [to, r] : g) lent_for[r.worker] = r.request;
    return g;
  }
  /// Leases one worker for a task of `cpus` CPUs of a fresh job: the task (its job set) and
  /// the worker lent.
  std::pair<protocol::task_spec, worker_id> lease_for_new_job(double cpus) {
    auto s = task(cpus);
    s.job = job_id::random();
    submit(s);
    const auto g = granted();
    REQUIRE(g.size() == 1);
    return {s, g[0].second.worker};
  }
  std::map<worker_id, task_id> lent_for;
  /// Work sent to workers (actor creation).
  std::vector<std::pair<address, protocol::execute_task>> started() {
    return net.take<protocol::execute_task>();
  }
};

/// A node agent in cluster mode whose head probes are timed by a clock the test moves.
struct watched_node {
  fakes::recording_transport net;
  fakes::fake_launcher launcher;
  address head{unique_id::random(), "tcp://10.0.0.1:6380"};
  std::chrono::steady_clock::time_point now{std::chrono::hours(1)};
  std::vector<std::string> lost;
  node_agent node;

  watched_node() : node(net, launcher, make_config()) {
    node.start();
    (void)net.take<protocol::register_node>();
  }
  node_agent::config make_config() {
    auto c = node_fixture::make_config(2, 0, head);
    c.spill_to_head = true;
    c.head_missing_after = std::chrono::seconds(5);
    c.head_timeout = std::chrono::seconds(60);
    c.head_lost = [this](const std::string& why) { lost.push_back(why); };
    c.now = [this] { return now; };
    return c;
  }
  void tick_at(std::chrono::milliseconds since_start) {
    now = std::chrono::steady_clock::time_point{} + std::chrono::hours(1) + since_start;
    protocol::message m = protocol::tick{};
    node.handle(m);
  }
  /// The head answers the probes sent so far; returns how many there were.
  std::size_t answer_probes() {
    auto probes = net.take<protocol::lookup_actor>();
    for (const auto& [to, q] : probes) {
      REQUIRE(to == head);
      protocol::message reply = protocol::lookup_actor_reply{q.request_id, false, {}, {}};
      node.handle(reply);
    }
    return probes.size();
  }
};

} // namespace celer_test
