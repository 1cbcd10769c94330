#pragma once
// Embedded-mode transport: a table from component id to the CAF actor that runs it.
// Thread-safe; sends are a mailbox enqueue (no copy of the message beyond the move).

#include "transport/caf_types.hpp"
#include "transport/transport.hpp"

#include <caf/actor.hpp>

#include <shared_mutex>
#include <unordered_map>

namespace celer {

class local_transport final : public transport {
public:
  void bind(const unique_id& id, caf::actor actor);
  void unbind(const unique_id& id);
  [[nodiscard]] bool send(const address& to, protocol::message&& m) override;
  /// Drops every binding (at shutdown, after all actors stopped).
  void clear();

private:
  std::shared_mutex mutex_;  // guards actors_
  std::unordered_map<unique_id, caf::actor> actors_;
};

} // namespace celer
