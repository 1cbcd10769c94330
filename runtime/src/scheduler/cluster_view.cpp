#include "scheduler/cluster_view.hpp"

#include "scheduler/labels.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace celer::scheduling {
namespace {

std::int64_t gpu_units(const protocol::resource_set& need) { return need.units(protocol::gpu); }

std::string labels_text(const std::map<std::string, std::string>& labels) {
  std::string out;
  for (const auto& [k, v] : labels) out += (out.empty() ? "" : ", ") + k + "=" + v;
  return "{" + out + "}";
}

std::string request_text(const protocol::resource_set& need, const protocol::placement& p) {
  std::string out = need.to_string();
  const auto gpu = describe_gpu_constraint(p);
  if (!gpu.empty()) out += " (GPUs: " + gpu + ")";
  for (const auto& s : p.labels) out += ", label " + to_string(s);
  return out;
}

} // namespace

cluster_view::cluster_view(double spread_threshold) : spread_threshold_(spread_threshold) {}

cluster_view::node& cluster_view::add_node(const node_id& id, protocol::resource_set total,
                                           std::map<std::string, std::string> labels,
                                           std::vector<gpu::device> gpus) {
  auto [it, fresh] = index_.try_emplace(id, nodes_.size());
  if (fresh) nodes_.emplace_back();
  auto& n = nodes_[it->second];
  n.id = id;
  n.available = total;
  n.total = std::move(total);
  n.labels = std::move(labels);
  n.gpus = device_pool(std::move(gpus));
  n.queued = 0;
  n.queued_gpus = 0;
  n.alive = true;
  return n;
}

void cluster_view::mark_dead(const node_id& id) {
  if (auto* n = find(id)) n->alive = false;
}

cluster_view::node* cluster_view::find(const node_id& id) {
  const auto it = index_.find(id);
  return it == index_.end() ? nullptr : &nodes_[it->second];
}

const cluster_view::node* cluster_view::find(const node_id& id) const {
  const auto it = index_.find(id);
  return it == index_.end() ? nullptr : &nodes_[it->second];
}

void cluster_view::refresh(const node_id& id, const protocol::resource_set& available,
                           const std::vector<std::int64_t>& gpu_free, std::uint32_t queued,
                           std::int64_t queued_gpus) {
  auto* n = find(id);
  if (n == nullptr) return;
  n->available = available;
  n->gpus.set_free(gpu_free);
  n->queued = queued;
  n->queued_gpus = queued_gpus;
}

bool cluster_view::could_run(const node& n, const protocol::resource_set& need,
                             const protocol::placement& p) {
  if (!labels_match(n.labels, p.labels)) return false;
  for (const auto& [name, v] : need.amounts) {
    if (name == protocol::gpu) continue;
    const auto it = n.total.amounts.find(name);
    if (v > (it == n.total.amounts.end() ? 0 : it->second)) return false;
  }
  return n.gpus.could(gpu_units(need), p);
}

std::string cluster_view::never_on(const node& n, const protocol::resource_set& need,
                                   const protocol::placement& p) {
  if (could_run(n, need, p)) return {};
  if (!labels_match(n.labels, p.labels)) {
    std::string sel;
    for (const auto& s : p.labels) sel += (sel.empty() ? "" : ", ") + to_string(s);
    return "its labels " + labels_text(n.labels) + " do not match " + sel;
  }
  for (const auto& [name, v] : need.amounts) {
    if (name == protocol::gpu) continue;  // the device pool says which devices and why
    const auto it = n.total.amounts.find(name);
    const std::int64_t have = it == n.total.amounts.end() ? 0 : it->second;
    if (v > have) {
      return "has " + protocol::format_amount(n.total.get(name)) + " " + name + " in all";
    }
  }
  return n.gpus.never(gpu_units(need), p);
}

bool cluster_view::fits_now(const node& n, const protocol::resource_set& need,
                            const protocol::placement& p) {
  return n.available.covers(need) && n.gpus.fits(gpu_units(need), p);
}

double cluster_view::load_of(const node& n) {
  double load = 0;
  for (const auto& [name, total] : n.total.amounts) {
    if (total <= 0) continue;
    const auto it = n.available.amounts.find(name);
    const std::int64_t free = it == n.available.amounts.end() ? 0 : it->second;
    load = std::max(load, static_cast<double>(total - free) / static_cast<double>(total));
  }
  return load;
}

