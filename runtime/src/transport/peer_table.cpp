// The connections a zmq_transport keeps open (peer_table.hpp, zmq_peer.hpp).
#include "transport/zmq_peer.hpp"

#include "log.hpp"

#include <mutex>
#include <utility>

namespace celer {

std::shared_ptr<zmq_peer> peer_table::take(const std::string& endpoint) {
  std::unique_lock lock(mutex_);
  auto it = map_.find(endpoint);
  if (it == map_.end()) return nullptr;
  auto gone = std::move(it->second);
  map_.erase(it);
  return gone;
}

void peer_table::close_all() {
  std::unique_lock lock(mutex_);
  for (auto& [endpoint, p] : map_) {
    std::lock_guard plock(p->mutex);
    p->socket.close();
  }
  map_.clear();
}

std::size_t peer_table::size() const {
  std::shared_lock lock(mutex_);
  return map_.size();
}

void peer_table::closed_least_used(const std::string& endpoint) {
  CELER_LOG(debug, "transport", "closing the least used connection, to " + endpoint);
}

} // namespace celer
