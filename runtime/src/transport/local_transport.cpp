#include "transport/local_transport.hpp"

#include <caf/send.hpp>

#include <mutex>

namespace celer {

void local_transport::bind(const unique_id& id, caf::actor actor) {
  std::unique_lock lock(mutex_);
  actors_[id] = std::move(actor);
}

void local_transport::unbind(const unique_id& id) {
  std::unique_lock lock(mutex_);
  actors_.erase(id);
}

bool local_transport::send(const address& to, protocol::message m) {
  caf::actor target;
  {
    std::shared_lock lock(mutex_);
    auto it = actors_.find(to.id);
    if (it == actors_.end()) return false;
    target = it->second;
  }
  caf::anon_send(target, std::move(m));
  return true;
}

void local_transport::clear() {
  std::unique_lock lock(mutex_);
  actors_.clear();
}

} // namespace celer