double cluster_view::backlog(const node& n, const protocol::resource_set& need,
                             const protocol::placement& p) {
  if (gpu_units(need) > 0) {
    const auto devices = static_cast<double>(n.gpus.count_of(p)) * protocol::resource_unit;
    const auto work = n.gpus.busy_of(p) + n.queued_gpus + gpu_units(need);
    return static_cast<double>(work) / std::max(devices, 1.0);
  }
  const double cpus = n.total.get(protocol::cpu);
  return (static_cast<double>(n.queued) + 1) / std::max(cpus, 1.0);
}

double cluster_view::expected_finish(const node& n, const protocol::resource_set& need,
                                     const protocol::placement& p) {
  const double speed = n.gpus.speed_of(p);
  if (speed <= 0) return std::numeric_limits<double>::infinity();
  const auto work = n.gpus.busy_of(p) + n.queued_gpus + gpu_units(need);
  return static_cast<double>(work) / speed;
}

cluster_view::decision cluster_view::take(node& n, const protocol::resource_set& need,
                                          const protocol::placement& p) {
  decision d;
  d.target = n.id;
  d.now = true;
  auto shares = n.gpus.take(gpu_units(need), p);
  if (shares) d.gpus = std::move(*shares);
  n.available.subtract(need);
  return d;
}

cluster_view::decision cluster_view::enqueue(node& n, const protocol::resource_set& need,
                                             std::string why) {
  ++n.queued;
  n.queued_gpus += gpu_units(need);
  decision d;
  d.target = n.id;
  d.why = std::move(why);
  return d;
}

void cluster_view::release(const node_id& id, const protocol::resource_set& need,
                           const std::vector<protocol::gpu_share>& gpus) {
  auto* n = find(id);
  if (n == nullptr) return;
  n->available.add(need);
  n->gpus.give_back(gpus);
}

void cluster_view::dequeue(const node_id& id, const protocol::resource_set& need) {
  auto* n = find(id);
  if (n == nullptr) return;
  if (n->queued > 0) --n->queued;
  n->queued_gpus = std::max<std::int64_t>(0, n->queued_gpus - gpu_units(need));
}

void cluster_view::move_waiting(const node_id& from, const node_id& to,
                                const protocol::resource_set& need) {
  dequeue(from, need);
  if (auto* n = find(to)) (void)enqueue(*n, need, {});
}

std::optional<node_id> cluster_view::preemption_target(const protocol::resource_set& need,
                                                       const protocol::placement& p,
                                                       std::int32_t priority,
                                                       std::span<const preemptible> actors) const {
  std::unordered_map<node_id, std::vector<const preemptible*>> by_node;
  for (const auto& a : actors) {
    if (a.priority < priority) by_node[a.node].push_back(&a);
  }
  std::optional<node_id> best;
  std::size_t best_count = 0;
  std::int32_t best_top = 0;
  for (auto& [id, list] : by_node) {
    // One stopped actor is the fewest: a node then wins only with a lower priority to stop.
    if (best && best_count == 1) {
      const auto lowest = std::min_element(list.begin(), list.end(), [](const auto* a, const auto* b) {
                            return a->priority < b->priority;
                          });
      if ((*lowest)->priority >= best_top) continue;
    }
    const auto* n = find(id);
    if (n == nullptr || !n->alive || !could_run(*n, need, p)) continue;
    if (p.how == scheduling_strategy::kind::node_affinity && !p.soft && p.node != id) continue;
    std::sort(list.begin(), list.end(), [](const auto* a, const auto* b) {
      return a->priority != b->priority ? a->priority < b->priority : a->started > b->started;
    });
    if (fits_now(*n, need, p)) continue;  // room already (the view was behind)
    // A cheap bound first: all of them together, amounts only.
    auto most = n->available;
    for (const auto* a : list) most.add(a->holds);
    if (!most.covers(need)) continue;
    const auto units = gpu_units(need);
    protocol::resource_set free;              // reused: assigning keeps its nodes
    std::vector<protocol::gpu_share> shares;  // what the chosen give back
    const auto chosen = pick_victims(list.size(), [&](const std::vector<bool>& set) {
      free = n->available;
      shares.clear();
      for (std::size_t i = 0; i < list.size(); ++i) {
        if (!set[i]) continue;
        free.add(list[i]->holds);
        shares.insert(shares.end(), list[i]->gpus.begin(), list[i]->gpus.end());
      }
      return free.covers(need) && n->gpus.fits_after(units, p, shares);
    });
    std::size_t count = 0;
    std::int32_t top = 0;
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (!chosen[i]) continue;
      top = count == 0 ? list[i]->priority : std::max(top, list[i]->priority);
      ++count;
    }
    if (count == 0) continue;
    if (!best || count < best_count || (count == best_count && top < best_top)) {
      best = id;
      best_count = count;
      best_top = top;
    }
  }
  return best;
}

