// The head's placement groups (placement_groups.hpp).
#include "head/placement_groups.hpp"

#include "log.hpp"

#include <algorithm>
#include <map>

namespace celer {

namespace {
/// Why a pending group waits while its nodes are asked to reserve its bundles.
constexpr const char* reserving = "its bundles are being reserved on the nodes the head chose";
} // namespace

placement_groups::placement_groups(transport& net, head_tables* tables, node_table& nodes,
                                   scheduling::cluster_view& view, head_guard& guard, head_events& events, hooks h)
  : net_(net), tables_(tables), nodes_(nodes), view_(view), guard_(guard), hooks_(std::move(h)) {
  events.on_node_died([this](const node_id& id, const std::string&) { node_died(id); });
  events.on_job_ended([this](const job_id& job) { job_ended(job); });
}

void placement_groups::persist(const group& g) {
  if (tables_ != nullptr) tables_->save_group(g.info);
}

void placement_groups::restore(std::vector<protocol::placement_group_info> rows) {
  for (auto& info : rows) {
    auto& g = groups_[info.id];
    g.info = std::move(info);
    if (g.info.state != protocol::group_state::pending) continue;
    // It was being reserved when the last head stopped: nodes may hold some of its
    // bundles. They give them back (a node that holds none ignores this), and the group
    // is laid out again on the next tick.
    nodes_.send_to_live(protocol::return_bundles{g.info.id, {}, "the head restarted while reserving it"});
    g.info.nodes.clear();
  }
}

void placement_groups::on(protocol::create_placement_group& m) {
  protocol::placement_group_reply reply;
  reply.request_id = m.request_id;
  if (groups_.contains(m.id)) {  // a retried request
    reply.ok = true;
    (void)net_.send(m.reply_to, std::move(reply));
    return;
  }
  if (const auto* taken = live_named(m.job, m.name); taken != nullptr) {
    // A name names one group: a second live one would make the name ambiguous.
    reply.fail = protocol::failure_info::make(
      detail::failure_kind::invalid_call, error_code::already_exists,
      "a placement group named '" + m.name + "' already exists (" + taken->info.id.short_hex() + ", " +
        (taken->info.state == protocol::group_state::created ? "created" : "pending") +
        "); remove it first, or give this one another name");
    (void)net_.send(m.reply_to, std::move(reply));
    return;
  }
  for (std::size_t i = 0; i < m.bundles.size(); ++i) {
    auto ok = guard_.check_amounts(m.bundles[i].need,
                                   "bundle " + std::to_string(i) + " of placement group " + m.id.short_hex(), m.job);
    if (!ok) {
      reply.fail = protocol::failure_info::make(detail::failure_kind::invalid_call, error_code::invalid_argument,
                                                ok.error().message());
      (void)net_.send(m.reply_to, std::move(reply));
      return;
    }
  }
  auto plan = view_.plan_group(m.bundles, m.strategy);
  if (plan.never || m.bundles.empty()) {
    reply.fail = protocol::failure_info::make(
      detail::failure_kind::infeasible, error_code::resource_exhausted,
      "placement group " + (m.name.empty() ? m.id.short_hex() : m.name) +
        (m.bundles.empty() ? " has no bundles" : " can never be placed: " + plan.why));
    (void)net_.send(m.reply_to, std::move(reply));
    return;
  }
  auto& g = groups_[m.id];
  g.info.id = m.id;
  g.info.name = m.name;
  g.info.strategy = m.strategy;
  g.info.job = m.job;
  g.info.bundles = std::move(m.bundles);
  g.info.why = plan.why.empty() ? std::string(reserving) : plan.why;
  persist(g);
  reply.ok = true;
  (void)net_.send(m.reply_to, std::move(reply));
  CELER_LOG(info, "head", "placement group " + m.id.short_hex() + " (" + std::to_string(g.info.bundles.size()) +
                            " bundles) asked for");
  if (!plan.nodes.empty()) {
    g.info.nodes = std::move(plan.nodes);
    try_reserve(g);
  }
}

void placement_groups::tick() {
  for (auto& [id, g] : groups_) {
    if (g.info.state == protocol::group_state::pending) try_reserve(g);
  }
}

void placement_groups::try_reserve(group& g) {
  if (g.info.state != protocol::group_state::pending || g.replies_due > 0) return;
  if (g.info.nodes.empty()) {
    auto plan = view_.plan_group(g.info.bundles, g.info.strategy);
    if (plan.nodes.empty()) {
      g.info.why = plan.why;
      return;
    }
    // The view is only an estimate: until the nodes say yes, the group still waits for the
    // reason it last heard (a node's refusal), not for nothing.
    if (g.info.why.empty()) g.info.why = reserving;
    g.info.nodes = std::move(plan.nodes);
  }
  // Phase one: every chosen node reserves its bundle (the view is only an estimate); the
  // group is created when all said yes, and what was reserved goes back if one said no.
  g.replies_due = g.info.bundles.size();
  g.reserved.assign(g.info.bundles.size(), false);
  g.answered.assign(g.info.bundles.size(), false);
  g.refusal.clear();
  for (std::size_t i = 0; i < g.info.bundles.size(); ++i) {
    protocol::reserve_bundle r{g.info.id, static_cast<std::int32_t>(i), g.info.bundles[i], g.info.job};
    if (!nodes_.send_to(g.info.nodes[i], std::move(r))) {
      protocol::bundle_reserved no{g.info.id, static_cast<std::int32_t>(i), g.info.nodes[i], false,
                                   "its node is unreachable"};
      on(no);
    }
  }
}

void placement_groups::on(protocol::bundle_reserved& m) {
  auto it = groups_.find(m.group);
  if (it == groups_.end() || it->second.info.state == protocol::group_state::removed) {
    // Removed meanwhile: the node gives the bundle back.
    if (m.ok) (void)nodes_.send_to(m.node, protocol::return_bundles{m.group, {m.index}, "removed"});
    return;
  }
  auto& g = it->second;
  if (g.replies_due == 0 || m.index < 0 || static_cast<std::size_t>(m.index) >= g.reserved.size() ||
      g.answered[static_cast<std::size_t>(m.index)]) {
    return;
  }
  g.answered[static_cast<std::size_t>(m.index)] = true;
  g.reserved[static_cast<std::size_t>(m.index)] = m.ok;
  if (!m.ok && g.refusal.empty()) {
    g.refusal = "node " + m.node.short_hex() + " refused bundle " + std::to_string(m.index) + ": " + m.why;
  }
  if (--g.replies_due > 0) return;
  if (std::all_of(g.reserved.begin(), g.reserved.end(), [](bool b) { return b; })) {
    g.info.state = protocol::group_state::created;
    g.info.why.clear();
    persist(g);
    CELER_LOG(info, "head", "placement group " + g.info.id.short_hex() + " created");
    release_waiting(g);
    return;
  }
  // All or nothing: the bundles that were reserved go back; it is tried again later.
  std::vector<std::int32_t> back;
  for (std::size_t i = 0; i < g.reserved.size(); ++i) {
    if (g.reserved[i]) back.push_back(static_cast<std::int32_t>(i));
  }
  return_bundles(g, back, "the group's other bundles could not be reserved");
  for (std::size_t i = 0; i < g.info.bundles.size(); ++i) {
    if (!g.reserved[i]) view_.release(g.info.nodes[i], g.info.bundles[i].need, {});
  }
  g.info.nodes.clear();
  g.info.why = "waits for resources: " + g.refusal;
}

void placement_groups::return_bundles(group& g, const std::vector<std::int32_t>& indices, const std::string& why) {
  std::map<node_id, std::vector<std::int32_t>> by_node;
  for (auto i : indices) by_node[g.info.nodes[static_cast<std::size_t>(i)]].push_back(i);
  for (auto& [nid, list] : by_node) {
    for (auto i : list) view_.release(nid, g.info.bundles[static_cast<std::size_t>(i)].need, {});
    (void)nodes_.send_to(nid, protocol::return_bundles{g.info.id, std::move(list), why});
  }
}

void placement_groups::remove(group& g, const std::string& why) {
  if (g.info.state == protocol::group_state::removed) return;
  // Created: every bundle goes back. Reserving: those already reserved go back now, the
  // others when their node answers (on(bundle_reserved) sees the group removed).
  std::vector<std::int32_t> held;
  for (std::size_t i = 0; i < g.info.nodes.size(); ++i) {
    const bool reserved = g.info.state == protocol::group_state::created ||
                          (g.replies_due > 0 && i < g.reserved.size() && g.reserved[i]);
    if (reserved) held.push_back(static_cast<std::int32_t>(i));
  }
  return_bundles(g, held, why);
  g.info.state = protocol::group_state::removed;
  g.info.why = why;
  g.replies_due = 0;
  persist(g);
  release_waiting(g);
  if (hooks_.removed) hooks_.removed(g.info.id, why);  // its actors are gone with their bundles
}

void placement_groups::release_waiting(group& g) {
  auto leases = std::move(g.leases);
  auto actors = std::move(g.actors);
  g.leases.clear();
  g.actors.clear();
  if (hooks_.released && (!leases.empty() || !actors.empty())) hooks_.released(std::move(leases), std::move(actors));
}

void placement_groups::wait_for(protocol::request_lease m) { groups_.at(m.spec.where.group).leases.push_back(std::move(m)); }

void placement_groups::wait_for(protocol::task_spec actor) {
  if (auto it = groups_.find(actor.where.group); it != groups_.end()) it->second.actors.push_back(std::move(actor));
}

bool placement_groups::may_use(const protocol::task_spec& spec) {
  if (spec.where.how != scheduling_strategy::kind::placement_group || spec.job.nil()) return true;
  auto it = groups_.find(spec.where.group);
  // Unknown: route says so. A group of no job is the cluster's own.
  if (it == groups_.end() || it->second.info.job.nil()) return true;
  return guard_.owned_by_sender(spec.job, it->second.info.job,
                                "running " + spec.function + " in placement group " + spec.where.group.short_hex());
}

node_table::entry* placement_groups::route(protocol::task_spec& spec, std::string& why, bool& never) {
  never = true;
  auto it = groups_.find(spec.where.group);
  if (it == groups_.end()) {
    why = "placement group " + spec.where.group.short_hex() + " is not known to the cluster";
    return nullptr;
  }
  auto& g = it->second;
  if (!spec.job.nil() && !g.info.job.nil() && g.info.job != spec.job) {  // may_use refused it earlier, logged
    why = "permission_denied: placement group " + spec.where.group.short_hex() + " belongs to another job";
    return nullptr;
  }
  if (g.info.state == protocol::group_state::removed) {
    why = "placement group " + spec.where.group.short_hex() + " was " + g.info.why;
    return nullptr;
  }
  const auto& bundles = g.info.bundles;
  auto fits = [&](std::size_t b) {
    protocol::resource_set need = spec.resources;
    for (auto a = need.amounts.begin(); a != need.amounts.end();) {
      a = a->first.starts_with("node:") ? need.amounts.erase(a) : std::next(a);
    }
    return bundles[b].need.covers(need);
  };
  if (spec.where.bundle >= static_cast<std::int32_t>(bundles.size())) {
    why = "placement group " + spec.where.group.short_hex() + " has " + std::to_string(bundles.size()) +
          " bundles; there is no bundle " + std::to_string(spec.where.bundle);
    return nullptr;
  }
  std::size_t chosen = bundles.size();
  if (spec.where.bundle >= 0) {
    chosen = static_cast<std::size_t>(spec.where.bundle);
    if (!fits(chosen)) chosen = bundles.size();
  } else {
    for (std::size_t k = 0; k < bundles.size(); ++k) {
      const std::size_t b = (g.next_bundle + k) % bundles.size();
      if (fits(b)) {
        chosen = b;
        g.next_bundle = b + 1;
        break;
      }
    }
  }
  if (chosen == bundles.size()) {
    why = "it needs " + spec.resources.to_string() + ", more than " +
          (spec.where.bundle >= 0 ? "bundle " + std::to_string(spec.where.bundle) : std::string("any bundle")) +
          " of placement group " + spec.where.group.short_hex() + " reserves";
    return nullptr;
  }
  never = false;
  if (g.info.state != protocol::group_state::created) {
    why = "waits for its placement group " + spec.where.group.short_hex() + " (" + g.info.why + ")";
    return nullptr;
  }
  spec.where.bundle = static_cast<std::int32_t>(chosen);
  auto* n = nodes_.find(g.info.nodes[chosen]);
  if (n == nullptr) {
    never = true;
    why = "the node of its bundle is gone";
    return nullptr;
  }
  return n;
}

std::string placement_groups::explain(const protocol::resource_set& need, const protocol::placement& where) const {
  // Work in a group waits for its group, or for room in its bundle (which the node, not
  // the head, accounts): the nodes' free resources say nothing about it.
  const std::string group = "placement group " + where.group.short_hex();
  const auto it = groups_.find(where.group);
  if (it == groups_.end()) return group + " is not known to the cluster";
  const auto& g = it->second;
  switch (g.info.state) {
    case protocol::group_state::removed: return group + " was " + g.info.why;
    case protocol::group_state::pending: return "waits for its " + group + " to be reserved (" + g.info.why + ")";
    case protocol::group_state::created: break;
  }
  if (where.bundle < 0 || static_cast<std::size_t>(where.bundle) >= g.info.bundles.size()) {
    return "waits for room in a bundle of " + group;
  }
  const auto b = static_cast<std::size_t>(where.bundle);
  return "waits for room in bundle " + std::to_string(b) + " of " + group + " on node " + g.info.nodes[b].short_hex() +
         ": it needs " + need.to_string() + " of the " + g.info.bundles[b].need.to_string() +
         " the bundle reserves, and work already in the bundle holds the rest";
}

const placement_groups::group* placement_groups::live_named(const job_id& job, const std::string& name) const {
  if (name.empty()) return nullptr;
  // Linear: groups are made rarely and few live at once; no index to keep in step.
  for (const auto& [id, g] : groups_) {
    if (g.info.job == job && g.info.name == name && g.info.state != protocol::group_state::removed) return &g;
  }
  return nullptr;
}

const protocol::placement_group_info* placement_groups::find(const placement_group_id& id) const {
  auto it = groups_.find(id);
  return it == groups_.end() ? nullptr : &it->second.info;
}

void placement_groups::fill(head_snapshot& s) const {
  s.groups.reserve(groups_.size());
  for (const auto& [id, g] : groups_) s.groups.push_back(g.info);
}

void placement_groups::on(protocol::remove_placement_group& m) {
  auto it = groups_.find(m.id);
  if (it == groups_.end()) return;
  if (!guard_.owned_by_sender(m.sender_job, it->second.info.job, "placement group " + m.id.short_hex())) return;
  remove(it->second, "removed");
}

void placement_groups::on(protocol::placement_group_query& m) {
  protocol::placement_group_list r;
  r.request_id = m.request_id;
  // A job is shown its own groups only (the head and nodes, nil sender_job, all of them).
  for (const auto& [id, g] : groups_) {
    if ((m.id.nil() || m.id == id) && (m.sender_job.nil() || g.info.job == m.sender_job)) r.groups.push_back(g.info);
  }
  (void)net_.send(m.reply_to, std::move(r));
}

void placement_groups::node_died(const node_id& id) {
  // Groups with a bundle there are laid out again (all or nothing), their other bundles
  // given back; a reservation it never answered counts as refused.
  for (auto& [gid, g] : groups_) {
    for (std::size_t i = 0; g.replies_due > 0 && i < g.info.nodes.size(); ++i) {
      if (g.info.nodes[i] == id && !g.answered[i]) {
        protocol::bundle_reserved no{gid, static_cast<std::int32_t>(i), id, false, "its node died"};
        on(no);
      }
    }
    if (g.info.state != protocol::group_state::created) continue;
    if (std::find(g.info.nodes.begin(), g.info.nodes.end(), id) == g.info.nodes.end()) continue;
    std::vector<std::int32_t> others;
    for (std::size_t i = 0; i < g.info.nodes.size(); ++i) {
      if (g.info.nodes[i] != id) others.push_back(static_cast<std::int32_t>(i));
    }
    return_bundles(g, others, "a bundle's node died; the group is reserved again");
    g.info.state = protocol::group_state::pending;
    g.info.nodes.clear();
    g.info.why = "node " + id.short_hex() + " of a bundle died; reserving again";
    persist(g);
  }
}

void placement_groups::job_ended(const job_id& job) {
  for (auto& [gid, g] : groups_) {
    if (g.info.job == job) remove(g, "removed: its job finished");
  }
  std::erase_if(groups_, [&](const auto& entry) {
    const bool gone = entry.second.info.job == job && entry.second.replies_due == 0;
    if (gone && tables_ != nullptr) tables_->drop_group(entry.first);
    return gone;
  });
}

} // namespace celer
