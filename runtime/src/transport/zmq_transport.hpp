#pragma once
// Cluster-mode transport: protocol messages between processes over ZeroMQ.
//
// Each process binds one ROUTER socket (its endpoint, "tcp://host:port") and receives every
// message for its components there; a receiver thread decodes each message and hands it to
// the component through local_transport. To send, a process keeps one DEALER socket per
// peer endpoint, guarded by a mutex, and sends from the caller's thread (no hand-off).
// Addresses whose endpoint is empty or this process's own go straight to local_transport.
//
// Frames on a connection (DEALER -> ROUTER):
//   ['H', hello]                          first, once per connection: version and token
//   ['M', destination id (16 bytes), header, body]   a protocol message (wire.hpp)
// and back (ROUTER -> DEALER): ['A'] hello accepted, ['R', reason] hello refused,
// ['E', reason] a message was rejected. A connection whose hello was not accepted has
// every message dropped, and each drop is counted and logged.

#include "transport/local_transport.hpp"
#include "transport/transport.hpp"

#include <celer/error.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace zmq {
class context_t;
class socket_t;
} // namespace zmq

namespace celer {

class zmq_transport final : public transport {
public:
  struct options {
    /// Where to listen: "tcp://host:port", or "tcp://host:*" for a free port.
    std::string bind;
    /// The cluster token every hello must carry.
    std::string token;
    /// Largest message body accepted; larger ones are refused unread.
    std::size_t max_body_bytes = 256u << 20;
  };
  struct counters {
    std::uint64_t delivered = 0;
    std::uint64_t hellos_accepted = 0;
    std::uint64_t hellos_refused = 0;
    std::uint64_t unauthenticated = 0;
    std::uint64_t malformed = 0;
    std::uint64_t undeliverable = 0;
  };

  /// Binds; throws celer::exception(unavailable) when the endpoint cannot be bound.
  zmq_transport(local_transport& local, options o);
  ~zmq_transport() override;
  zmq_transport(const zmq_transport&) = delete;
  zmq_transport& operator=(const zmq_transport&) = delete;

  /// This process's endpoint as peers reach it: "tcp://host:port".
  [[nodiscard]] const std::string& endpoint() const noexcept { return endpoint_; }
  /// Messages from the wire for `id` are handled by `handler` on the receiver thread itself,
  /// one hand-off fewer than through the component's mailbox. For handlers that never block
  /// (a core_worker's). Call before start().
  void handle_directly(const unique_id& id, std::function<void(protocol::message&)> handler);
  /// Starts the receiver thread (bind the local components first).
  void start();
  /// Stops receiving, flushes what is queued for peers (boundedly) and closes every socket.
  void stop();

  [[nodiscard]] bool send(const address& to, protocol::message m) override;
  void forget(const std::string& endpoint) override;

  /// Says hello to `endpoint` on a fresh connection and waits for the answer: unauthenticated
  /// when the token is refused, failed_precondition for another protocol version,
  /// unavailable when nothing answers within `timeout`.
  expected<void> probe(const std::string& endpoint, std::chrono::milliseconds timeout);

  [[nodiscard]] counters stats() const;

private:
  struct peer;
  peer* peer_for(const std::string& endpoint);
  void receive_loop();
  void on_frames(const std::vector<std::string_view>& parts);
  void reply(const std::string& routing_id, char kind, const std::string& text);

  local_transport& local_;
  options opts_;
  std::string endpoint_;
  std::unique_ptr<zmq::context_t> ctx_;
  std::unique_ptr<zmq::socket_t> router_;  // used by the receiver thread only
  std::unique_ptr<zmq::socket_t> wake_rx_, wake_tx_;
  std::string hello_frame_;
  std::thread receiver_;
  std::atomic<bool> stopped_{false};

  mutable std::shared_mutex peers_mutex_;  // guards peers_ (the map, not the sockets)
  std::unordered_map<std::string, std::unique_ptr<peer>> peers_;

  // Receiver thread only (direct_ is fixed before start()).
  std::unordered_set<std::string> authenticated_;
  std::unordered_map<unique_id, std::function<void(protocol::message&)>> direct_;

  std::atomic<std::uint64_t> delivered_{0}, accepted_{0}, refused_{0}, unauthenticated_{0},
    malformed_{0}, undeliverable_{0};
};

/// A fresh cluster token: 64 hex digits from the kernel's random source.
std::string make_token();
/// Compares in time independent of where the strings differ.
bool token_equal(std::string_view a, std::string_view b) noexcept;

} // namespace celer