cluster_view::node& cluster_view::choose_hybrid(const std::vector<node*>& fit,
                                                const protocol::resource_set& need,
                                                std::span<const node_bytes> locality) {
  // The node holding most of the arguments' bytes, if any holds some.
  node* local = nullptr;
  std::uint64_t most = 0;
  for (const auto& l : locality) {
    if (l.bytes <= most) continue;
    for (auto* n : fit) {
      if (n->id == l.node) {
        local = n;
        most = l.bytes;
      }
    }
  }
  if (local != nullptr) return *local;
  // Work that needs no GPU keeps off GPU nodes while other nodes fit (Ray does the same).
  const bool cpu_only = gpu_units(need) == 0;
  const bool any_plain = cpu_only && std::any_of(fit.begin(), fit.end(), [](const node* n) {
                           return n->gpus.empty();
                         });
  node* packed = nullptr;  // the busiest node under the threshold
  node* spread = nullptr;  // the least busy node
  double packed_load = -1, spread_load = 0;
  for (auto* n : fit) {
    if (any_plain && !n->gpus.empty()) continue;
    // Past 1 when a report says more is in use than the node has (workers back from get
    // take their CPUs back even then): such a node still fits, and is the busiest.
    const double load = load_of(*n);
    if (load < spread_threshold_ && load > packed_load) {
      packed = n;
      packed_load = load;
    }
    if (spread == nullptr || load < spread_load) {
      spread = n;
      spread_load = load;
    }
  }
  return packed != nullptr ? *packed : *spread;
}

cluster_view::node& cluster_view::choose(const std::vector<node*>& fit,
                                         const protocol::resource_set& need,
                                         const protocol::placement& p,
                                         std::span<const node_bytes> locality) {
  using kind = scheduling_strategy::kind;
  if (fit.empty()) {
    // A caller's broken promise, not a state to carry on from with no node.
    std::fprintf(stderr, "celer: cluster_view::choose called with no node that fits\n");
    std::abort();
  }
  if (p.how == kind::spread) {
    node* chosen = fit.front();
    for (auto* n : fit) {
      if (index_.at(n->id) >= next_) {
        chosen = n;
        break;
      }
    }
    next_ = index_.at(chosen->id) + 1;
    return *chosen;
  }
  if (p.how == kind::speed_weighted && gpu_units(need) > 0) {
    node* best = fit.front();
    double best_finish = expected_finish(*best, need, p);
    for (auto* n : fit) {
      const double f = expected_finish(*n, need, p);
      if (f < best_finish) {
        best = n;
        best_finish = f;
      }
    }
    return *best;
  }
  return choose_hybrid(fit, need, locality);
}

std::string cluster_view::why_waiting(const std::vector<std::size_t>& could,
                                      const protocol::resource_set& need,
                                      const protocol::placement& p) const {
  std::string out = "waits for resources: it needs " + request_text(need, p) + "; the " +
                    std::to_string(could.size()) + " node(s) that can run it are busy";
  std::size_t shown = 0;
  for (const auto i : could) {
    const auto* n = &nodes_[i];
    if (shown == 3) {
      out += "; ...";
      break;
    }
    out += (shown == 0 ? " (" : "; ") + n->id.short_hex() + " has " + n->available.to_string() +
           " free, " + std::to_string(n->queued) + " waiting";
    ++shown;
  }
  return shown > 0 ? out + ")" : out;
}

cluster_view::survey cluster_view::look(const protocol::resource_set& need,
                                        const protocol::placement& p) const {
  survey out;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const auto& n = nodes_[i];
    if (!n.alive) continue;
    ++out.alive;
    if (!could_run(n, need, p)) {
      if (out.refusals.size() < 3) out.refusals.push_back(i);
      continue;
    }
    out.could.push_back(i);
    if (fits_now(n, need, p)) out.fit.push_back(i);
  }
  return out;
}

