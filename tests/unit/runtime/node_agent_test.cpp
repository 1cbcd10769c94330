// The node agent's dispatch and resource accounting, driven message by message.
#include "fakes/recording_transport.hpp"
#include "node/node_agent.hpp"

#include <catch2/catch.hpp>

using namespace celer;

namespace {

struct node_fixture {
  fakes::recording_transport net;
  fakes::fake_launcher launcher;
  address head{unique_id::random(), {}};
  node_agent node;

  explicit node_fixture(double cpus, double gpus = 0)
    : node(net, launcher, make_config(cpus, gpus, head)) {
    node.start();
    net.take<protocol::register_node>();
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
  protocol::task_spec task(double cpus, double gpus = 0) {
    protocol::task_spec s;
    s.id = task_id::random();
    s.function = "f";
    s.resources = *protocol::make_request(cpus, gpus, 0, {});
    return s;
  }
  void submit(const protocol::task_spec& s) {
    protocol::message m = protocol::submit_task{s, false};
    node.handle(m);
  }
  void done(const worker_id& w, const task_id& t) {
    protocol::message m = protocol::task_done{w, t};
    node.handle(m);
  }
  std::vector<std::pair<address, protocol::execute_task>> started() {
    return net.take<protocol::execute_task>();
  }
};

} // namespace

TEST_CASE("a task needing 2 CPUs waits while only 1 is free", "[node][resources]") {
  node_fixture f(2);
  auto a = f.task(1);
  f.submit(a);
  auto first = f.started();
  REQUIRE(first.size() == 1);
  REQUIRE(f.node.available().get(protocol::cpu) == 1);

  auto big = f.task(2);
  f.submit(big);
  REQUIRE(f.started().empty());
  REQUIRE(f.node.queued() == 1);

  f.done(worker_id(first[0].first.id), a.id);
  auto second = f.started();
  REQUIRE(second.size() == 1);
  REQUIRE(second[0].second.spec.id == big.id);
  REQUIRE(f.node.available().get(protocol::cpu) == 0);
}

TEST_CASE("a waiting large task does not hold back smaller ones behind it", "[node][resources]") {
  node_fixture f(2);
  f.submit(f.task(1));
  f.started();
  f.submit(f.task(2));  // must wait
  auto small = f.task(1);
  f.submit(small);      // fits now
  auto s = f.started();
  REQUIRE(s.size() == 1);
  REQUIRE(s[0].second.spec.id == small.id);
}

TEST_CASE("fractional GPUs share a device without exceeding it", "[node][resources]") {
  node_fixture f(8, 1);
  for (int i = 0; i < 4; ++i) f.submit(f.task(0, 0.3));
  REQUIRE(f.started().size() == 3);  // 0.9 of the GPU in use; a fourth 0.3 would exceed 1
  REQUIRE(f.node.available().get(protocol::gpu) == Approx(0.1));
}

TEST_CASE("a worker blocked in get lends its CPUs to queued tasks", "[node][resources]") {
  node_fixture f(1);
  f.submit(f.task(1));
  auto parent = f.started();
  REQUIRE(parent.size() == 1);
  f.submit(f.task(1));
  REQUIRE(f.started().empty());
  const worker_id w(parent[0].first.id);
  protocol::message blocked = protocol::worker_blocked{w};
  f.node.handle(blocked);
  REQUIRE(f.started().size() == 1);  // the child runs while its parent waits
  protocol::message unblocked = protocol::worker_unblocked{w};
  f.node.handle(unblocked);
  REQUIRE(f.node.available().get(protocol::cpu) == -1);  // briefly oversubscribed
}

TEST_CASE("finished workers are reused instead of started again", "[node]") {
  node_fixture f(1);
  auto a = f.task(1);
  f.submit(a);
  auto s = f.started();
  f.done(worker_id(s[0].first.id), a.id);
  f.submit(f.task(1));
  auto s2 = f.started();
  REQUIRE(s2.size() == 1);
  REQUIRE(s2[0].first.id == s[0].first.id);
  REQUIRE(f.launcher.launched_ids.size() == 1);
}

TEST_CASE("a task this node can never run goes to the head", "[node][resources]") {
  node_fixture f(2);
  f.submit(f.task(4));
  REQUIRE(f.started().empty());
  auto fwd = f.net.take<protocol::submit_task>();
  REQUIRE(fwd.size() == 1);
  REQUIRE(fwd[0].first == f.head);
}

TEST_CASE("each actor gets a worker of its own and holds its resources until it exits",
          "[node][actor]") {
  node_fixture f(2);
  auto spec = f.task(1);
  spec.kind = protocol::task_kind::actor_creation;
  spec.actor = actor_id::random();
  protocol::message start = protocol::start_actor{spec};
  f.node.handle(start);
  auto s = f.started();
  REQUIRE(s.size() == 1);
  REQUIRE(f.node.available().get(protocol::cpu) == 1);
  protocol::message exited = protocol::actor_exited{spec.actor, worker_id(s[0].first.id)};
  f.node.handle(exited);
  REQUIRE(f.node.available().get(protocol::cpu) == 2);
  REQUIRE(f.node.workers() == 0);
}
