// node_config: what the embedded runtime and `celer start` both build their node agent from.
#include "node/node_config.hpp"

#include <catch2/catch.hpp>

#include <chrono>

using namespace celer;
using namespace std::chrono_literals;

namespace {

struct a_node {
  node_id id = node_id::random();
  address self{id, "tcp://127.0.0.1:7001"};
  address head{unique_id::random(), "tcp://127.0.0.1:6380"};
};

} // namespace

TEST_CASE("a node's configuration offers what it is asked for and one of its own name",
          "[node]") {
  const knob_values k;
  const a_node n;
  const auto nc =
    node_config(k, n.id, n.self, n.head,
                node_offer{.num_cpus = 3, .gpus = "A100-80GB:2", .memory = 1e9,
                           .resources = {{"ssd", 2}}});
  REQUIRE(nc.id == n.id);
  REQUIRE(nc.self == n.self);
  REQUIRE(nc.head == n.head);
  REQUIRE(nc.gpus.size() == 2);
  REQUIRE(nc.total.get(protocol::cpu) == 3);
  REQUIRE(nc.total.get(protocol::gpu) == 2);
  REQUIRE(nc.total.get(protocol::memory) == 1e9);
  REQUIRE(nc.total.get("ssd") == 2);
  REQUIRE(nc.total.get(node_resource_name(n.id)) == 1);
  // Knobs at their defaults: twice the CPUs kept idle, 30% of memory for objects.
  REQUIRE(nc.max_idle_workers == 6);
  REQUIRE(nc.store_capacity == object_store_capacity(k));
  REQUIRE(nc.store_spill);
  REQUIRE(nc.preemption_grace == 30000ms);
}

TEST_CASE("knobs fill what a node's offer leaves unset", "[node]") {
  knob_values k;
  k.num_cpus = 5;
  k.gpus = "T4-16GB:1";
  k.max_idle_workers = 3;
  k.object_store_memory = 1 << 20;
  k.object_spilling = 0;
  k.preemption_grace_ms = -5;
  const a_node n;
  const auto nc = node_config(k, n.id, n.self, n.head, node_offer{});
  REQUIRE(nc.total.get(protocol::cpu) == 5);
  REQUIRE(nc.gpus.size() == 1);
  REQUIRE(nc.total.get(protocol::gpu) == 1);
  REQUIRE(nc.max_idle_workers == 3);
  REQUIRE(nc.store_capacity == std::size_t{1} << 20);
  REQUIRE_FALSE(nc.store_spill);
  REQUIRE(nc.preemption_grace == 0ms);
}

TEST_CASE("a node offering part of a GPU is refused with a reason", "[node]") {
  const a_node n;
  try {
    (void)node_config(knob_values{}, n.id, n.self, n.head,
                      node_offer{.num_gpus = 1.5, .gpus = "A100-80GB:2"});
    FAIL("node_config accepted 1.5 GPUs");
  } catch (const exception& e) {
    REQUIRE(e.code() == error_code::invalid_argument);
    REQUIRE(std::string(e.what()).find("whole GPUs") != std::string::npos);
  }
}