std::string cluster_view::never_text(const survey& s, const protocol::resource_set& need,
                                     const protocol::placement& p) const {
  if (s.alive == 0) return "the cluster has no live nodes";
  std::string why = "it needs " + request_text(need, p) + ", and none of the " +
                    std::to_string(s.alive) + " live node(s) can ever run it:";
  for (const auto i : s.refusals) {
    why += " node " + nodes_[i].id.short_hex() + " " + never_on(nodes_[i], need, p) + ";";
  }
  if (s.alive > s.refusals.size()) {
    why += " and " + std::to_string(s.alive - s.refusals.size()) + " more";
  } else {
    why.pop_back();
  }
  return why;
}

std::optional<cluster_view::decision> cluster_view::place_on_node(
  const protocol::resource_set& need, const protocol::placement& p) {
  auto* n = find(p.node);
  std::string why;
  if (n == nullptr) {
    why = "node " + p.node.short_hex() + " is not in the cluster";
  } else if (!n->alive) {
    why = "node " + p.node.short_hex() + " died";
  } else if (auto never = never_on(*n, need, p); !never.empty()) {
    why = "node " + p.node.short_hex() + " " + never;
  }
  if (!why.empty()) {
    if (p.soft) return std::nullopt;
    decision d;
    d.why = "it needs " + request_text(need, p) + " on node " + p.node.short_hex() + ", but " + why;
    return d;
  }
  if (fits_now(*n, need, p)) return take(*n, need, p);
  if (p.soft) return std::nullopt;  // busy: anywhere else that fits
  return enqueue(*n, need, "waits for node " + p.node.short_hex() + " (it has " +
                             n->available.to_string() + " free; it needs " +
                             request_text(need, p) + ")");
}

cluster_view::decision cluster_view::place(const protocol::resource_set& need,
                                           const protocol::placement& p,
                                           std::span<const node_bytes> locality) {
  using kind = scheduling_strategy::kind;
  if (p.how == kind::node_affinity) {
    if (auto d = place_on_node(need, p)) return std::move(*d);
  }
  auto s = look(need, p);
  if (s.could.empty()) {
    decision d;
    d.why = never_text(s, need, p);
    return d;
  }
  if (!s.fit.empty()) {
    std::vector<node*> fit;
    fit.reserve(s.fit.size());
    for (auto i : s.fit) fit.push_back(&nodes_[i]);
    return take(choose(fit, need, p, locality), need, p);
  }
  // Nothing is free now: wait where it should start soonest.
  node* wait = nullptr;
  if (p.how == kind::speed_weighted && gpu_units(need) > 0) {
    double best = 0;
    for (auto i : s.could) {
      auto* n = &nodes_[i];
      const double f = expected_finish(*n, need, p);
      if (wait == nullptr || f < best) {
        wait = n;
        best = f;
      }
    }
  } else if (p.how == kind::spread) {
    for (auto i : s.could) {
      if (wait == nullptr || nodes_[i].queued < wait->queued) wait = &nodes_[i];
    }
  } else {
    // The default: where the least work is ahead of it for the node's size.
    double best = 0;
    for (auto i : s.could) {
      const double b = backlog(nodes_[i], need, p);
      if (wait == nullptr || b < best) {
        wait = &nodes_[i];
        best = b;
      }
    }
  }
  return enqueue(*wait, need, why_waiting(s.could, need, p));
}

