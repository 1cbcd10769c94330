// The cluster view driven through random histories, checked after every step against a
// model of what the nodes really have: nodes join, die and come back, heartbeats arrive
// (some stale, reporting more in use than the view counts, even below zero), requests are
// placed and finish, placement groups are made and removed. Deterministic (seeded).
#include "scheduler/cluster_view.hpp"
#include "scheduler/labels.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace celer;
using scheduling::cluster_view;
using kind = scheduling_strategy::kind;

// A few thousand steps check hundreds of thousands of facts: Catch records one only when it
// fails (recording each would cost more than the simulation).
#define SOUND(...)                    \
  do {                                \
    if (!(__VA_ARGS__)) CHECK(__VA_ARGS__); \
  } while (false)
#define SOUND_OR_STOP(...)              \
  do {                                  \
    if (!(__VA_ARGS__)) REQUIRE(__VA_ARGS__); \
  } while (false)

namespace {

constexpr std::int64_t unit = protocol::resource_unit;

/// What a node really has (its agent's books), kept apart from the view.
struct model_node {
  node_id id;
  protocol::resource_set total;
  std::map<std::string, std::string> labels;
  std::vector<gpu::device> gpus;
  bool alive = true;
  /// Bumped each time it (re)joins: work placed on an earlier life is gone with it.
  std::uint64_t life = 0;
  protocol::resource_set free;
  std::vector<std::int64_t> gpu_free;
  /// The view's amounts equal `free` (since an accurate report, until a stale one).
  bool exact = true;
  /// The view's per-device free equals (or is at most) `gpu_free`. Group bundles break
  /// both until the next accurate report: the view does not keep a bundle's device shares.
  bool gpu_exact = true;
  bool gpu_below = true;
};

struct placed {
  std::size_t node;
  std::uint64_t life;
  protocol::resource_set need;
  std::vector<protocol::gpu_share> gpus;
};

struct group {
  std::vector<placed> bundles;
};

bool device_ok(const gpu::device& d, const protocol::placement& p) {
  return d.memory_bytes >= p.gpu_memory_bytes &&
         (p.accelerator_type.empty() || gpu::matches_accelerator(d, p.accelerator_type));
}

/// Whether `need` under `p` could ever run on `n`, worked out from the model alone.
bool could_ever(const model_node& n, const protocol::resource_set& need,
                const protocol::placement& p) {
  if (!scheduling::labels_match(n.labels, p.labels)) return false;
  for (const auto& [name, v] : need.amounts) {
    if (name != protocol::gpu && v > n.total.units(name)) return false;
  }
  const auto units = need.units(protocol::gpu);
  const auto matching = std::count_if(n.gpus.begin(), n.gpus.end(),
                                      [&](const auto& d) { return device_ok(d, p); });
  const std::int64_t wanted = units > unit ? units / unit : (units > 0 || p.constrains_gpus() ? 1 : 0);
  return matching >= wanted;
}

/// Amounts with zero entries dropped (subtracting to zero leaves them in a set).
std::map<std::string, std::int64_t> nonzero(const protocol::resource_set& r) {
  std::map<std::string, std::int64_t> out;
  for (const auto& [k, v] : r.amounts) {
    if (v != 0) out[k] = v;
  }
  return out;
}

class simulation {
public:
  explicit simulation(std::uint64_t seed) : rng_(seed) {}

  void step() {
    const auto dice = rng_() % 100;
    if (nodes_.size() < 3 || dice < 4) {
      if (nodes_.size() < 6) add_node();
    } else if (dice < 8) {
      kill_node();
    } else if (dice < 12) {
      return_node();
    } else if (dice < 22) {
      heartbeat(/*stale=*/false);
    } else if (dice < 34) {
      heartbeat(/*stale=*/true);
    } else if (dice < 62) {
      place();
    } else if (dice < 78) {
      release();
    } else if (dice < 84) {
      make_group();
    } else if (dice < 88) {
      remove_group();
    } else if (dice < 92) {
      preempt();
    } else {
      drop_waiting();
    }
    check_books();
  }

  std::size_t now = 0, waited = 0, never = 0, groups_made = 0, below_zero = 0;

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
    SOUND_OR_STOP(r.has_value());
    return *r;
  }

  void add_node() {
    model_node n;
    n.id = node_id::random();
    const std::vector<std::string> kinds{"", "", "A100-80GB:2@2", "V100-16GB:2@1", "T4-16GB:1@0.5"};
    const auto& k = pick(kinds);
    if (!k.empty()) n.gpus = *gpu::parse_declared(k);
    n.total = amounts(static_cast<double>(1 + rng_() % 8), static_cast<double>(n.gpus.size()),
                      chance(50) ? 1.0 : 0.0);
    n.labels = {{"zone", chance(50) ? "a" : "b"}};
    nodes_.push_back(std::move(n));
    join(nodes_.size() - 1);
  }

