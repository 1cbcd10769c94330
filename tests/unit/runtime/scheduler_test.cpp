// The cluster scheduler's policies (scheduler/), driven with simulated nodes: label and GPU
// matching, fractional sharing, each strategy's choice, reasons, and a 1,000-node run of
// 100,000 requests checked placement by placement against an independent ledger.
#include "scheduler/cluster_view.hpp"
#include "scheduler/labels.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <set>

using namespace celer;
using scheduling::cluster_view;

namespace {

constexpr std::int64_t unit = protocol::resource_unit;

std::vector<gpu::device> declared(const std::string& spec) {
  auto d = gpu::parse_declared(spec);
  REQUIRE(d.has_value());
  return *d;
}

protocol::resource_set amounts(double cpus, double gpus = 0,
                               std::map<std::string, double> custom = {}) {
  auto r = protocol::make_request(cpus, gpus, 0, custom);
  REQUIRE(r.has_value());
  return *r;
}

protocol::placement with(scheduling_strategy::kind how = scheduling_strategy::kind::hybrid) {
  protocol::placement p;
  p.how = how;
  return p;
}

/// Adds a node whose total is `cpus` CPUs plus one GPU per declared device.
node_id add(cluster_view& v, double cpus, const std::string& gpus = {},
            std::map<std::string, std::string> labels = {}) {
  const node_id id = node_id::random();
  auto devices = gpus.empty() ? std::vector<gpu::device>{} : declared(gpus);
  auto total = amounts(cpus, static_cast<double>(devices.size()));
  v.add_node(id, std::move(total), std::move(labels), std::move(devices));
  return id;
}

const gpu::device& device_of(cluster_view& v, const node_id& n, int index) {
  for (const auto& d : v.find(n)->gpus.devices()) {
    if (d.index == index) return d;
  }
  FAIL("no device " << index);
  throw;
}

} // namespace

TEST_CASE("label selectors parse as written and match node labels", "[scheduler]") {
  auto s = scheduling::parse_label_selectors({"zone=a", "kind!=spot", "tier=gold|silver", "ssd", "!old"});
  REQUIRE(s.has_value());
  REQUIRE(s->size() == 5);
  CHECK(scheduling::to_string((*s)[2]) == "tier=gold|silver");
  CHECK(scheduling::labels_match({{"zone", "a"}, {"tier", "gold"}, {"ssd", "1"}}, *s));
  CHECK_FALSE(scheduling::labels_match({{"zone", "a"}, {"tier", "gold"}, {"ssd", "1"}, {"kind", "spot"}}, *s));
  CHECK_FALSE(scheduling::labels_match({{"zone", "b"}, {"tier", "gold"}, {"ssd", "1"}}, *s));
  CHECK_FALSE(scheduling::labels_match({{"zone", "a"}, {"tier", "bronze"}, {"ssd", "1"}}, *s));
  CHECK_FALSE(scheduling::labels_match({{"zone", "a"}, {"tier", "gold"}}, *s));
  CHECK_FALSE(scheduling::labels_match({{"zone", "a"}, {"tier", "gold"}, {"ssd", "1"}, {"old", "y"}}, *s));
  for (const char* bad : {"", "=a", "zone=", "zone=a|", "!", "zo ne=a"}) {
    auto r = scheduling::parse_label_selector(bad);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code() == error_code::invalid_argument);
    CHECK_THAT(r.error().message(), Catch::Contains("label selector"));
  }
}

TEST_CASE("fractional GPU requests share a device and never oversubscribe it", "[scheduler]") {
  scheduling::device_pool pool(declared("A100-80GB:2"));
  const auto p = with();
  std::vector<std::vector<protocol::gpu_share>> held;
  // 0.3 each: three fit on a device (0.9), the fourth cannot join them.
  for (int i = 0; i < 6; ++i) {
    auto s = pool.take(3 * unit / 10, p);
    REQUIRE(s.has_value());
    held.push_back(*s);
  }
  REQUIRE_FALSE(pool.take(3 * unit / 10, p).has_value());
  CHECK(pool.take(unit / 10, p).has_value());  // 0.1 still fits on each
  for (auto f : pool.free()) CHECK(f >= 0);
  // Best fit: the first three shares went to one device, the next three to the other.
  CHECK(held[0][0].index == held[1][0].index);
  CHECK(held[1][0].index == held[2][0].index);
  CHECK(held[3][0].index != held[0][0].index);
  // A whole GPU needs a device with nothing on it.
  REQUIRE_FALSE(pool.take(unit, p).has_value());
  for (auto& h : held) pool.give_back(h);
  CHECK(pool.free()[0] + pool.free()[1] == 2 * unit - unit / 10);
}

