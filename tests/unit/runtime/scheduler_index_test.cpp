// The cluster view's indexes (candidates cached per request shape, nodes ordered by load,
// preemptible actors grouped by node) against a scan of every node: through random
// histories of joins, deaths, returns with other labels and devices, reports (stale ones
// below zero included), placements, releases, placement groups and queue moves, every
// decision must be the one a full scan with the policies' own rules makes, and every
// preemption choice as good as the best node a scan finds. Deterministic (seeded).
#include "scheduler/cluster_view.hpp"
#include "scheduler/labels.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace celer;
using scheduling::cluster_view;
using kind = scheduling_strategy::kind;

namespace {

constexpr std::int64_t unit = protocol::resource_unit;

std::int64_t gpu_units(const protocol::resource_set& need) { return need.units(protocol::gpu); }

/// What place() should decide, worked out by scanning every node.
struct outcome {
  node_id target;
  bool now = false;
  bool never = false;
};

double backlog(const cluster_view::node& n, const protocol::resource_set& need,
               const protocol::placement& p) {
  if (gpu_units(need) > 0) {
    const auto devices = static_cast<double>(n.gpus.count_of(p)) * unit;
    return static_cast<double>(n.gpus.busy_of(p) + n.queued_gpus + gpu_units(need)) /
           std::max(devices, 1.0);
  }
  return (static_cast<double>(n.queued) + 1) / std::max(n.total.get(protocol::cpu), 1.0);
}

double finish(const cluster_view::node& n, const protocol::resource_set& need,
              const protocol::placement& p) {
  const double speed = n.gpus.speed_of(p);
  if (speed <= 0) return std::numeric_limits<double>::infinity();
  return static_cast<double>(n.gpus.busy_of(p) + n.queued_gpus + gpu_units(need)) / speed;
}

/// The policies of docs/scheduling.md over every node, in the order they joined. `next` is
/// spread's round-robin position (one past its last choice).
outcome scan(const cluster_view& v, const protocol::resource_set& need, const protocol::placement& p,
             const std::vector<protocol::node_bytes>& locality, std::size_t next, double threshold) {
  const auto& nodes = v.nodes();
  if (p.how == kind::node_affinity) {
    const auto* n = v.find(p.node);
    if (n == nullptr || !n->alive || !cluster_view::could_run(*n, need, p)) {
      if (!p.soft) return {{}, false, true};
    } else if (cluster_view::fits_now(*n, need, p)) {
      return {p.node, true, false};
    } else if (!p.soft) {
      return {p.node, false, false};
    }
  }
  std::vector<std::size_t> could, fit;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (!nodes[i].alive || !cluster_view::could_run(nodes[i], need, p)) continue;
    could.push_back(i);
    if (cluster_view::fits_now(nodes[i], need, p)) fit.push_back(i);
  }
  if (could.empty()) return {{}, false, true};
  const bool by_speed = p.how == kind::speed_weighted && gpu_units(need) > 0;
  if (!fit.empty()) {
    std::size_t chosen = fit.front();
    if (p.how == kind::spread) {
      for (const auto i : fit) {
        if (i >= next) {
          chosen = i;
          break;
        }
      }
    } else if (by_speed) {
      for (const auto i : fit) {
        if (finish(nodes[i], need, p) < finish(nodes[chosen], need, p)) chosen = i;
      }
    } else {
      std::uint64_t most = 0;
      std::size_t local = nodes.size();
      for (const auto& l : locality) {
        for (const auto i : fit) {
          if (l.bytes > most && nodes[i].id == l.node) {
            local = i;
            most = l.bytes;
          }
        }
      }
      if (local < nodes.size()) return {nodes[local].id, true, false};
      const bool any_plain = gpu_units(need) == 0 &&
                             std::any_of(fit.begin(), fit.end(), [&](auto i) { return nodes[i].gpus.empty(); });
      std::size_t packed = nodes.size(), spread = nodes.size();
      double packed_load = -1, spread_load = 0;
      for (const auto i : fit) {
        if (any_plain && !nodes[i].gpus.empty()) continue;
        const double load = cluster_view::load_of(nodes[i]);
        if (load < threshold && load > packed_load) {
          packed = i;
          packed_load = load;
        }
        if (spread == nodes.size() || load < spread_load) {
          spread = i;
          spread_load = load;
        }
      }
      chosen = packed < nodes.size() ? packed : spread;
    }
    return {nodes[chosen].id, true, false};
  }
  std::size_t wait = could.front();
  for (const auto i : could) {
    const auto& n = nodes[i];
    const auto& w = nodes[wait];
    if (by_speed ? finish(n, need, p) < finish(w, need, p)
        : p.how == kind::spread ? n.queued < w.queued
                                : backlog(n, need, p) < backlog(w, need, p)) {
      wait = i;
    }
  }
  return {nodes[wait].id, false, false};
}