  void join(std::size_t i) {
    auto& n = nodes_[i];
    n.alive = true;
    ++n.life;
    n.free = n.total;
    n.gpu_free.assign(n.gpus.size(), unit);
    n.exact = n.gpu_exact = n.gpu_below = true;
    view_.add_node(n.id, n.total, n.labels, n.gpus);
  }

  void kill_node() {
    auto& n = nodes_[rng_() % nodes_.size()];
    if (!n.alive) return;
    n.alive = false;
    view_.mark_dead(n.id);
  }

  void return_node() {
    const auto i = rng_() % nodes_.size();
    if (!nodes_[i].alive) join(i);
  }

  /// What the node reports: the truth, or (stale) more in use than that, CPUs and the pool
  /// possibly below zero (workers back from get take their CPUs past the total).
  void heartbeat(bool stale) {
    auto& n = nodes_[rng_() % nodes_.size()];
    if (!n.alive) return;  // the head ignores a dead node's reports
    auto report = n.free;
    auto gpu_report = n.gpu_free;
    if (stale) {
      for (auto& [name, v] : report.amounts) {
        const auto most = static_cast<std::uint64_t>(3 * n.total.units(name) + 1);
        if (chance(70)) v -= static_cast<std::int64_t>(rng_() % most);
      }
      for (auto& g : gpu_report) {
        g = std::max<std::int64_t>(0, g - static_cast<std::int64_t>(rng_() % (unit + 1)));
      }
      n.exact = false;
      n.gpu_exact = false;
    } else {
      // A device can be overcommitted in the model only after the view lost track of a
      // bundle's shares (a real node would have queued that work): reported as full, and
      // the view's devices are not comparable until it is given back.
      const bool sane =
        std::all_of(gpu_report.begin(), gpu_report.end(), [](auto g) { return g >= 0; });
      for (auto& g : gpu_report) g = std::max<std::int64_t>(0, g);
      n.exact = true;
      n.gpu_exact = n.gpu_below = sane;
    }
    for (const auto& [name, v] : report.amounts) below_zero += v < 0 ? 1 : 0;
    view_.refresh(n.id, report, gpu_report, static_cast<std::uint32_t>(rng_() % 4),
                  static_cast<std::int64_t>(rng_() % 2) * unit);
  }

  protocol::placement random_placement(double gpus) {
    protocol::placement p;
    const std::vector<kind> kinds{kind::hybrid, kind::hybrid, kind::spread, kind::node_affinity,
                                  kind::speed_weighted};
    p.how = pick(kinds);
    if (p.how == kind::node_affinity) {
      p.node = chance(90) ? pick(nodes_).id : node_id::random();
      p.soft = chance(50);
    }
    if (gpus > 0 && chance(30)) p.accelerator_type = chance(50) ? "A100" : "V100";
    if (chance(10)) p.gpu_memory_bytes = 20'000'000'000ULL;
    if (chance(20)) p.labels = *scheduling::parse_label_selectors({chance(50) ? "zone=a" : "zone!=a"});
    return p;
  }

  protocol::resource_set random_need(double& gpus) {
    const std::vector<double> cpus{0, 0, 0.5, 1, 2, 4, 9};
    const std::vector<double> gpu_sizes{0, 0, 0, 0.25, 0.5, 1, 2, 3};
    const std::vector<double> pools{0, 0, 0.01, 0.5, 1, 2};
    gpus = pick(gpu_sizes);
    return amounts(pick(cpus), gpus, pick(pools));
  }

  [[nodiscard]] model_node* model_of(const node_id& id) {
    for (auto& n : nodes_) {
      if (n.id == id) return &n;
    }
    return nullptr;
  }

