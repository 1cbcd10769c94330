// The cluster view's indexes and the choices made through them: candidates cached per
// request shape, live nodes ordered by load, and each policy's walk over them. Every choice
// here is the one a scan of all the nodes would make (scheduler_index_test compares them).
#include "scheduler/cluster_view.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <limits>

namespace celer::scheduling {
namespace {

std::int64_t gpu_units(const protocol::resource_set& need) { return need.units(protocol::gpu); }

/// Past this many cached shapes the cache starts over (a shape's entry is about 4.5 bytes a
/// node; clients send few shapes, but nothing stops one from sending a new one each time).
constexpr std::size_t max_shapes = 1024;

void append_text(std::string& out, const std::string& s) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, s.size());
  out.append(buf, r.ptr);
  out += ':';
  out += s;
}

template <class Int>
void append_number(std::string& out, Int v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
  out += ';';
}

/// What could_run() depends on, as one string: amounts, GPU constraint, label selectors
/// (strings length-prefixed, so no two shapes share a key). Written into `key`, whose
/// capacity is reused from one decision to the next.
void shape_key(std::string& key, const protocol::resource_set& need, const protocol::placement& p) {
  key.clear();
  for (const auto& [name, v] : need.amounts) {
    append_text(key, name);
    append_number(key, v);
  }
  key += '|';
  append_text(key, p.accelerator_type);
  append_number(key, p.gpu_memory_bytes);
  for (const auto& s : p.labels) {
    append_text(key, s.key);
    append_number(key, static_cast<int>(s.op));
    append_number(key, s.values.size());
    for (const auto& v : s.values) append_text(key, v);
  }
}

} // namespace

const cluster_view::candidates& cluster_view::candidates_for(const protocol::resource_set& need,
                                                             const protocol::placement& p) const {
  shape_key(key_, need, p);
  if (const auto it = shapes_.find(key_); it != shapes_.end()) return it->second;
  if (shapes_.size() >= max_shapes) shapes_.clear();
  candidates c;
  c.bits.assign((nodes_.size() + 63) / 64, 0);
  for (const auto& [name, v] : need.amounts) c.need.emplace_back(name_id(name), v);
  c.units = gpu_units(need);
  if (c.units > 0) {
    c.speed.assign(nodes_.size(), 0);
    c.accepted.assign(nodes_.size(), 0);
    c.wide.assign(nodes_.size(), false);
  }
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const auto& n = nodes_[i];
    if (!n.alive) continue;
    if (!could_run(n, need, p)) {
      if (c.refusals.size() < 3) c.refusals.push_back(static_cast<std::uint32_t>(i));
      continue;
    }
    c.could.push_back(static_cast<std::uint32_t>(i));
    c.bits[i / 64] |= std::uint64_t{1} << (i % 64);
    if (c.units > 0) {
      c.speed[i] = n.gpus.speed_of(p);
      c.accepted[i] = n.gpus.accepted_mask(p);
      c.wide[i] = n.gpus.devices().size() > 64;
    }
  }
  return shapes_.emplace(key_, std::move(c)).first->second;
}

std::uint32_t cluster_view::name_id(const std::string& name) const {
  const auto [it, fresh] = name_ids_.try_emplace(name, static_cast<std::uint32_t>(names_.size()));
  if (fresh) names_.push_back(name);
  return it->second;
}

bool cluster_view::fits(std::size_t slot, const candidates& c, const protocol::placement& p) const {
  const auto& have = free_units_[slot];
  for (const auto& [id, v] : c.need) {
    if (v > (id < have.size() ? have[id] : 0)) return false;
  }
  // No GPU units: a candidate has the matching device a GPU constraint asks for (could_run).
  if (c.units == 0) return true;
  if (c.wide[slot]) return nodes_[slot].gpus.fits(c.units, p);
  // As device_pool::fits, over the accepted devices' free units in rows_.
  constexpr auto whole = protocol::resource_unit;
  const auto* free = rows_.data() + slot * row_size_ + 3;
  if (c.units <= whole) {
    for (auto m = c.accepted[slot]; m != 0; m &= m - 1) {
      if (std::min(whole, free[std::countr_zero(m)]) >= c.units) return true;
    }
    return false;
  }
  std::int64_t free_whole = 0;
  for (auto m = c.accepted[slot]; m != 0; m &= m - 1) {
    if (free[std::countr_zero(m)] >= whole) free_whole += whole;
  }
  return free_whole >= c.units;
}