TEST_CASE("accelerator type and GPU memory land on matching devices only", "[scheduler]") {
  cluster_view v;
  const auto a100 = add(v, 8, "A100-80GB:2");
  const auto v100 = add(v, 8, "V100-16GB:2");
  const auto mixed = add(v, 8, "A100-40GB:1,V100-32GB:1");
  auto p = with();
  p.accelerator_type = "A100";
  for (int i = 0; i < 3; ++i) {
    auto d = v.place(amounts(1, 1), p);
    REQUIRE(d.now);
    REQUIRE(d.target != v100);
    REQUIRE(d.gpus.size() == 1);
    CHECK(device_of(v, d.target, d.gpus[0].index).model == "A100");
  }
  // The three A100s are taken: the next one waits, and never on the V100 node.
  auto waits = v.place(amounts(1, 1), p);
  CHECK_FALSE(waits.now);
  CHECK(waits.target != v100);
  CHECK_THAT(waits.why, Catch::Contains("waits for resources") && Catch::Contains("A100"));
  // 32 GB or more: the 80 GB A100s or the 32 GB V100, never a 16 GB V100.
  auto big = with();
  big.gpu_memory_bytes = 32'000'000'000ULL;
  auto d = v.place(amounts(1, 1), big);
  REQUIRE(d.now);
  CHECK(d.target == mixed);
  CHECK(device_of(v, mixed, d.gpus[0].index).model == "V100");
  // No device anywhere has 100 GB: it can never run, and says why.
  big.gpu_memory_bytes = 100'000'000'000ULL;
  auto never = v.place(amounts(1, 1), big);
  CHECK(never.never());
  CHECK_THAT(never.why, Catch::Contains("can ever run it") && Catch::Contains("100 GB"));
  // accelerator_type with no GPU amount still needs a node that has one.
  auto h100 = with();
  h100.accelerator_type = "H100";
  CHECK(v.place(amounts(1), h100).never());
  (void)a100;
}

TEST_CASE("label selectors keep work off nodes whose labels do not match", "[scheduler]") {
  cluster_view v;
  const auto spot = add(v, 4, {}, {{"zone", "a"}, {"kind", "spot"}});
  const auto ondemand = add(v, 4, {}, {{"zone", "a"}, {"kind", "ondemand"}});
  const auto other = add(v, 4, {}, {{"zone", "b"}});
  auto p = with();
  p.labels = *scheduling::parse_label_selectors({"zone=a", "kind!=spot"});
  for (int i = 0; i < 6; ++i) {
    auto d = v.place(amounts(1), p);
    CHECK(d.target == ondemand);
  }
  auto none = with();
  none.labels = *scheduling::parse_label_selectors({"zone=c"});
  auto d = v.place(amounts(1), none);
  CHECK(d.never());
  CHECK_THAT(d.why, Catch::Contains("do not match zone=c"));
  (void)spot;
  (void)other;
}

TEST_CASE("spread places round-robin over the nodes that fit", "[scheduler]") {
  cluster_view v;
  std::vector<node_id> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(add(v, 8));
  std::map<node_id, int> count;
  for (int i = 0; i < 8; ++i) {
    auto d = v.place(amounts(1), with(scheduling_strategy::kind::spread));
    REQUIRE(d.now);
    CHECK(d.target == ids[i % 4]);
    ++count[d.target];
  }
  for (auto& [id, c] : count) CHECK(c == 2);
}

TEST_CASE("the default packs a node up to the load threshold, then spreads", "[scheduler]") {
  cluster_view v(0.5);
  const auto first = add(v, 4);
  const auto second = add(v, 4);
  // 0, 0.25 and 0.5 load: the first two go to the busiest node under the threshold.
  CHECK(v.place(amounts(1), with()).target == first);
  CHECK(v.place(amounts(1), with()).target == first);
  // The first node is at 0.5, no longer under it: the least loaded now.
  CHECK(v.place(amounts(1), with()).target == second);
  // Both at 0.5 / 0.25: the second is under the threshold and busiest there.
  CHECK(v.place(amounts(1), with()).target == second);
  // Both at 0.5: the least loaded (the first in order on a tie).
  CHECK(v.place(amounts(1), with()).target == first);
}