  void place() {
    double gpus = 0;
    const auto need = random_need(gpus);
    const auto p = random_placement(gpus);
    std::vector<protocol::node_bytes> locality;
    if (chance(30)) locality.push_back({pick(nodes_).id, 1 + rng_() % 1000});
    INFO("request " << need.to_string() << ", strategy " << static_cast<int>(p.how)
                    << (p.soft ? " (soft)" : ""));
    // Before: where it could run, where it fits now (the view's books), what explain says.
    const bool hard = p.how == kind::node_affinity && !p.soft;
    bool any_could = false, any_fits = false, target_fits = false;
    for (const auto& n : nodes_) {
      if (!n.alive || !could_ever(n, need, p)) continue;
      const auto* v = view_.find(n.id);
      const bool fits = cluster_view::fits_now(*v, need, p);
      if (hard && n.id != p.node) continue;
      any_could = true;
      any_fits = any_fits || fits;
      if (n.id == p.node) target_fits = fits;
    }
    const auto explained = view_.explain(need, p);
    const auto d = view_.place(need, p, locality);
    INFO("decision: target " << d.target.short_hex() << ", now " << d.now << ", why: " << d.why);
    if (d.never()) {
      ++never;
      SOUND(!(d.why.empty()));
      SOUND(!(any_could));
      SOUND(!(explained.empty()));
      return;
    }
    // Never a node that is not there, or dead, or that could never run it.
    const auto* v = view_.find(d.target);
    SOUND_OR_STOP(v != nullptr);
    SOUND_OR_STOP(v->alive);
    auto* m = model_of(d.target);
    SOUND_OR_STOP(m != nullptr);
    SOUND_OR_STOP(m->alive);
    SOUND_OR_STOP(could_ever(*m, need, p));
    if (hard) SOUND_OR_STOP(d.target == p.node);
    if (!d.now) {
      // It waits only when nothing fits now, and says why.
      ++waited;
      SOUND(!(d.why.empty()));
      SOUND(!(explained.empty()));
      SOUND(!(hard ? target_fits : any_fits));
      waiting_.push_back({static_cast<std::size_t>(m - nodes_.data()), m->life, need, {}});
      return;
    }
    ++now;
    SOUND(any_fits);
    SOUND(explained.empty());
    if (p.how == kind::node_affinity && p.soft && target_fits) SOUND(d.target == p.node);
    // The devices given: as many units as asked, on devices it accepts.
    std::int64_t given = 0;
    for (const auto& s : d.gpus) {
      SOUND_OR_STOP(static_cast<std::size_t>(s.index) < m->gpus.size());
      SOUND(device_ok(m->gpus[static_cast<std::size_t>(s.index)], p));
      given += s.amount;
      m->gpu_free[static_cast<std::size_t>(s.index)] -= s.amount;
    }
    SOUND(given == need.units(protocol::gpu));
    m->free.subtract(need);
    // The view never counts more free than there is, so what it places fits for real.
    for (const auto& [name, amount] : need.amounts) {
      INFO("resource " << name);
      SOUND(m->free.units(name) >= 0);
    }
    live_.push_back({static_cast<std::size_t>(m - nodes_.data()), m->life, need, d.gpus});
  }

  void release() {
    if (live_.empty()) return;
    const auto k = rng_() % live_.size();
    const auto done = live_[k];
    live_[k] = live_.back();
    live_.pop_back();
    auto& n = nodes_[done.node];
    if (done.life != n.life || !n.alive) return;  // gone with its node's earlier life
    n.free.add(done.need);
    for (const auto& s : done.gpus) n.gpu_free[static_cast<std::size_t>(s.index)] += s.amount;
    view_.release(n.id, done.need, done.gpus);
  }

  void drop_waiting() {
    if (waiting_.empty()) return;
    const auto k = rng_() % waiting_.size();
    const auto w = waiting_[k];
    waiting_[k] = waiting_.back();
    waiting_.pop_back();
    const auto& n = nodes_[w.node];
    if (chance(50) && nodes_.size() > 1) {
      view_.move_waiting(n.id, pick(nodes_).id, w.need);
    } else {
      view_.dequeue(n.id, w.need);
    }
  }

  void make_group() {
    std::vector<protocol::bundle_spec> bundles(1 + rng_() % 3);
    for (auto& b : bundles) {
      b.need = amounts(static_cast<double>(rng_() % 3), chance(30) ? 0.5 : 0.0, chance(20) ? 0.5 : 0.0);
    }
    const std::vector<bundle_strategy> strategies{bundle_strategy::pack, bundle_strategy::spread,
                                                  bundle_strategy::strict_pack,
                                                  bundle_strategy::strict_spread};
    const auto strategy = pick(strategies);
    const auto plan = view_.plan_group(bundles, strategy);
    if (plan.nodes.empty()) {
      SOUND(!(plan.why.empty()));
      return;
    }
    SOUND_OR_STOP(plan.nodes.size() == bundles.size());
    if (strategy == bundle_strategy::strict_pack) {
      SOUND(std::count(plan.nodes.begin(), plan.nodes.end(), plan.nodes[0]) ==
            static_cast<std::ptrdiff_t>(plan.nodes.size()));
    }
    if (strategy == bundle_strategy::strict_spread) {
      SOUND(std::set<node_id>(plan.nodes.begin(), plan.nodes.end()).size() == plan.nodes.size());
    }
    ++groups_made;
    group g;
    for (std::size_t b = 0; b < bundles.size(); ++b) {
      auto* m = model_of(plan.nodes[b]);
      SOUND_OR_STOP(m != nullptr);
      SOUND_OR_STOP(m->alive);
      SOUND_OR_STOP(view_.find(m->id)->alive);
      SOUND_OR_STOP(could_ever(*m, bundles[b].need, bundles[b].where));
      // The node reserves the bundle itself, devices chosen by its own pool.
      scheduling::device_pool pool(m->gpus, m->gpu_free);
      placed r{static_cast<std::size_t>(m - nodes_.data()), m->life, bundles[b].need, {}};
      const auto units = bundles[b].need.units(protocol::gpu);
      if (units > 0) {
        auto shares = pool.take(units, bundles[b].where);
        if (m->gpu_below) SOUND_OR_STOP(shares.has_value());
        if (shares) r.gpus = *shares;
        for (const auto& s : r.gpus) m->gpu_free[static_cast<std::size_t>(s.index)] -= s.amount;
        m->gpu_exact = m->gpu_below = false;
      }
      m->free.subtract(bundles[b].need);
      for (const auto& [name, amount] : bundles[b].need.amounts) SOUND(m->free.units(name) >= 0);
      g.bundles.push_back(std::move(r));
    }
    groups_.push_back(std::move(g));
  }

