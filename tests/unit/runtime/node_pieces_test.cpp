// The node agent's pieces on their own (node/node_room.hpp, node/spilled_requests.hpp,
// node/gpu_monitor.hpp) and the local scheduler's queues (scheduler/shape_queues.hpp): a
// bundle reserved out of the node's room and given back, work queued by shape and priority,
// spilled requests forgotten and resent by a made-up clock, declared GPUs' reports.
#include "node/gpu_monitor.hpp"
#include "node/node_room.hpp"
#include "node/spilled_requests.hpp"
#include "scheduler/shape_queues.hpp"

#include <catch2/catch.hpp>

using namespace celer;
using namespace std::chrono_literals;

namespace {

protocol::task_spec work(double cpus, std::int32_t priority = 0, double gpus = 0) {
  protocol::task_spec s;
  s.id = task_id::random();
  s.function = "f";
  s.resources = *protocol::make_request(cpus, gpus, 0, {});
  s.priority = priority;
  return s;
}

std::vector<gpu::device> two_declared_gpus() {
  auto d = gpu::parse_declared("A100-80GB:2");
  REQUIRE(d);
  return *d;
}

} // namespace

TEST_CASE("a bundle is reserved out of the node's room, once, and given back whole", "[node][groups]") {
  node_room room(*protocol::make_request(4, 2, 0, {}), two_declared_gpus());
  protocol::reserve_bundle m{placement_group_id::random(), 0, {*protocol::make_request(2, 1, 0, {})}, job_id::random()};
  CHECK(room.reserve(m).empty());
  CHECK(room.reserve(m).empty());  // a repeat: reserved already, nothing more taken
  CHECK(room.available().get("CPU") == 2);
  CHECK(room.available().get(protocol::gpu) == 1);
  auto* b = room.bundle_of({.how = scheduling_strategy::kind::placement_group, .group = m.group, .bundle = 0});
  REQUIRE(b != nullptr);
  CHECK(b->job == m.job);
  CHECK(b->gpus.devices().size() == 1);
  protocol::placement in{.how = scheduling_strategy::kind::placement_group, .group = m.group, .bundle = 0};
  CHECK(&room.account_of(in) == &b->available);
  CHECK(&room.account_of({}) == &room.available());
  // More than is free: refused with what is free.
  protocol::reserve_bundle big{placement_group_id::random(), 0, {*protocol::make_request(3, 0, 0, {})}, m.job};
  CHECK_THAT(room.reserve(big), Catch::Matchers::Contains("it needs"));
  CHECK(room.bundles_named(m.group, {}).size() == 1);
  CHECK(room.bundles_named(m.group, {1}).empty());
  room.give_back({m.group, 0});
  CHECK(room.available().get("CPU") == 4);
  CHECK(room.available().get(protocol::gpu) == 2);
  CHECK(room.bundle_of(in) == nullptr);
  CHECK(room.fits(*protocol::make_request(4, 2, 0, {}), {}));
}

TEST_CASE("waiting work is kept by shape, highest priority first, FIFO within a shape", "[node][scheduler]") {
  scheduling::shape_queues q;
  const auto t0 = std::chrono::steady_clock::time_point{};
  auto a = work(1), b = work(2), c = work(1), urgent = work(1, 5), gpu = work(1, 0, 1);
  q.push(a, t0 + 3s);
  q.push(b, t0 + 1s);
  q.push(c, t0 + 2s);
  q.push(urgent, t0 + 4s);
  q.push(gpu, t0 + 5s);
  CHECK(q.size() == 5);
  REQUIRE(q.shapes().size() == 4);
  CHECK(q.shapes()[0].priority == 5);
  CHECK(q.pop(q.shapes()[0]).id == urgent.id);
  CHECK(q.pop(q.shapes()[1]).id == a.id);  // 1 CPU: a before c
  CHECK(q.shapes()[1].tasks.front().spec.id == c.id);
  q.prune();
  CHECK(q.shapes().size() == 3);
  CHECK(q.gpu_units() == gpu.resources.units(protocol::gpu));
  const auto oldest = q.oldest(2);
  REQUIRE(oldest.size() == 2);
  CHECK(oldest[0]->spec.id == b.id);
  CHECK(oldest[1]->spec.id == c.id);
  CHECK(q.find_if([&](const protocol::task_spec& s) { return s.id == gpu.id; }) != nullptr);
  CHECK(q.erase_if([&](const protocol::task_spec& s) { return s.id == gpu.id || s.id == b.id; }) == 2);
  CHECK(q.size() == 1);
  CHECK(q.shapes().size() == 1);
  CHECK(q.take_all(q.shapes()[0]).size() == 1);
  CHECK(q.size() == 0);
}

TEST_CASE("spilled requests are resent when the head restarts and forgotten in time", "[node][fault]") {
  spilled_requests spilled;
  const auto t0 = std::chrono::steady_clock::time_point{};
  protocol::request_lease plain, grouped, cancelled;
  plain.spec = work(1);
  grouped.spec = work(1);
  grouped.spec.where.how = scheduling_strategy::kind::placement_group;
  cancelled.spec = work(1);
  spilled.remember(plain, t0);
  spilled.remember(grouped, t0);
  spilled.remember(cancelled, t0);
  spilled.forget_if([&](const address&, const task_id& id, const job_id&) { return id == cancelled.spec.id; });
  CHECK(spilled.size() == 2);
  std::vector<task_id> sent;
  spilled.resend(t0 + 20s, [&](const protocol::request_lease& r) { sent.push_back(r.spec.id); });
  CHECK(sent.size() == 2);
  spilled.expire(t0 + 20s + spilled_requests::memory + 1s);  // counted from the resend
  CHECK(spilled.size() == 1);  // a group's request is kept longer
  spilled.expire(t0 + 20s + spilled_requests::group_memory + 1s);
  CHECK(spilled.size() == 0);
  spilled.remember(plain, t0);
  spilled.placed(plain.spec.id);
  CHECK(spilled.size() == 0);
}

TEST_CASE("declared GPUs carry what their workers reported; one nobody reported is empty", "[node][gpu]") {
  gpu_monitor monitor(two_declared_gpus());
  protocol::gpu_usage m;
  m.devices = {1};
  m.utilisation = 1.7;  // clamped
  m.memory_used_bytes = 1 << 20;
  monitor.reported(m);
  const auto s = monitor.samples();
  REQUIRE(s.size() == 2);
  CHECK(s[0].utilisation == 0);
  CHECK(s[1].index == 1);
  CHECK(s[1].utilisation == 1.0);
  CHECK(s[1].memory_used_bytes == 1u << 20);
}
