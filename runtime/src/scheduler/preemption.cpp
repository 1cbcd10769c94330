// The head's side of preemption: which node a waiting request should make room on, over the
// preemptible actors grouped by node once (set_preemptible), not per choice.
#include "scheduler/cluster_view.hpp"

#include <algorithm>
#include <numeric>

namespace celer::scheduling {

cluster_view::victim_groups cluster_view::group_victims(std::span<const preemptible> actors) const {
  victim_groups g;
  // Which slot each actor's node is (actors on nodes the view does not know are left out).
  std::vector<std::pair<std::uint32_t, const preemptible*>> known;
  known.reserve(actors.size());
  for (const auto& a : actors) {
    const auto it = index_.find(a.node);
    if (it != index_.end()) known.emplace_back(static_cast<std::uint32_t>(it->second), &a);
    for (const auto& [name, v] : a.holds.amounts) {
      if (std::find(g.names.begin(), g.names.end(), name) == g.names.end()) g.names.push_back(name);
    }
  }
  // By node, then as the node agent goes: lowest priority first, then the latest started.
  std::sort(known.begin(), known.end(), [](const auto& x, const auto& y) {
    if (x.first != y.first) return x.first < y.first;
    if (x.second->priority != y.second->priority) return x.second->priority < y.second->priority;
    return x.second->started > y.second->started;
  });
  g.victims.reserve(known.size());
  g.holds.reserve(known.size() * g.names.size());
  for (const auto& [slot, a] : known) {
    if (g.groups.empty() || g.groups.back().slot != slot) {
      g.groups.push_back({slot, static_cast<std::uint32_t>(g.victims.size()), 0});
    }
    ++g.groups.back().count;
    victim_groups::victim v;
    v.priority = a->priority;
    v.started = a->started;
    v.first_share = static_cast<std::uint32_t>(g.shares.size());
    v.share_count = static_cast<std::uint32_t>(a->gpus.size());
    g.shares.insert(g.shares.end(), a->gpus.begin(), a->gpus.end());
    for (const auto& name : g.names) g.holds.push_back(a->holds.units(name));
    g.victims.push_back(v);
  }
  return g;
}

void cluster_view::set_preemptible(std::span<const preemptible> actors) {
  preemptible_ = group_victims(actors);
}

std::optional<node_id> cluster_view::preemption_target(const protocol::resource_set& need,
                                                       const protocol::placement& p,
                                                       std::int32_t priority) const {
  return preemption_target(need, p, priority, preemptible_);
}

std::optional<node_id> cluster_view::preemption_target(const protocol::resource_set& need,
                                                       const protocol::placement& p,
                                                       std::int32_t priority,
                                                       std::span<const preemptible> actors) const {
  return preemption_target(need, p, priority, group_victims(actors));
}

std::optional<node_id> cluster_view::preemption_target(const protocol::resource_set& need,
                                                       const protocol::placement& p,
                                                       std::int32_t priority,
                                                       const victim_groups& g) const {
  if (g.groups.empty()) return std::nullopt;
  const auto& c = candidates_for(need, p);
  if (c.could.empty()) return std::nullopt;
  const bool pinned = p.how == scheduling_strategy::kind::node_affinity && !p.soft;
  // The request's amounts, and where each is among the victims' (npos: none holds it).
  const std::size_t names = g.names.size();
  std::vector<std::int64_t> wanted;
  std::vector<std::size_t> column;
  for (const auto& [name, v] : need.amounts) {
    wanted.push_back(v);
    const auto it = std::find(g.names.begin(), g.names.end(), name);
    column.push_back(it == g.names.end() ? names : static_cast<std::size_t>(it - g.names.begin()));
  }
  const auto hold = [&](std::size_t victim, std::size_t k) {
    return column[k] == names ? std::int64_t{0} : g.holds[victim * names + column[k]];
  };
  std::optional<node_id> best;
  std::size_t best_count = 0;
  std::int32_t best_top = 0;
  std::vector<std::int64_t> short_by(wanted.size());  // per amount, what the node lacks
  std::vector<protocol::gpu_share> shares;            // what the chosen give back
  for (const auto& grp : g.groups) {
    const auto* first = g.victims.data() + grp.first;
    // Those of lower priority: a prefix, as each group is ordered lowest first.
    const auto count = static_cast<std::size_t>(
      std::partition_point(first, first + grp.count,
                           [&](const victim_groups::victim& v) { return v.priority < priority; }) -
      first);
    if (count == 0) continue;
    // Stopping k of them leaves the highest priority among them at least first[k-1]'s, so
    // against the best so far (best_count, best_top) this node can win with best_count
    // stopped only if first[best_count-1] is below best_top; otherwise it needs fewer.
    const bool needs_fewer = best && (best_count > count || first[best_count - 1].priority >= best_top);
    if (best && best_count == 1 && needs_fewer) continue;
    if (!c.has(grp.slot)) continue;
    const auto& n = nodes_[grp.slot];
    if (pinned && p.node != n.id) continue;
    // Amounts only: what is lacking, whether all of them together cover it, and the fewest
    // that could (the lack over the largest single holding).
    bool enough = true;
    std::size_t fewest = 1;
    for (std::size_t k = 0; k < wanted.size() && enough; ++k) {
      const auto id = c.need[k].first;  // c.need lists need.amounts in the same order
      const auto& have = free_units_[grp.slot];
      short_by[k] = wanted[k] - (id < have.size() ? have[id] : 0);
      if (short_by[k] <= 0) continue;
      std::int64_t all = 0, largest = 0;
      for (std::size_t v = 0; v < count; ++v) {
        const auto h = hold(grp.first + v, k);
        all += h;
        largest = std::max(largest, h);
      }
      enough = all >= short_by[k];
      if (enough) {
        fewest = std::max(fewest, static_cast<std::size_t>((short_by[k] + largest - 1) / largest));
      }
    }
    if (!enough) continue;
    if (best && (fewest > best_count || (fewest == best_count && needs_fewer))) continue;
    if (fits(grp.slot, c, p)) continue;  // room already (the view was behind)
    const auto chosen = pick_victims(count, [&](const std::vector<bool>& set) {
      for (std::size_t k = 0; k < wanted.size(); ++k) {
        std::int64_t freed = 0;
        for (std::size_t v = 0; v < count; ++v) {
          if (set[v]) freed += hold(grp.first + v, k);
        }
        if (freed < short_by[k]) return false;
      }
      shares.clear();
      for (std::size_t v = 0; v < count; ++v) {
        if (!set[v]) continue;
        const auto& s = first[v];
        shares.insert(shares.end(), g.shares.begin() + s.first_share,
                      g.shares.begin() + s.first_share + s.share_count);
      }
      return n.gpus.fits_after(c.units, p, shares);
    });
    std::size_t stopped = 0;
    std::int32_t top = 0;
    for (std::size_t v = 0; v < count; ++v) {
      if (!chosen[v]) continue;
      top = stopped == 0 ? first[v].priority : std::max(top, first[v].priority);
      ++stopped;
    }
    if (stopped == 0) continue;
    if (!best || stopped < best_count || (stopped == best_count && top < best_top)) {
      best = n.id;
      best_count = stopped;
      best_top = top;
    }
  }
  return best;
}

} // namespace celer::scheduling
