#pragma once
// The one way components reach each other: send a protocol message to an address.
// Embedded mode delivers to CAF actors of this process (local_transport); cluster mode
// encodes with msgpack and sends over ZeroMQ. Components never know which.

#include "protocol/messages.hpp"

#include <celer/ids.hpp>

namespace celer {

class transport {
public:
  virtual ~transport() = default;
  /// Queues `m` for `to`. False when `to` is unknown here or has gone away; the message
  /// is then dropped and the caller decides what that means (usually: the peer died).
  [[nodiscard]] virtual bool send(const address& to, protocol::message m) = 0;
};

} // namespace celer
