#include "node/store_clients.hpp"

#include "log.hpp"

#include <celer/store/object_store.hpp>

#include <algorithm>

namespace celer {

void store_clients::pinned(const address& client, const object_id& id) {
  ++pins_[client.id][id];
  endpoint_[client.id] = client.endpoint;
}

void store_clients::owns(const address& owner) {
  auto& owners = owners_at_[owner.endpoint];
  if (std::find(owners.begin(), owners.end(), owner.id) == owners.end()) owners.push_back(owner.id);
}

void store_clients::unpin(const address& client, const object_id& id) {
  auto c = pins_.find(client.id);
  if (c == pins_.end()) return;
  auto o = c->second.find(id);
  if (o == c->second.end()) return;
  objects_.unpin(id);
  if (--o->second == 0) c->second.erase(o);
  if (c->second.empty()) {
    pins_.erase(c);
    endpoint_.erase(client.id);
    job_.erase(client.id);
  }
}

int store_clients::pins(const unique_id& client, const object_id& id) const {
  const auto c = pins_.find(client);
  if (c == pins_.end()) return 0;
  const auto o = c->second.find(id);
  return o == c->second.end() ? 0 : o->second;
}

void store_clients::drop(const unique_id& client) {
  if (auto c = pins_.find(client); c != pins_.end()) {
    for (const auto& [id, n] : c->second) {
      for (int i = 0; i < n; ++i) objects_.unpin(id);
    }
    pins_.erase(c);
  }
  endpoint_.erase(client);
  job_.erase(client);
}

void store_clients::process_gone(const std::string& endpoint) {
  if (endpoint.empty()) return;
  std::vector<unique_id> gone;
  for (const auto& [client, where] : endpoint_) {
    if (where == endpoint) gone.push_back(client);
  }
  for (const auto& client : gone) drop(client);
  if (auto o = owners_at_.find(endpoint); o != owners_at_.end()) {
    std::size_t freed = 0;
    for (const auto& owner : o->second) freed += objects_.free_owner(owner);
    owners_at_.erase(o);
    if (freed > 0) {
      CELER_LOG(debug, "store", "freed " + std::to_string(freed) + " object(s) of " + endpoint);
    }
  }
}

void store_clients::job_finished(const job_id& job) {
  std::vector<unique_id> clients;
  for (const auto& [client, j] : job_) {
    if (j == job) clients.push_back(client);
  }
  for (const auto& client : clients) drop(client);
}

} // namespace celer