TEST_CASE("the default prefers the node holding the arguments, and keeps CPU work off GPU nodes", "[scheduler]") {
  cluster_view v;
  const auto gpu_node = add(v, 8, "V100-16GB:1");
  const auto a = add(v, 8);
  const auto b = add(v, 8);
  std::vector<scheduling::node_bytes> where{{a, 100}, {b, 5000}};
  CHECK(v.place(amounts(1), with(), where).target == b);
  // No locality: a CPU-only task avoids the GPU node while plain nodes fit.
  for (int i = 0; i < 4; ++i) CHECK(v.place(amounts(1), with()).target != gpu_node);
  // A GPU task goes there.
  CHECK(v.place(amounts(1, 1), with()).target == gpu_node);
}

TEST_CASE("node affinity: hard waits or fails, soft falls back", "[scheduler]") {
  cluster_view v;
  const auto small = add(v, 1);
  const auto big = add(v, 8);
  protocol::placement hard = with(scheduling_strategy::kind::node_affinity);
  hard.node = small;
  auto first = v.place(amounts(1), hard);
  CHECK((first.now && first.target == small));
  auto second = v.place(amounts(1), hard);
  CHECK((!second.now && second.target == small));
  CHECK_THAT(second.why, Catch::Contains("waits for node"));
  // Two CPUs can never fit the small node: hard fails at once, soft goes elsewhere.
  auto never = v.place(amounts(2), hard);
  CHECK(never.never());
  CHECK_THAT(never.why, Catch::Contains("has 1 CPU in all"));
  auto soft = hard;
  soft.soft = true;
  auto moved = v.place(amounts(2), soft);
  CHECK((moved.now && moved.target == big));
  // An unknown or dead node.
  hard.node = node_id::random();
  CHECK_THAT(v.place(amounts(1), hard).why, Catch::Contains("not in the cluster"));
  v.mark_dead(big);
  hard.node = big;
  CHECK_THAT(v.place(amounts(1), hard).why, Catch::Contains("died"));
}

TEST_CASE("a node reporting more in use than it has still takes work that fits it",
          "[scheduler][fault]") {
  // Workers back from get take their CPUs back even past the total, so a report can say
  // CPU -1 of 1 free (load 2): work that asks for no CPU still fits there.
  for (const auto how : {scheduling_strategy::kind::hybrid, scheduling_strategy::kind::spread,
                         scheduling_strategy::kind::speed_weighted}) {
    cluster_view v;
    std::vector<node_id> ids;
    for (const std::int64_t cpus_free : {-1, -3}) {
      ids.push_back(node_id::random());
      v.add_node(ids.back(), amounts(1, 0, {{"pool", 1}}), {}, {});
      auto over = amounts(0, 0, {{"pool", 1}});
      over.amounts[protocol::cpu] = cpus_free * unit;
      v.refresh(ids.back(), over, {}, 0, 0);
    }
    REQUIRE(cluster_view::load_of(*v.find(ids[0])) == Approx(2));
    REQUIRE(cluster_view::load_of(*v.find(ids[1])) == Approx(4));
    const auto d = v.place(amounts(0, 0, {{"pool", 0.01}}), with(how));
    REQUIRE(d.now);
    REQUIRE(v.find(d.target) != nullptr);
    // The default takes the least loaded of them.
    if (how != scheduling_strategy::kind::spread) CHECK(d.target == ids[0]);
  }
}

TEST_CASE("speed_weighted sends GPU work where it should finish first", "[scheduler]") {
  cluster_view v;
  const auto fast = add(v, 16, "A100-80GB:2@2");
  const auto slow = add(v, 16, "V100-16GB:2@1");
  std::map<node_id, int> placed;
  // 12 whole-GPU tasks on 4 devices: the A100 node (twice the speed) should take 8.
  for (int i = 0; i < 12; ++i) {
    auto d = v.place(amounts(1, 1), with(scheduling_strategy::kind::speed_weighted));
    REQUIRE_FALSE(d.never());
    ++placed[d.target];
  }
  CHECK(placed[fast] == 8);
  CHECK(placed[slow] == 4);
  // Within a node, a share goes to the faster free device.
  scheduling::device_pool pool(declared("V100-16GB:1@1,A100-80GB:1@2"));
  auto s = pool.take(unit / 2, with(scheduling_strategy::kind::speed_weighted));
  REQUIRE(s.has_value());
  CHECK((*s)[0].index == 1);
}