void cluster_view::sync_row(std::size_t slot) {
  if (rows_.size() < (slot + 1) * row_size_) return;  // add_node sizes them next
  const auto& n = nodes_[slot];
  auto* row = rows_.data() + slot * row_size_;
  row[0] = n.queued;
  row[1] = n.queued_gpus;
  row[2] = n.total.units(protocol::cpu);
  const auto& free = n.gpus.free();
  for (std::size_t i = 3; i < row_size_; ++i) row[i] = i - 3 < free.size() ? free[i - 3] : 0;
}

void cluster_view::reindex(std::size_t slot) {
  sync_row(slot);
  const auto& n = nodes_[slot];
  auto& row = free_units_[slot];
  std::fill(row.begin(), row.end(), 0);
  for (const auto& [name, v] : n.available.amounts) {
    const auto id = name_id(name);
    if (id >= row.size()) row.resize(id + 1, 0);
    row[id] = v;
  }
  auto& k = keys_[slot];
  if (k.indexed) {
    auto handle = by_load_[k.set].extract({k.load, static_cast<std::uint32_t>(slot)});
    k.indexed = false;
    if (n.alive && !handle.empty()) {
      // Reuses the set's node: no allocation for the common change (a node's free amounts).
      k.load = load_of(n);
      k.set = n.gpus.empty() ? 0 : 1;
      handle.value() = {k.load, static_cast<std::uint32_t>(slot)};
      by_load_[k.set].insert(std::move(handle));
      k.indexed = true;
      return;
    }
  }
  if (!n.alive) return;
  k.load = load_of(n);
  k.set = n.gpus.empty() ? 0 : 1;
  by_load_[k.set].emplace(k.load, static_cast<std::uint32_t>(slot));
  k.indexed = true;
}

std::size_t cluster_view::choose(const candidates& c, const protocol::resource_set& need,
                                 const protocol::placement& p,
                                 std::span<const node_bytes> locality) {
  using kind = scheduling_strategy::kind;
  if (p.how == kind::spread) {
    const auto slot = choose_spread(c, p);
    if (slot < nodes_.size()) next_ = slot + 1;
    return slot;
  }
  if (p.how == kind::speed_weighted && gpu_units(need) > 0) return choose_by_speed(c, p);
  return choose_hybrid(c, need, p, locality);
}

std::size_t cluster_view::choose_spread(const candidates& c, const protocol::placement& p) const {
  // Round robin: the first candidate that fits from next_ on, wrapping around.
  const auto from = std::lower_bound(c.could.begin(), c.could.end(), next_);
  for (auto it = from; it != c.could.end(); ++it) {
    if (fits(*it, c, p)) return *it;
  }
  for (auto it = c.could.begin(); it != from; ++it) {
    if (fits(*it, c, p)) return *it;
  }
  return nodes_.size();
}

std::int64_t cluster_view::busy_at(const candidates& c, std::size_t slot,
                                   const protocol::placement& p) const {
  if (c.wide[slot]) return nodes_[slot].gpus.busy_of(p);
  const auto* free = rows_.data() + slot * row_size_ + 3;
  std::int64_t sum = 0;
  for (auto m = c.accepted[slot]; m != 0; m &= m - 1) {
    sum += protocol::resource_unit - free[std::countr_zero(m)];
  }
  return sum;
}

std::size_t cluster_view::choose_by_speed(const candidates& c, const protocol::placement& p) const {
  // The earliest expected finish, (busy + queued + need) / speed, first in slot order on
  // ties. Every candidate's finish is compared (cheap: cached speeds and device masks over
  // rows_, read in order); whether it fits is asked only of one that would be the new best.
  std::size_t best = nodes_.size();
  double best_finish = 0;
  for (const auto slot : c.could) {
    const auto queued_gpus = rows_[slot * row_size_ + 1];
    const double finish =
      c.speed[slot] <= 0
        ? std::numeric_limits<double>::infinity()
        : static_cast<double>(busy_at(c, slot, p) + queued_gpus + c.units) / c.speed[slot];
    if (best < nodes_.size() && !(finish < best_finish)) continue;
    if (!fits(slot, c, p)) continue;
    best = slot;
    best_finish = finish;
  }
  return best;
}

