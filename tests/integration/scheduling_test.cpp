// GPU- and resource-aware scheduling on a real local cluster whose three nodes declare
// mixed GPUs (`celer start --gpus`): matching by model and memory, fractional sharing,
// each strategy, and the reasons given for work that waits or can never run.
#include "local_cluster.hpp"

#include <celer/celer.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include <time.h>

using namespace celer_it;

namespace {

std::int64_t monotonic_ns() {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);  // one clock for every process on the machine
  return static_cast<std::int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

/// Where a GPU task ran: its node, the device it was given, and what CUDA would see.
struct gpu_run {
  std::string node;
  std::vector<int> ids;
  std::string visible;
  std::int64_t start = 0, end = 0;
  MSGPACK_DEFINE(node, ids, visible, start, end)
};

gpu_run use_gpu(int ms) {
  gpu_run r;
  r.start = monotonic_ns();
  r.node = celer::current_node_id().hex();
  r.ids = celer::gpu_ids();
  const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
  r.visible = v == nullptr ? "(unset)" : v;
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  r.end = monotonic_ns();
  return r;
}

std::string here() { return celer::current_node_id().hex(); }

/// Reports its (declared) GPU as 73% busy with 5 GB in use.
std::vector<int> report_usage() {
  celer::report_gpu_usage(0.73, 5'000'000'000ULL);
  return celer::gpu_ids();
}

struct gpu_holder {
  std::vector<int> ids() const { return celer::gpu_ids(); }
};
gpu_holder* make_gpu_holder() { return new gpu_holder(); }

CELER_REMOTE(use_gpu, here, report_usage, make_gpu_holder, &gpu_holder::ids);

/// node0 (the head's): 2 x A100 80 GB; node1: 2 x V100 16 GB, zone=b; node2: an A100 40 GB
/// and a V100 32 GB, zone=a. node0 also has zone=a, kind=spot (local_cluster).
struct gpu_cluster : local_cluster {
  gpu_cluster()
    : local_cluster(2000, {"--gpus A100-80GB:2@2", "--gpus V100-16GB:2@1 --labels zone=b",
                           "--gpus A100-40GB:1@2,V100-32GB:1@1 --labels zone=a"}) {
    celer::init();
    for (int i = 0; i < 3; ++i) {
      const auto hex = celer::get(celer::task(here).options(on_node(i)).remote(), 60s);
      node_of[hex] = i;
      id_of.push_back(*celer::node_id::parse(hex));
    }
  }
  std::map<std::string, int> node_of;
  std::vector<celer::node_id> id_of;

  /// Runs `n` GPU tasks with `o` at once; (node, device) of each, checked against
  /// CUDA_VISIBLE_DEVICES.
  std::vector<gpu_run> run_all(int n, celer::task_options o, int ms = 200) {
    std::vector<celer::object_ref<gpu_run>> refs;
    for (int i = 0; i < n; ++i) refs.push_back(celer::task(use_gpu).options(o).remote(ms));
    std::vector<gpu_run> out;
    for (auto& r : refs) out.push_back(celer::get(r, 120s));
    for (const auto& r : out) {
      REQUIRE(node_of.contains(r.node));
      std::string ids;
      for (int g : r.ids) ids += (ids.empty() ? "" : ",") + std::to_string(g);
      CHECK(r.visible == ids);  // the worker process sees exactly its devices
    }
    return out;
  }
  std::pair<int, int> device(const gpu_run& r) {
    REQUIRE(r.ids.size() == 1);
    return {node_of.at(r.node), r.ids[0]};
  }
};

} // namespace

TEST_CASE("declared GPUs: accelerator_type and gpu_memory_gb land on matching devices only",
          "[cluster][scheduling]") {
  gpu_cluster c;
  const std::set<std::pair<int, int>> a100{{0, 0}, {0, 1}, {2, 0}};
  for (const auto& r : c.run_all(6, {.num_cpus = 0, .num_gpus = 1, .accelerator_type = "A100"})) {
    CHECK(a100.contains(c.device(r)));
  }
  const std::set<std::pair<int, int>> big{{0, 0}, {0, 1}, {2, 0}, {2, 1}};
  for (const auto& r : c.run_all(4, {.num_cpus = 0, .num_gpus = 1, .gpu_memory_gb = 30})) {
    CHECK(big.contains(c.device(r)));
  }
  for (const auto& r : c.run_all(
         3, {.num_cpus = 0, .num_gpus = 1, .accelerator_type = "V100", .gpu_memory_gb = 20})) {
    CHECK(c.device(r) == std::pair{2, 1});
  }
  // A declared device shows what its workers report.
  const auto reported = celer::get(celer::task(report_usage).options(
    {.num_cpus = 0, .num_gpus = 1, .accelerator_type = "V100", .gpu_memory_gb = 20}).remote(), 60s);
  CHECK(reported == std::vector<int>{1});
  REQUIRE(eventually([&] { return c.status().find("util 73%  memory 5.0 GB") != std::string::npos; }, 10s));
  // Work that asks for no GPU sees none on a GPU node.
  const auto plain = celer::get(celer::task(use_gpu).options(on_node(1)).remote(0), 60s);
  CHECK(plain.ids.empty());
  CHECK(plain.visible.empty());
}

TEST_CASE("fractional GPU requests share devices and never oversubscribe them",
          "[cluster][scheduling]") {
  gpu_cluster c;
  auto runs = c.run_all(12, {.num_cpus = 0, .num_gpus = 0.5, .label_selector = {"zone=b"}}, 300);
  // Every moment, at most two halves on each device.
  std::map<int, std::vector<std::pair<std::int64_t, int>>> edges;
  for (const auto& r : runs) {
    const auto [node, dev] = c.device(r);
    CHECK(node == 1);
    edges[dev].push_back({r.start, +1});
    edges[dev].push_back({r.end, -1});
  }
  for (auto& [dev, e] : edges) {
    std::sort(e.begin(), e.end());  // an end before a start at the same instant
    int now = 0, most = 0;
    for (const auto& [t, d] : e) most = std::max(most, now += d);
    INFO("device " << dev);
    CHECK(most <= 2);
  }
}

TEST_CASE("each strategy places as it says: spread, node affinity, speed_weighted, labels",
          "[cluster][scheduling]") {
  gpu_cluster c;
  std::set<int> spread;
  for (const auto& r : c.run_all(3, {.num_cpus = 0, .scheduling = celer::scheduling_strategy::spread()}, 800)) {
    spread.insert(c.node_of.at(r.node));
  }
  CHECK(spread.size() == 3);
  for (const auto& r : c.run_all(4, {.num_cpus = 0,
                                     .scheduling = celer::scheduling_strategy::node_affinity(c.id_of[1])})) {
    CHECK(c.node_of.at(r.node) == 1);
  }
  // Speed-weighted: the first GPU task goes where it should finish first (node0's A100s
  // score 2 each; node1's V100s 1 each; node2's pair 3 in all).
  const auto fast = c.run_all(1, {.num_cpus = 0, .num_gpus = 1,
                                  .scheduling = celer::scheduling_strategy::speed_weighted()});
  CHECK(c.node_of.at(fast[0].node) == 0);
  // zone=a but not spot: node2 only.
  for (const auto& r : c.run_all(3, {.num_cpus = 0, .label_selector = {"zone=a", "kind!=spot"}})) {
    CHECK(c.node_of.at(r.node) == 2);
  }
}

TEST_CASE("a GPU request no node can satisfy fails at once, saying why", "[cluster][scheduling]") {
  gpu_cluster c;
  auto ref = celer::task(use_gpu).options({.num_gpus = 1, .accelerator_type = "H100"}).remote(0);
  try {
    (void)celer::get(ref, 60s);
    FAIL("an H100 task ran on a cluster without one");
  } catch (const celer::exception& e) {
    CHECK_THAT(std::string(e.what()), Contains("H100") && Contains("none of the 3 live node(s)"));
  }
  // An actor's creation is answered by the head: it fails at once.
  CHECK_THROWS_WITH(
    celer::actor(make_gpu_holder).options({.num_gpus = 1, .gpu_memory_gb = 100}).remote(),
    Contains("can never be placed") && Contains("at least 100 GB") && Contains("V100 17.2 GB"));
  auto labels = celer::task(here).options({.label_selector = {"zone=c"}}).remote();
  CHECK_THROWS_WITH(celer::get(labels, 60s), Contains("do not match zone=c"));
}

TEST_CASE("a waiting GPU request says why in celer status and on its handle", "[cluster][scheduling]") {
  gpu_cluster c;
  // Both 80 GB A100s (only node0 has two A100s) held by an actor.
  auto holder = celer::actor(make_gpu_holder).options({.num_gpus = 2, .accelerator_type = "A100"}).remote();
  auto held = celer::get(holder.task(&gpu_holder::ids).remote(), 60s);
  CHECK(held == std::vector<int>{0, 1});
  auto waiting = celer::task(use_gpu).options({.num_cpus = 0, .num_gpus = 2, .accelerator_type = "A100"}).remote(0);
  REQUIRE(eventually([&] {
    return celer::pending_reason(waiting).find("waits for resources") != std::string::npos;
  }, 10s));
  CHECK_THAT(celer::pending_reason(waiting), Contains("A100"));
  REQUIRE(eventually([&] { return c.status().find("waiting") != std::string::npos; }, 10s));
  const auto st = c.status();
  CHECK_THAT(st, Contains("task use_gpu") && Contains("waits for resources"));
  CHECK_THAT(st, Contains("gpu 0: A100-80GB (A100, 85.9 GB") && Contains("speed 2.00 declared"));
  // Freed: it runs, on the devices the actor held, and no longer waits.
  celer::kill(holder);
  const auto ran = celer::get(waiting, 60s);
  CHECK(c.node_of.at(ran.node) == 0);
  CHECK(ran.ids == std::vector<int>{0, 1});
  CHECK(celer::pending_reason(waiting).empty());
}

namespace {

celer::placement_group_state group_state(const celer::placement_group& pg) {
  for (auto& g : celer::list_placement_groups()) {
    if (g.id == pg.id()) return g;
  }
  return {};
}

} // namespace

TEST_CASE("placement groups across three nodes: a bundle per node, all or nothing under contention",
          "[cluster][scheduling][groups]") {
  gpu_cluster c;
  // A GPU bundle on each node (STRICT_SPREAD), and work run in each bundle lands there.
  auto gpus = celer::create_placement_group({.bundles = {{.num_gpus = 1}, {.num_gpus = 1}, {.num_gpus = 1}},
                                             .strategy = celer::bundle_strategy::strict_spread,
                                             .name = "one-gpu-per-node"});
  REQUIRE(gpus.ready(30s));
  const auto nodes = group_state(gpus).nodes;
  REQUIRE(std::set<celer::node_id>(nodes.begin(), nodes.end()).size() == 3);
  for (int b = 0; b < 3; ++b) {
    const auto r = celer::get(celer::task(use_gpu).options({.num_cpus = 0, .num_gpus = 1,
                                                             .scheduling = gpus.bundle(b)}).remote(0), 60s);
    CHECK(r.node == nodes[static_cast<std::size_t>(b)].hex());
    CHECK(r.ids.size() == 1);
  }
  // Two groups that each need every node's only CPU: one is created whole, the other waits
  // holding nothing, and is created once the first is removed.
  const celer::placement_group_options every_cpu{
    .bundles = {{.num_cpus = 1}, {.num_cpus = 1}, {.num_cpus = 1}},
    .strategy = celer::bundle_strategy::strict_spread};
  auto first = celer::create_placement_group(every_cpu);
  auto second = celer::create_placement_group(every_cpu);
  REQUIRE(eventually([&] {
    return group_state(first).state == "created" || group_state(second).state == "created";
  }, 30s));
  auto& won = group_state(first).state == "created" ? first : second;
  auto& lost = &won == &first ? second : first;
  std::this_thread::sleep_for(500ms);  // a few retries of the loser: it must stay whole-or-nothing
  const auto waiting = group_state(lost);
  CHECK(waiting.state == "pending");
  CHECK(waiting.nodes.empty());
  const auto st = c.status();
  CHECK_THAT(st, Contains("CPU 1/1"));
  const auto listed = run(std::string(CELER_CLI) + " list placement-groups");
  CHECK_THAT(listed, Contains("3 placement group(s)") && Contains("STRICT_SPREAD  CREATED") &&
                       Contains("STRICT_SPREAD  PENDING") && Contains("one-gpu-per-node"));
  celer::remove_placement_group(won);
  REQUIRE(lost.ready(30s));
  CHECK(group_state(won).state == "removed");
}

namespace {

/// Where preempted trials note their checkpoint (a plain actor; its calls come from the
/// trials' preemption callbacks, in their own processes).
struct preempt_ledger {
  int note(std::string name, std::int64_t ms_left, std::string reason) {
    notes.push_back(name + " " + std::to_string(ms_left) + " " + reason);
    return static_cast<int>(notes.size());
  }
  std::vector<std::string> all() const { return notes; }
  std::vector<std::string> notes;
};
preempt_ledger* make_preempt_ledger() { return new preempt_ledger(); }

/// A tuning trial on one GPU. Its preemption callback notes it in the ledger, then takes
/// `hang_ms` more (a checkpoint too slow for its grace).
struct preempt_trial {
  preempt_trial(std::string name, int hang_ms) {
    celer::on_preempt([name, hang_ms](const celer::preemption& p) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          p.deadline - std::chrono::steady_clock::now())
                          .count();
      auto ledger = celer::get_actor<preempt_ledger>("ledger");
      (void)celer::get(ledger.task(&preempt_ledger::note).remote(name, left, p.reason), 10s);
      std::this_thread::sleep_for(std::chrono::milliseconds(hang_ms));
    });
  }
  std::string node() const { return celer::current_node_id().hex(); }
};
preempt_trial* make_preempt_trial(std::string name, int hang_ms) {
  return new preempt_trial(std::move(name), hang_ms);
}