cluster_view::group_plan cluster_view::plan_group(
  const std::vector<protocol::bundle_spec>& bundles,
  bundle_strategy strategy) {
  group_plan out;
  const bool strict_pack = strategy == bundle_strategy::strict_pack;
  const bool strict_spread = strategy == bundle_strategy::strict_spread;
  auto fits_all = [&](node n) {  // on a copy
    for (const auto& [need, p] : bundles) {
      if (!could_run(n, need, p) || !fits_now(n, need, p)) return false;
      (void)take(n, need, p);
    }
    return true;
  };
  // Never: judged on empty nodes.
  std::size_t alive = 0, hosts = 0;
  for (const auto& n : nodes_) {
    if (!n.alive) continue;
    ++alive;
    node empty = n;
    empty.available = n.total;
    empty.gpus = device_pool(n.gpus.devices());
    if (strict_pack ? fits_all(empty) : std::any_of(bundles.begin(), bundles.end(), [&](const auto& b) {
          return could_run(n, b.need, b.where);
        })) {
      ++hosts;
    }
  }
  for (std::size_t i = 0; i < bundles.size() && !strict_pack; ++i) {
    survey s = look(bundles[i].need, bundles[i].where);
    if (s.could.empty()) {
      out.never = true;
      out.why = "bundle " + std::to_string(i) + " " + never_text(s, bundles[i].need, bundles[i].where);
      return out;
    }
  }
  if (strict_pack && hosts == 0) {
    out.never = true;
    out.why = "no node of the " + std::to_string(alive) + " live can ever hold all " +
              std::to_string(bundles.size()) + " bundles together (strict_pack)";
    return out;
  }
  if (strict_spread && hosts < bundles.size()) {
    out.never = true;
    out.why = std::to_string(bundles.size()) + " bundles need as many nodes (strict_spread), but " +
              "only " + std::to_string(hosts) + " of the " + std::to_string(alive) +
              " live can hold one";
    return out;
  }
  // Now: tried on a copy of the view, kept only if every bundle found a node.
  auto trial = nodes_;
  std::vector<std::size_t> where;
  auto least_loaded = [&](std::size_t b, auto&& allowed) {
    std::size_t best = trial.size();
    for (std::size_t i = 0; i < trial.size(); ++i) {
      auto& n = trial[i];
      if (!n.alive || !allowed(i) || !could_run(n, bundles[b].need, bundles[b].where) ||
          !fits_now(n, bundles[b].need, bundles[b].where)) {
        continue;
      }
      if (best == trial.size() || load_of(n) < load_of(trial[best])) best = i;
    }
    return best;
  };
  auto used = [&](std::size_t i) { return std::find(where.begin(), where.end(), i) != where.end(); };
  if (strategy == bundle_strategy::pack || strict_pack) {
    // One node for all, the least loaded that holds them.
    for (std::size_t i = 0; i < trial.size() && where.empty(); ++i) {
      if (!trial[i].alive) continue;
      node copy = trial[i];
      if (fits_all(copy)) where.assign(bundles.size(), i);
    }
  }
  if (where.empty() && !strict_pack) {
    for (std::size_t b = 0; b < bundles.size(); ++b) {
      std::size_t i = trial.size();
      if (strategy == bundle_strategy::pack) i = least_loaded(b, used);
      if (i == trial.size()) i = least_loaded(b, [&](std::size_t k) { return !used(k); });
      if (i == trial.size() && strategy == bundle_strategy::spread) i = least_loaded(b, used);
      if (i == trial.size() && strategy == bundle_strategy::pack) {
        i = least_loaded(b, [](std::size_t) { return true; });
      }
      if (i == trial.size()) {
        where.clear();
        break;
      }
      (void)take(trial[i], bundles[b].need, bundles[b].where);
      where.push_back(i);
    }
  }
  if (where.size() != bundles.size()) {
    out.why = "waits for resources: the " + std::to_string(bundles.size()) +
              " bundles do not all fit the nodes' free resources now";
    return out;
  }
  for (std::size_t b = 0; b < bundles.size(); ++b) {
    (void)take(nodes_[where[b]], bundles[b].need, bundles[b].where);
    out.nodes.push_back(nodes_[where[b]].id);
  }
  return out;
}

std::string cluster_view::explain(const protocol::resource_set& need,
                                  const protocol::placement& p) const {
  if (p.how == scheduling_strategy::kind::node_affinity && !p.soft) {
    const auto* n = find(p.node);
    if (n == nullptr || !n->alive) return "node " + p.node.short_hex() + " is not a live node";
    if (auto never = never_on(*n, need, p); !never.empty()) return "node " + p.node.short_hex() + " " + never;
    if (fits_now(*n, need, p)) return {};
    return "waits for node " + p.node.short_hex() + " (it has " + n->available.to_string() +
           " free; it needs " + request_text(need, p) + ")";
  }
  auto s = look(need, p);
  if (s.could.empty()) return never_text(s, need, p);
  if (!s.fit.empty()) return {};
  return why_waiting(s.could, need, p);
}

std::vector<bool> pick_victims(std::size_t count,
                               const std::function<bool(const std::vector<bool>&)>& room) {
  std::vector<bool> chosen(count, false);
  std::size_t last = count;
  for (std::size_t i = 0; i < count; ++i) {
    chosen[i] = true;
    if (room(chosen)) {
      last = i;
      break;
    }
  }
  if (last == count) return std::vector<bool>(count, false);
  for (std::size_t i = last; i-- > 0;) {
    chosen[i] = false;
    if (!room(chosen)) chosen[i] = true;
  }
  return chosen;
}

} // namespace celer::scheduling
