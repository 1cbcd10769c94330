#include "transport/local_transport.hpp"

#include "transport/tsan.hpp"

#include <caf/abstract_actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/mailbox_element.hpp>

#include <mutex>

namespace celer {

void local_transport::bind(const unique_id& id, caf::actor actor) {
  std::unique_lock lock(mutex_);
  actors_[id].actor = std::move(actor);
}

void local_transport::set_front_door(const unique_id& id, front_door door) {
  std::unique_lock lock(mutex_);
  auto it = actors_.find(id);
  if (it != actors_.end()) it->second.door = std::make_shared<const front_door>(std::move(door));
}

void local_transport::unbind(const unique_id& id) {
  std::unique_lock lock(mutex_);
  actors_.erase(id);
}

bool local_transport::send(const address& to, protocol::message&& m) {
  caf::actor target;
  std::shared_ptr<const front_door> door;
  {
    std::shared_lock lock(mutex_);
    auto it = actors_.find(to.id);
    if (it == actors_.end()) return false;
    target = it->second.actor;
    door = it->second.door;
  }
  // Outside the lock: the door may send too.
  if (door && (*door)(m)) return true;
  // What anon_send does, split so that the message is fully built before the hand-off is
  // announced to ThreadSanitizer (see tsan.hpp).
  auto element = caf::make_mailbox_element(nullptr, caf::make_message_id(), {}, std::move(m));
  tsan::release(to.id);
  caf::actor_cast<caf::abstract_actor*>(target)->enqueue(std::move(element), nullptr);
  return true;
}

void local_transport::clear() {
  std::unique_lock lock(mutex_);
  actors_.clear();
}

} // namespace celer