std::size_t cluster_view::pack_or_spread(const std::set<std::pair<double, std::uint32_t>>& by_load,
                                         const candidates& c, const protocol::placement& p) const {
  // Pack: the busiest candidate that fits under the threshold, walking down from it (on
  // equal loads the lowest slot, which the walk down meets last).
  std::size_t packed = nodes_.size();
  double packed_load = 0;
  for (auto it = by_load.lower_bound({spread_threshold_, 0}); it != by_load.begin();) {
    --it;
    if (packed < nodes_.size() && it->first < packed_load) break;
    if (!c.has(it->second) || !fits(it->second, c, p)) continue;
    packed = it->second;
    packed_load = it->first;
  }
  if (packed < nodes_.size()) return packed;
  // Spread: the least loaded candidate that fits (past 1 when a report says more is in use
  // than the node has: such a node still fits, and comes last).
  for (const auto& [load, slot] : by_load) {
    if (c.has(slot) && fits(slot, c, p)) return slot;
  }
  return nodes_.size();
}

std::size_t cluster_view::choose_hybrid(const candidates& c, const protocol::resource_set& need,
                                        const protocol::placement& p,
                                        std::span<const node_bytes> locality) const {
  // The node holding most of the arguments' bytes, if any that fits holds some.
  std::size_t local = nodes_.size();
  std::uint64_t most = 0;
  for (const auto& l : locality) {
    if (l.bytes <= most) continue;
    const auto it = index_.find(l.node);
    if (it == index_.end() || !c.has(it->second) || !fits(it->second, c, p)) continue;
    local = it->second;
    most = l.bytes;
  }
  if (local < nodes_.size()) return local;
  // Work that needs no GPU keeps off GPU nodes while other nodes fit (Ray does the same).
  // Work that needs GPUs fits only on nodes that have them.
  if (gpu_units(need) == 0) {
    if (const auto plain = pack_or_spread(by_load_[0], c, p); plain < nodes_.size()) {
      return plain;
    }
  }
  return pack_or_spread(by_load_[1], c, p);
}

std::size_t cluster_view::choose_wait(const candidates& c, const protocol::placement& p) const {
  using kind = scheduling_strategy::kind;
  // A scan of the candidates, as the request waits anyway (a few percent of decisions on
  // a busy cluster); first in slot order on ties.
  std::size_t wait = nodes_.size();
  double best = 0;
  for (const auto slot : c.could) {
    const auto* row = rows_.data() + slot * row_size_;  // queued, queued GPU units, CPU units
    double key = 0;
    if (p.how == kind::speed_weighted && c.units > 0) {
      key = c.speed[slot] <= 0
              ? std::numeric_limits<double>::infinity()
              : static_cast<double>(busy_at(c, slot, p) + row[1] + c.units) / c.speed[slot];
    } else if (p.how == kind::spread) {
      key = static_cast<double>(row[0]);
    } else if (c.units > 0) {
      // The default: where the least work is ahead of it for the node's size; for GPU work
      // (units in use + queued + this) over the accepted devices' units.
      const auto count = c.wide[slot] ? nodes_[slot].gpus.count_of(p)
                                      : static_cast<std::size_t>(std::popcount(c.accepted[slot]));
      const auto devices = static_cast<double>(count) * protocol::resource_unit;
      key = static_cast<double>(busy_at(c, slot, p) + row[1] + c.units) / std::max(devices, 1.0);
    } else {
      // Otherwise (requests waiting + 1) over its CPUs.
      const double cpus = static_cast<double>(row[2]) / protocol::resource_unit;
      key = (static_cast<double>(row[0]) + 1) / std::max(cpus, 1.0);
    }
    if (wait == nodes_.size() || key < best) {
      wait = slot;
      best = key;
    }
  }
  return wait;
}

} // namespace celer::scheduling