/// How many of a node's lower-priority actors must stop, and the highest priority among
/// them (0 stopped: no room that way), as preemption_target() defines it.
std::pair<std::size_t, std::int32_t> victims_on(const cluster_view::node& n,
                                                const protocol::resource_set& need,
                                                const protocol::placement& p, std::int32_t priority,
                                                const std::vector<cluster_view::preemptible>& actors) {
  std::vector<const cluster_view::preemptible*> list;
  for (const auto& a : actors) {
    if (a.node == n.id && a.priority < priority) list.push_back(&a);
  }
  std::sort(list.begin(), list.end(), [](const auto* a, const auto* b) {
    return a->priority != b->priority ? a->priority < b->priority : a->started > b->started;
  });
  const auto chosen = scheduling::pick_victims(list.size(), [&](const std::vector<bool>& set) {
    auto free = n.available;
    std::vector<protocol::gpu_share> shares;
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (!set[i]) continue;
      free.add(list[i]->holds);
      shares.insert(shares.end(), list[i]->gpus.begin(), list[i]->gpus.end());
    }
    return free.covers(need) && n.gpus.fits_after(gpu_units(need), p, shares);
  });
  std::size_t count = 0;
  std::int32_t top = 0;
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (!chosen[i]) continue;
    top = count == 0 ? list[i]->priority : std::max(top, list[i]->priority);
    ++count;
  }
  return {count, top};
}

struct running {
  node_id node;
  protocol::resource_set need;
  std::vector<protocol::gpu_share> gpus;
};

class history {
public:
  explicit history(std::uint64_t seed) : rng_(seed), view_(threshold) {}

  void step() {
    const auto dice = rng_() % 100;
    if (ids_.size() < 4 || dice < 5) {
      join(node_id::random());
    } else if (dice < 9) {
      view_.mark_dead(pick(ids_));
    } else if (dice < 13) {
      join(pick(ids_));  // back, or replaced while alive, perhaps with other labels and devices
    } else if (dice < 25) {
      report();
    } else if (dice < 70) {
      place();
    } else if (dice < 85) {
      release();
    } else if (dice < 89) {
      group();
    } else if (dice < 93) {
      move();
    } else {
      preempt();
    }
  }

