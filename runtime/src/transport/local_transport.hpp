#pragma once
// Embedded-mode transport: a table from component id to the CAF actor that runs it.
// Thread-safe; sends are a mailbox enqueue (no copy of the message beyond the move), or a
// call of the component's front door on the sender's thread when it has one (a worker's:
// its inbox).

#include "transport/caf_types.hpp"
#include "transport/transport.hpp"

#include <caf/actor.hpp>

#include <functional>
#include <memory>
#include <shared_mutex>
#include <unordered_map>

namespace celer {

class local_transport final : public transport {
public:
  /// Takes a message for a component before its mailbox, on the sender's thread: true when
  /// it took care of it; false to have it (possibly rewritten) put in the mailbox.
  using front_door = std::function<bool(protocol::message&)>;
  void bind(const unique_id& id, caf::actor actor);
  /// Gives the bound component `id` a front door (until unbind).
  void set_front_door(const unique_id& id, front_door door);
  void unbind(const unique_id& id);
  [[nodiscard]] bool send(const address& to, protocol::message&& m) override;
  /// Drops every binding (at shutdown, after all actors stopped).
  void clear();

private:
  std::shared_mutex mutex_;  // guards actors_
  struct entry {
    caf::actor actor;
    std::shared_ptr<const front_door> door;
  };
  std::unordered_map<unique_id, entry> actors_;
};

} // namespace celer
