// The head's node table (node_table.hpp).
#include "head/node_table.hpp"

#include "log.hpp"

#include <algorithm>

namespace celer {

node_table::node_table(transport& net, head_tables* tables, clock now)
  : net_(net), tables_(tables), now_(std::move(now)) {}

void node_table::restore(std::vector<node_row> rows, time_point heard) {
  for (auto& row : rows) {
    auto& n = nodes_[row.registration.node];
    n.addr = row.registration.node_address;
    n.alive = row.alive;
    n.dead_reason = std::move(row.dead_reason);
    n.last_seen = heard;  // its free resources come with its heartbeat
    n.registration = std::move(row.registration);
  }
}

node_table::registration node_table::registered(const protocol::register_node& m) {
  if (auto known = nodes_.find(m.node); known != nodes_.end()) {
    auto& n = known->second;
    if (!n.alive) {
      // A resent registration of a node declared dead since: it stays dead (see heard).
      (void)net_.send(m.node_address, protocol::node_died{m.node, "the head declared this node "
                                                                  "dead earlier (" + n.dead_reason + ")"});
      return registration::dead;
    }
    if (n.addr == m.node_address && n.registration.total.amounts == m.total.amounts &&
        n.registration.labels == m.labels) {
      // A resent registration (after a lost reply or a head restart): the node is known as
      // it is; its heartbeats keep the view current, which re-adding it would reset.
      n.last_seen = now_();
      return registration::resent;
    }
  }
  auto& n = nodes_[m.node];
  n.addr = m.node_address;
  n.alive = true;
  n.dead_reason.clear();
  n.last_seen = now_();
  n.waiting.clear();
  n.registration = m;
  persist(m.node, n);
  return registration::joined;
}

bool node_table::heard(protocol::heartbeat& m) {
  auto it = nodes_.find(m.node);
  if (it == nodes_.end()) return false;
  auto& n = it->second;
  if (!n.alive) {
    // Declared dead, it stays dead: its work has failed over and its owners were told. It
    // hears so on each heartbeat until it goes (a node leaves when told; restarted, it
    // joins as a new node).
    (void)net_.send(n.addr, protocol::node_died{m.node, "the head declared this node dead earlier (" +
                                                          n.dead_reason + ")"});
    return false;
  }
  n.last_seen = now_();
  n.workers = m.workers;
  n.store = m.store;
  n.waiting = std::move(m.waiting);
  n.gpu_samples = std::move(m.gpu_samples);
  n.preempting = std::move(m.preempting);
  n.worker_endpoints = std::move(m.worker_endpoints);
  return true;
}

std::vector<std::pair<node_id, std::string>> node_table::silent(time_point now,
                                                                std::chrono::milliseconds timeout) const {
  std::vector<std::pair<node_id, std::string>> out;
  for (const auto& [id, n] : nodes_) {
    if (n.alive && now - n.last_seen > timeout) out.emplace_back(id, "no heartbeat for " + millis(now - n.last_seen));
  }
  return out;
}

void node_table::credit(std::chrono::steady_clock::duration away, time_point now) {
  for (auto& [id, n] : nodes_) {
    if (n.alive) n.last_seen = std::min(now, n.last_seen + away);
  }
}

std::vector<std::string> node_table::mark_dead(const node_id& id, const std::string& reason) {
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return {};
  auto& n = it->second;
  n.alive = false;
  n.dead_reason = reason;
  persist(id, n);
  n.workers = 0;
  n.waiting.clear();
  n.preempting.clear();
  std::vector<std::string> gone = std::move(n.worker_endpoints);
  n.worker_endpoints.clear();
  if (!n.addr.endpoint.empty()) gone.push_back(n.addr.endpoint);
  return gone;
}

std::optional<address> node_table::live_address(const node_id& n) const {
  auto it = nodes_.find(n);
  if (it == nodes_.end() || !it->second.alive) return std::nullopt;
  return it->second.addr;
}

bool node_table::any_alive() const {
  return std::any_of(nodes_.begin(), nodes_.end(), [](const auto& n) { return n.second.alive; });
}

node_table::entry* node_table::find(const node_id& n) {
  auto it = nodes_.find(n);
  return it == nodes_.end() ? nullptr : &*it;
}

const node_table::entry* node_table::find(const node_id& n) const {
  auto it = nodes_.find(n);
  return it == nodes_.end() ? nullptr : &*it;
}

void node_table::persist(const node_id& id, const node& n) {
  if (tables_ == nullptr) return;
  node_row r;
  r.registration = n.registration;
  r.registration.node = id;
  r.registration.node_address = n.addr;
  r.alive = n.alive;
  r.dead_reason = n.dead_reason;
  tables_->save_node(r);
}

} // namespace celer