CELER_REMOTE(make_preempt_ledger, &preempt_ledger::note, &preempt_ledger::all,
             make_preempt_trial, &preempt_trial::node);

} // namespace

TEST_CASE("preemption across nodes: the head picks the node, the lowest priority goes first, "
          "the callback runs, and the grace is enforced",
          "[cluster][scheduling][preemption]") {
  gpu_cluster c;
  auto ledger = celer::actor(make_preempt_ledger).options({.name = "ledger"}).remote();
  REQUIRE(celer::get(ledger.task(&preempt_ledger::all).remote(), 60s).empty());
  // Every A100 (two on node0, one on node2) held by a preemptible trial.
  auto trial = [&](const std::string& name, int priority, int hang_ms, int node) {
    auto t = celer::actor(make_preempt_trial)
               .options({.num_gpus = 1, .accelerator_type = "A100",
                         .scheduling = celer::scheduling_strategy::node_affinity(c.id_of[node]),
                         .priority = priority, .preemptible = true, .preemption_grace = 4000ms})
               .remote(name, hang_ms);
    REQUIRE(c.node_of.at(celer::get(t.task(&preempt_trial::node).remote(), 60s)) == node);
    return t;
  };
  auto t0a = trial("t0a", 0, 0, 0);
  auto t0b = trial("t0b", -1, 60'000, 0);  // its checkpoint would take a minute
  auto t2 = trial("t2", -2, 0, 2);
  auto preempted_message = [](auto& t) -> std::string {
    try {
      (void)celer::get(t.task(&preempt_trial::node).remote(), 60s);
    } catch (const celer::actor_preempted_error& e) {
      return e.what();
    } catch (const std::exception& e) {
      return std::string("not actor_preempted_error: ") + e.what();
    }
    return "no error";
  };

  // The head decides from the nodes' heartbeats: wait until they show every A100 busy (only
  // the three V100s of node1 and node2 free).
  auto view_settled = [] {
    return eventually([] { return celer::available_resources()["GPU"] == 3; }, 10s);
  };
  REQUIRE(view_settled());
  // One A100 at priority 10: a single trial must go either way; node2's is of the lowest
  // priority, so the head sends the request there.
  auto high = [&](const std::string& name) {
    return celer::actor(make_preempt_trial)
      .options({.num_gpus = 1, .accelerator_type = "A100", .priority = 10})
      .remote(name, 0);
  };
  auto h1 = high("h1");
  CHECK(c.node_of.at(celer::get(h1.task(&preempt_trial::node).remote(), 60s)) == 2);
  CHECK_THAT(preempted_message(t2), Contains("priority 10") && Contains("priority -2") &&
                                      !Contains("not actor_preempted_error"));

  // The next goes to node0, where t0b (-1) goes before t0a (0). t0b's callback outlasts
  // its 4 s grace (time enough to write to the ledger under load): its process is killed at
  // the deadline, and h2 starts then.
  REQUIRE(view_settled());
  auto h2 = high("h2");
  // Meanwhile `celer status` shows the preemption under way. Wait for t0b's line itself:
  // node2's heartbeat may still list t2's finished preemption for a moment.
  std::string st;
  CHECK(eventually([&] {
    st = c.status();
    return st.find("make_preempt_trial, priority -1): stops within") != std::string::npos;
  }, 10s));
  CHECK_THAT(st, Contains("make_preempt_trial, priority -1): stops within") &&
                   Contains("of priority 10"));
  CHECK(c.node_of.at(celer::get(h2.task(&preempt_trial::node).remote(), 30s)) == 0);
  CHECK_THAT(preempted_message(t0b), Contains("preempted") && Contains("priority -1") &&
                                       !Contains("not actor_preempted_error"));
  CHECK(c.node_of.at(celer::get(t0a.task(&preempt_trial::node).remote(), 60s)) == 0);

  // Each callback wrote to the ledger from its own process before its deadline.
  const auto notes = celer::get(ledger.task(&preempt_ledger::all).remote(), 60s);
  std::string listed;
  for (const auto& n : notes) listed += n + "\n";
  INFO("ledger:\n" << listed);
  REQUIRE(notes.size() == 2);
  for (std::size_t i = 0; i < notes.size(); ++i) {
    INFO(notes[i]);
    CHECK(notes[i].starts_with(i == 0 ? "t2 " : "t0b "));
    const auto left = std::stoll(notes[i].substr(notes[i].find(' ') + 1));
    CHECK(left > 0);
    CHECK(left <= 4000);
    CHECK_THAT(notes[i], Contains("make_preempt_trial of priority 10"));
  }
}
