#pragma once
// A zmq_transport's connection to another process (zmq_transport.hpp): a DEALER socket that
// senders hold while they send. Shared by zmq_transport.cpp (opening, sending, closing) and
// zmq_transport_keys.cpp (asking the head whose a job key is).
#include "transport/zmq_transport.hpp"

#include <zmq.hpp>

#include <atomic>
#include <cstdint>
#include <mutex>

namespace celer {

struct zmq_transport::peer {
  std::mutex mutex;  // guards socket
  zmq::socket_t socket;
  /// When it was last looked up to send (steady clock ticks): the least recent goes first.
  std::atomic<std::int64_t> last_used{0};
  explicit peer(zmq::context_t& ctx) : socket(ctx, zmq::socket_type::dealer) {}
};

} // namespace celer
