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
  if (fresh) {
    nodes_.emplace_back();
    keys_.emplace_back();
    free_units_.emplace_back();
  }
  auto& n = nodes_[it->second];
  if (!n.alive || fresh) ++alive_;
  n.id = id;
  n.available = total;
  n.total = std::move(total);
  n.labels = std::move(labels);
  n.gpus = device_pool(std::move(gpus));
  n.queued = 0;
  n.queued_gpus = 0;
  n.alive = true;
  forget_shapes();
  // Rows long enough for its devices (those past 64 are counted by the pool itself).
  const auto row_size = 3 + std::min<std::size_t>(64, n.gpus.devices().size());
  if (row_size > row_size_) {
    row_size_ = row_size;
    rows_.assign(nodes_.size() * row_size_, 0);
    for (std::size_t i = 0; i < nodes_.size(); ++i) sync_row(i);
  }
  rows_.resize(nodes_.size() * row_size_, 0);
  reindex(it->second);
  return n;
}

void cluster_view::mark_dead(const node_id& id) {
  const auto it = index_.find(id);
  if (it == index_.end() || !nodes_[it->second].alive) return;
  nodes_[it->second].alive = false;
  --alive_;
  forget_shapes();
  reindex(it->second);
}

const cluster_view::node* cluster_view::find(const node_id& id) const {
  const auto it = index_.find(id);
  return it == index_.end() ? nullptr : &nodes_[it->second];
}

void cluster_view::refresh(const node_id& id, const protocol::resource_set& available,
                           const std::vector<std::int64_t>& gpu_free, std::uint32_t queued,
                           std::int64_t queued_gpus) {
  const auto it = index_.find(id);
  if (it == index_.end()) return;
  auto& n = nodes_[it->second];
  n.available = available;
  n.gpus.set_free(gpu_free);
  n.queued = queued;
  n.queued_gpus = queued_gpus;
  reindex(it->second);
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

cluster_view::decision cluster_view::take_at(std::size_t slot, const protocol::resource_set& need,
                                             const protocol::placement& p) {
  auto d = take(nodes_[slot], need, p);
  reindex(slot);
  return d;
}

cluster_view::decision cluster_view::enqueue(node& n, const protocol::resource_set& need,
                                             std::string why) {
  ++n.queued;
  n.queued_gpus += gpu_units(need);
  sync_row(static_cast<std::size_t>(&n - nodes_.data()));
  decision d;
  d.target = n.id;
  d.why = std::move(why);
  return d;
}

void cluster_view::release(const node_id& id, const protocol::resource_set& need,
                           const std::vector<protocol::gpu_share>& gpus) {
  const auto it = index_.find(id);
  if (it == index_.end()) return;
  auto& n = nodes_[it->second];
  n.available.add(need);
  n.gpus.give_back(gpus);
  reindex(it->second);
}

void cluster_view::dequeue(const node_id& id, const protocol::resource_set& need) {
  const auto it = index_.find(id);
  if (it == index_.end()) return;
  auto& n = nodes_[it->second];
  if (n.queued > 0) --n.queued;
  n.queued_gpus = std::max<std::int64_t>(0, n.queued_gpus - gpu_units(need));
  sync_row(it->second);
}

void cluster_view::move_waiting(const node_id& from, const node_id& to,
                                const protocol::resource_set& need) {
  dequeue(from, need);
  const auto it = index_.find(to);
  if (it != index_.end()) (void)enqueue(nodes_[it->second], need, {});
}

std::string cluster_view::why_waiting(const std::vector<std::uint32_t>& could,
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

std::string cluster_view::never_text(const candidates& c, const protocol::resource_set& need,
                                     const protocol::placement& p) const {
  if (alive_ == 0) return "the cluster has no live nodes";
  std::string why = "it needs " + request_text(need, p) + ", and none of the " +
                    std::to_string(alive_) + " live node(s) can ever run it:";
  for (const auto i : c.refusals) {
    why += " node " + nodes_[i].id.short_hex() + " " + never_on(nodes_[i], need, p) + ";";
  }
  if (alive_ > c.refusals.size()) {
    why += " and " + std::to_string(alive_ - c.refusals.size()) + " more";
  } else {
    why.pop_back();
  }
  return why;
}

std::optional<cluster_view::decision> cluster_view::place_on_node(
  const protocol::resource_set& need, const protocol::placement& p) {
  const auto it = index_.find(p.node);
  node* n = it == index_.end() ? nullptr : &nodes_[it->second];
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
  if (fits_now(*n, need, p)) return take_at(it->second, need, p);
  if (p.soft) return std::nullopt;  // busy: anywhere else that fits
  return enqueue(*n, need, "waits for node " + p.node.short_hex() + " (it has " +
                             n->available.to_string() + " free; it needs " +
                             request_text(need, p) + ")");
}

cluster_view::decision cluster_view::place(const protocol::resource_set& need,
                                           const protocol::placement& p,
                                           std::span<const node_bytes> locality) {
  if (p.how == scheduling_strategy::kind::node_affinity) {
    if (auto d = place_on_node(need, p)) return std::move(*d);
  }
  const auto& c = candidates_for(need, p);
  if (c.could.empty()) {
    decision d;
    d.why = never_text(c, need, p);
    return d;
  }
  if (const auto slot = choose(c, need, p, locality); slot < nodes_.size()) {
    return take_at(slot, need, p);
  }
  // Nothing is free now: wait where it should start soonest.
  auto why = why_waiting(c.could, need, p);
  return enqueue(nodes_[choose_wait(c, p)], need, std::move(why));
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
    const auto& c = candidates_for(bundles[i].need, bundles[i].where);
    if (c.could.empty()) {
      out.never = true;
      out.why = "bundle " + std::to_string(i) + " " + never_text(c, bundles[i].need, bundles[i].where);
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
    (void)take_at(where[b], bundles[b].need, bundles[b].where);
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
  const auto& c = candidates_for(need, p);
  if (c.could.empty()) return never_text(c, need, p);
  for (const auto i : c.could) {
    if (fits(i, c, p)) return {};
  }
  return why_waiting(c.could, need, p);
}

} // namespace celer::scheduling