  void remove_group() {
    if (groups_.empty()) return;
    const auto k = rng_() % groups_.size();
    const auto g = groups_[k];
    groups_[k] = groups_.back();
    groups_.pop_back();
    for (const auto& b : g.bundles) {
      auto& n = nodes_[b.node];
      if (b.life != n.life || !n.alive) continue;
      n.free.add(b.need);
      for (const auto& s : b.gpus) n.gpu_free[static_cast<std::size_t>(s.index)] += s.amount;
      if (!b.gpus.empty()) n.gpu_exact = n.gpu_below = false;
      view_.release(n.id, b.need, {});  // as the head does: amounts, not device shares
    }
  }

  void preempt() {
    double gpus = 0;
    const auto need = random_need(gpus);
    const auto p = random_placement(gpus);
    std::vector<cluster_view::preemptible> actors;
    std::uint64_t started = 0;
    for (const auto& l : live_) {
      const auto& n = nodes_[l.node];
      if (l.life != n.life || !n.alive || !chance(50)) continue;
      actors.push_back({n.id, l.need, l.gpus, static_cast<std::int32_t>(rng_() % 5) - 2, ++started});
    }
    const auto target = view_.preemption_target(need, p, /*priority=*/1, actors);
    if (!target) return;
    const auto* v = view_.find(*target);
    SOUND_OR_STOP(v != nullptr);
    SOUND_OR_STOP(v->alive);
    SOUND(cluster_view::could_run(*v, need, p));
    if (p.how == kind::node_affinity && !p.soft) SOUND(*target == p.node);
  }

  /// After every step: the view never believes more is free than is (so it never
  /// oversubscribes a node), and nothing is given back twice (nothing above the total).
  void check_books() {
    for (const auto& n : nodes_) {
      const auto* v = view_.find(n.id);
      SOUND_OR_STOP(v != nullptr);
      SOUND_OR_STOP(v->alive == n.alive);
      if (!n.alive) continue;
      INFO("node " << n.id.short_hex());
      for (const auto& [name, total] : n.total.amounts) {
        SOUND(n.free.units(name) <= total);
        SOUND(v->available.units(name) <= n.free.units(name));
      }
      if (n.exact) SOUND(nonzero(v->available) == nonzero(n.free));
      const auto& vg = v->gpus.free();
      SOUND_OR_STOP(vg.size() == n.gpu_free.size());
      for (std::size_t i = 0; i < vg.size(); ++i) {
        SOUND(n.gpu_free[i] <= unit);
        if (n.gpu_below) {
          SOUND(vg[i] <= n.gpu_free[i]);
          SOUND(n.gpu_free[i] >= 0);
        }
        if (n.gpu_exact) SOUND(vg[i] == n.gpu_free[i]);
      }
    }
  }

  std::mt19937_64 rng_;
  cluster_view view_;
  std::vector<model_node> nodes_;
  std::vector<placed> live_, waiting_;
  std::vector<group> groups_;
};

} // namespace

TEST_CASE("random histories of nodes, stale reports, groups and requests keep the view sound",
          "[scheduler][property]") {
  for (const std::uint64_t seed : {1u, 2u, 3u, 4u, 5u}) {
    simulation sim(seed);
    for (int step = 0; step < 2000; ++step) {
      INFO("seed " << seed << ", step " << step);
      sim.step();
    }
    // Every outcome happened, stale reports below zero included.
    CHECK(sim.now > 100);
    CHECK(sim.waited > 10);
    CHECK(sim.never > 10);
    CHECK(sim.groups_made > 10);
    CHECK(sim.below_zero > 10);
  }
}