  static constexpr double threshold = 0.5;
  std::size_t now = 0, waited = 0, never = 0, preemptions = 0;

private:
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[rng_() % v.size()];
  }
  bool chance(unsigned percent) { return rng_() % 100 < percent; }

  protocol::resource_set amounts(double cpus, double gpus, double pool) {
    std::map<std::string, double> custom;
    if (pool > 0) custom["pool"] = pool;
    auto r = protocol::make_request(cpus, gpus, 0, custom);
    REQUIRE(r.has_value());
    return *r;
  }

  void join(const node_id& id) {
    const std::vector<std::string> kinds{"", "", "A100-80GB:2@2", "A100-40GB:1@2,V100-32GB:1@1",
                                         "V100-16GB:2@1", "T4-16GB:1@0.5", "",
                                         "A100-40GB:2@2,V100-16GB:64@1"};  // past 64 devices
    const auto& k = kinds[rng_() % (chance(90) ? kinds.size() - 1 : kinds.size())];
    auto gpus = k.empty() ? std::vector<gpu::device>{} : *gpu::parse_declared(k);
    // Few distinct sizes, so that loads tie often.
    auto total = amounts(static_cast<double>(1 + rng_() % 4) * 2, static_cast<double>(gpus.size()),
                         chance(30) ? 2.0 : 0.0);
    std::map<std::string, std::string> labels{{"zone", chance(50) ? "a" : "b"}};
    view_.add_node(id, std::move(total), std::move(labels), std::move(gpus));
    if (std::find(ids_.begin(), ids_.end(), id) == ids_.end()) ids_.push_back(id);
    std::erase_if(live_, [&](const running& r) { return r.node == id; });
  }

  void report() {
    const auto& id = pick(ids_);
    const auto* n = view_.find(id);
    auto free = n->total;
    for (auto& [name, v] : free.amounts) {
      v -= static_cast<std::int64_t>(rng_() % static_cast<std::uint64_t>(2 * v + 1));  // below zero too
    }
    std::vector<std::int64_t> gpu_free;
    for (std::size_t i = 0; i < n->gpus.devices().size(); ++i) {
      gpu_free.push_back(pick(std::vector<std::int64_t>{0, unit / 4, unit / 2, unit}));
    }
    view_.refresh(id, free, gpu_free, static_cast<std::uint32_t>(rng_() % 4),
                  static_cast<std::int64_t>(rng_() % 3) * unit / 2);
    std::erase_if(live_, [&](const running& r) { return r.node == id; });
  }

  protocol::placement random_placement(double gpus) {
    protocol::placement p;
    p.how = pick(std::vector<kind>{kind::hybrid, kind::hybrid, kind::spread, kind::speed_weighted,
                                   kind::node_affinity});
    if (p.how == kind::node_affinity) {
      p.node = chance(90) ? pick(ids_) : node_id::random();
      p.soft = chance(50);
    }
    if (chance(gpus > 0 ? 30 : 5)) p.accelerator_type = chance(50) ? "A100" : "V100";
    if (chance(10)) p.gpu_memory_bytes = 20'000'000'000ULL;
    if (chance(20)) p.labels = *scheduling::parse_label_selectors({chance(50) ? "zone=a" : "zone!=a"});
    return p;
  }

  protocol::resource_set random_need(double& gpus) {
    gpus = pick(std::vector<double>{0, 0, 0, 0.25, 0.5, 1, 2});
    return amounts(pick(std::vector<double>{0, 0.5, 1, 2, 3, 9}), gpus,
                   pick(std::vector<double>{0, 0, 0, 1, 3}));
  }

  void place() {
    double gpus = 0;
    const auto need = random_need(gpus);
    const auto p = random_placement(gpus);
    std::vector<protocol::node_bytes> locality;
    for (auto k = rng_() % 3; k > 0; --k) locality.push_back({pick(ids_), 1 + rng_() % 3});
    INFO("request " << need.to_string() << ", strategy " << static_cast<int>(p.how)
                    << (p.soft ? " (soft)" : "") << ", " << p.labels.size() << " selector(s), "
                    << p.accelerator_type);
    const auto expected = scan(view_, need, p, locality, next_, threshold);
    const auto explained = view_.explain(need, p);
    const auto d = view_.place(need, p, locality);
    REQUIRE(d.never() == expected.never);
    REQUIRE(explained.empty() == expected.now);
    if (d.never()) {
      ++never;
      return;
    }
    REQUIRE(d.now == expected.now);
    REQUIRE(d.target.short_hex() == expected.target.short_hex());
    if (!d.now) {
      ++waited;
      waiting_.push_back({d.target, need, {}});
      return;
    }
    ++now;
    if (p.how == kind::spread) {
      const auto& nodes = view_.nodes();
      next_ = static_cast<std::size_t>(
                std::find_if(nodes.begin(), nodes.end(), [&](const auto& n) { return n.id == d.target; }) -
                nodes.begin()) + 1;
    }
    live_.push_back({d.target, need, d.gpus});
  }

  void release() {
    if (live_.empty()) return;
    const auto k = rng_() % live_.size();
    view_.release(live_[k].node, live_[k].need, live_[k].gpus);
    live_[k] = live_.back();
    live_.pop_back();
  }

  void group() {
    std::vector<protocol::bundle_spec> bundles(1 + rng_() % 3);
    for (auto& b : bundles) b.need = amounts(static_cast<double>(rng_() % 3), chance(30) ? 0.5 : 0.0, 0);
    const auto plan = view_.plan_group(
      bundles, pick(std::vector<bundle_strategy>{bundle_strategy::pack, bundle_strategy::spread,
                                                 bundle_strategy::strict_pack, bundle_strategy::strict_spread}));
    for (std::size_t b = 0; b < plan.nodes.size(); ++b) live_.push_back({plan.nodes[b], bundles[b].need, {}});
  }

  void move() {
    if (waiting_.empty()) return;
    const auto k = rng_() % waiting_.size();
    if (chance(50)) {
      view_.move_waiting(waiting_[k].node, pick(ids_), waiting_[k].need);
    } else {
      view_.dequeue(waiting_[k].node, waiting_[k].need);
    }
    waiting_[k] = waiting_.back();
    waiting_.pop_back();
  }

  void preempt() {
    double gpus = 0;
    const auto need = random_need(gpus);
    const auto p = random_placement(gpus);
    const auto priority = static_cast<std::int32_t>(rng_() % 4) - 1;
    std::vector<cluster_view::preemptible> actors;
    for (const auto& r : live_) {
      if (chance(60)) {
        actors.push_back({r.node, r.need, r.gpus, static_cast<std::int32_t>(rng_() % 4) - 2,
                          actors.size() + 1});
      }
    }
    if (chance(10)) actors.push_back({node_id::random(), amounts(1, 0, 0), {}, -5, 0});  // unknown node
    const auto target = view_.preemption_target(need, p, priority, actors);
    view_.set_preemptible(actors);
    REQUIRE(view_.preemption_target(need, p, priority) == target);
    // The best a scan finds: the fewest stopped, then the lowest highest priority.
    std::size_t best_count = 0;
    std::int32_t best_top = 0;
    const bool pinned = p.how == kind::node_affinity && !p.soft;
    for (const auto& n : view_.nodes()) {
      if (!n.alive || !cluster_view::could_run(n, need, p) || cluster_view::fits_now(n, need, p)) continue;
      if (pinned && n.id != p.node) continue;
      const auto [count, top] = victims_on(n, need, p, priority, actors);
      if (count == 0) continue;
      if (best_count == 0 || count < best_count || (count == best_count && top < best_top)) {
        best_count = count;
        best_top = top;
      }
    }
    REQUIRE(target.has_value() == (best_count > 0));
    if (!target) return;
    ++preemptions;
    const auto* n = view_.find(*target);
    REQUIRE(n != nullptr);
    REQUIRE(n->alive);
    REQUIRE(cluster_view::could_run(*n, need, p));
    const auto [count, top] = victims_on(*n, need, p, priority, actors);
    CHECK(count == best_count);
    CHECK(top == best_top);
  }

  std::mt19937_64 rng_;
  cluster_view view_;
  std::vector<node_id> ids_;
  std::vector<running> live_, waiting_;
  std::size_t next_ = 0;
};

} // namespace

TEST_CASE("indexed decisions equal a scan of every node through random histories",
          "[scheduler][index]") {
  for (const std::uint64_t seed : {11u, 12u, 13u, 14u, 15u, 16u}) {
    history h(seed);
    for (int step = 0; step < 3000; ++step) {
      INFO("seed " << seed << ", step " << step);
      h.step();
    }
    // Every outcome happened.
    CHECK(h.now > 200);
    CHECK(h.waited > 20);
    CHECK(h.never > 20);
    CHECK(h.preemptions > 10);
  }
}