TEST_CASE("a request no node can ever satisfy says which resource and which nodes", "[scheduler]") {
  cluster_view v;
  add(v, 4);
  add(v, 2, "V100-16GB:1");
  auto d = v.place(amounts(8), with());
  REQUIRE(d.never());
  CHECK_THAT(d.why, Catch::Contains("has 4 CPU in all") && Catch::Contains("has 2 CPU in all") &&
                      Catch::Contains("none of the 2 live node(s)"));
  auto g = v.place(amounts(1, 2), with());
  REQUIRE(g.never());
  CHECK_THAT(g.why, Catch::Contains("needs 2 GPU(s)"));
  cluster_view empty;
  CHECK(empty.place(amounts(1), with()).why == "the cluster has no live nodes");
}

namespace {

/// What a node really has, kept by the test apart from the view.
struct ledger_node {
  node_id id;
  std::map<std::string, std::string> labels;
  std::vector<gpu::device> gpus;
  std::vector<std::int64_t> gpu_free;
  std::int64_t cpus = 0, cpus_free = 0;
};

struct running {
  std::size_t node;
  protocol::resource_set need;
  std::vector<protocol::gpu_share> gpus;
};

bool device_ok(const gpu::device& d, const protocol::placement& p) {
  return d.memory_bytes >= p.gpu_memory_bytes &&
         (p.accelerator_type.empty() || gpu::matches_accelerator(d, p.accelerator_type));
}

} // namespace

TEST_CASE("a waiting request goes where preempting the fewest, lowest-priority actors makes room",
          "[scheduler][preemption]") {
  cluster_view v;
  const auto a = add(v, 8, "A100-80GB:2");
  const auto b = add(v, 8, "A100-40GB:1,V100-32GB:1");
  const auto c = add(v, 8, "V100-16GB:2");
  auto p = with();
  p.accelerator_type = "A100";
  const auto one = amounts(0, 1);
  // Every A100 busy: two actors on a, one on b; c's V100s are busy too.
  for (const auto& n : {a, b, c}) {
    auto there = with(scheduling_strategy::kind::node_affinity);
    there.node = n;
    for (int i = 0; i < 2; ++i) REQUIRE(v.place(one, there).now);
  }
  REQUIRE(v.find(b)->gpus.free() == std::vector<std::int64_t>{0, 0});
  const auto share = [](int index) { return std::vector<protocol::gpu_share>{{index, unit}}; };
  std::vector<cluster_view::preemptible> actors = {
    {a, one, share(0), -1, 1}, {a, one, share(1), 0, 2}, {b, one, share(0), -2, 3},
    {b, one, share(1), -9, 4},  // b's V100: stopping it frees no A100
    {c, one, share(0), -9, 5},  // c has no A100 at all
  };
  // One victim either way; b's is of lower priority (-2 < -1).
  CHECK(v.preemption_target(one, p, 10, actors) == b);
  // Only actors of lower priority count: at priority -1, only b's A100 actor (-2) qualifies.
  CHECK(v.preemption_target(one, p, -1, actors) == b);
  // At -2 nothing below it holds an A100.
  CHECK_FALSE(v.preemption_target(one, p, -2, actors).has_value());
  // Two A100s: only a has two; it needs both of its actors stopped.
  CHECK(v.preemption_target(amounts(0, 2), p, 10, actors) == a);
  // Without b's A100 actor, a wins with one victim; a hard affinity keeps it to its node.
  actors.erase(actors.begin() + 2);
  CHECK(v.preemption_target(one, p, 10, actors) == a);
  auto pinned = p;
  pinned.how = scheduling_strategy::kind::node_affinity;
  pinned.node = b;
  CHECK_FALSE(v.preemption_target(one, pinned, 10, actors).has_value());
  // Moving a waiting request between queues keeps the counts.
  auto d = v.place(one, p);
  REQUIRE_FALSE(d.now);
  const auto before = v.find(d.target)->queued;
  const auto other = d.target == a ? b : a;
  v.move_waiting(d.target, other, one);
  CHECK(v.find(d.target)->queued == before - 1);
  CHECK(v.find(other)->queued == 1);
}

TEST_CASE("1,000 simulated nodes take 100,000 requests and every placement is valid", "[scheduler][scale]") {
  std::mt19937_64 rng(20261130);
  const std::vector<std::string> kinds{"A100-80GB:8@2", "A100-40GB:4@2", "V100-16GB:4@1",
                                       "V100-32GB:8@1", "T4-16GB:1@0.5", ""};
  const std::vector<std::string> zones{"a", "b", "c"};
  cluster_view view;
  std::vector<ledger_node> nodes;
  std::unordered_map<node_id, std::size_t> where;
  for (int i = 0; i < 1000; ++i) {
    ledger_node n;
    n.id = node_id::random();
    n.labels = {{"zone", zones[rng() % 3]}};
    if (rng() % 4 == 0) n.labels["kind"] = "spot";
    const auto& kind = kinds[rng() % kinds.size()];
    if (!kind.empty()) n.gpus = declared(kind);
    n.gpu_free.assign(n.gpus.size(), unit);
    n.cpus = 8 + static_cast<std::int64_t>(rng() % 4) * 8;
    n.cpus_free = n.cpus * unit;
    view.add_node(n.id, amounts(static_cast<double>(n.cpus), static_cast<double>(n.gpus.size())),
                  n.labels, n.gpus);
    where[n.id] = nodes.size();
    nodes.push_back(std::move(n));
  }
  const std::vector<double> gpu_sizes{0, 0, 0.25, 0.5, 1, 2, 4};
  std::vector<running> live;
  std::size_t now = 0, waited = 0, never = 0;
  for (int r = 0; r < 100'000; ++r) {
    // Finished work gives its resources back, in random order, to both books: about one
    // every other request, so the cluster fills up and work starts to wait.
    if (!live.empty() && (rng() % 2 == 0 || live.size() > 12'000)) {
      const auto k = rng() % live.size();
      auto& done = live[k];
      auto& n = nodes[done.node];
      n.cpus_free += done.need.amounts[protocol::cpu];
      for (const auto& s : done.gpus) n.gpu_free[static_cast<std::size_t>(s.index)] += s.amount;
      view.release(n.id, done.need, done.gpus);
      live[k] = std::move(live.back());
      live.pop_back();
    }
    const double gpus = gpu_sizes[rng() % gpu_sizes.size()];
    auto need = amounts(1 + static_cast<double>(rng() % 4), gpus);
    auto p = with(static_cast<scheduling_strategy::kind>(rng() % 4));
    if (p.how == scheduling_strategy::kind::node_affinity) {
      p.node = nodes[rng() % nodes.size()].id;
      p.soft = rng() % 2 == 0;
    }
    if (gpus > 0 && rng() % 3 == 0) p.accelerator_type = rng() % 2 ? "A100" : "V100";
    if (gpus > 0 && rng() % 4 == 0) p.gpu_memory_bytes = 32'000'000'000ULL;
    if (rng() % 5 == 0) p.labels = *scheduling::parse_label_selectors({"zone=" + zones[rng() % 3]});
    if (rng() % 7 == 0) p.labels.push_back(*scheduling::parse_label_selector("kind!=spot"));
    if (rng() % 500 == 0) p.accelerator_type = "H100";  // exists nowhere
    const auto d = view.place(need, p);
    if (d.never()) {
      ++never;
      // Truly impossible: no node (the affinity node, when hard) could ever take it.
      for (const auto& n : nodes) {
        if (p.how == scheduling_strategy::kind::node_affinity && !p.soft && n.id != p.node) continue;
        if (!scheduling::labels_match(n.labels, p.labels)) continue;
        if (n.cpus * unit < need.amounts[protocol::cpu]) continue;
        const auto matching = std::count_if(n.gpus.begin(), n.gpus.end(),
                                            [&](const auto& g) { return device_ok(g, p); });
        const auto wanted = gpus <= 1 ? (gpus > 0 || !p.accelerator_type.empty() ? 1 : 0)
                                      : static_cast<long>(gpus);
        REQUIRE(matching < wanted);
      }
      continue;
    }
    REQUIRE(where.count(d.target) == 1);
    auto& n = nodes[where[d.target]];
    // Wherever it goes (now or to wait), the node can run it some day.
    REQUIRE(scheduling::labels_match(n.labels, p.labels));
    REQUIRE(n.cpus * unit >= need.amounts[protocol::cpu]);
    if (p.how == scheduling_strategy::kind::node_affinity && !p.soft) REQUIRE(d.target == p.node);
    if (!d.now) {
      ++waited;
      view.dequeue(d.target, need);  // the simulation drops waiting work
      continue;
    }
    ++now;
    // Placed now: the ledger must have had room, on devices that match.
    n.cpus_free -= need.amounts[protocol::cpu];
    REQUIRE(n.cpus_free >= 0);
    std::int64_t given = 0;
    for (const auto& s : d.gpus) {
      auto& dev = n.gpus.at(static_cast<std::size_t>(s.index));
      REQUIRE(device_ok(dev, p));
      n.gpu_free[static_cast<std::size_t>(s.index)] -= s.amount;
      REQUIRE(n.gpu_free[static_cast<std::size_t>(s.index)] >= 0);
      if (gpus > 1) REQUIRE(s.amount == unit);  // whole devices above one
      given += s.amount;
    }
    REQUIRE(given == static_cast<std::int64_t>(gpus * unit));
    if (gpus > 0 && gpus <= 1) REQUIRE(d.gpus.size() == 1);
    live.push_back({where[d.target], need, d.gpus});
  }
  // A mix that exercised every outcome.
  CHECK(now > 50'000);
  CHECK(waited > 100);
  CHECK(never > 100);
}

namespace {

std::vector<protocol::bundle_spec> bundles_of(int n, double cpus, double gpus = 0) {
  std::vector<protocol::bundle_spec> out(static_cast<std::size_t>(n));
  for (auto& b : out) b.need = amounts(cpus, gpus);
  return out;
}

} // namespace

TEST_CASE("placement group layouts follow their strategy, all or nothing", "[scheduler][groups]") {
  cluster_view v;
  const auto a = add(v, 4, "A100-80GB:2");
  const auto b = add(v, 4, "V100-16GB:2");
  const auto c = add(v, 2);
  // STRICT_PACK: all on one node that holds them together.
  auto packed = v.plan_group(bundles_of(2, 1, 1), bundle_strategy::strict_pack);
  REQUIRE(packed.nodes.size() == 2);
  CHECK(packed.nodes[0] == packed.nodes[1]);
  CHECK(packed.nodes[0] != c);
  // STRICT_SPREAD: a node each.
  auto spread = v.plan_group(bundles_of(3, 1), bundle_strategy::strict_spread);
  REQUIRE(spread.nodes.size() == 3);
  CHECK(std::set<node_id>(spread.nodes.begin(), spread.nodes.end()).size() == 3);
  // Four bundles cannot spread strictly over three nodes: never, and it says so.
  auto four = v.plan_group(bundles_of(4, 1), bundle_strategy::strict_spread);
  CHECK(four.never);
  CHECK_THAT(four.why, Catch::Contains("only 3 of the 3 live can hold one"));
  // Three whole GPUs on one node exist nowhere.
  auto three = v.plan_group(bundles_of(3, 0, 1), bundle_strategy::strict_pack);
  CHECK(three.never);
  // PACK falls back to several nodes when one cannot hold them all.
  cluster_view ones;
  for (int i = 0; i < 3; ++i) add(ones, 2, "T4-16GB:1");
  auto pack = ones.plan_group(bundles_of(2, 1, 1), bundle_strategy::pack);
  REQUIRE(pack.nodes.size() == 2);
  CHECK(pack.nodes[0] != pack.nodes[1]);
  // Two of the four GPUs are taken: three GPU bundles wait, and take nothing meanwhile.
  const auto free_before = v.find(c)->available.amounts;
  const auto gpus_before = v.find(a)->gpus.free();
  auto waiting = v.plan_group(bundles_of(3, 1, 1), bundle_strategy::spread);
  CHECK_FALSE(waiting.never);
  CHECK(waiting.nodes.empty());
  CHECK_THAT(waiting.why, Catch::Contains("waits for resources"));
  CHECK(v.find(c)->available.amounts == free_before);
  CHECK(v.find(a)->gpus.free() == gpus_before);
  (void)a;
  (void)b;
}
