#pragma once
// A node's lane for the bytes of pulled objects (docs/protocol.md, "The bulk lane").
//
// With encryption on, every frame on a node's connections goes through CURVE on ZeroMQ's
// single I/O thread per side, at about a second of CPU per GB (docs/benchmarks.md,
// "Transfers between nodes"). The bulk lane carries store_chunk payloads instead, on a
// ZeroMQ context and sockets of its own and without CURVE: the node store seals each payload
// itself (node/chunk_seal.hpp: AES-256-GCM under a key the puller made for that pull and
// sent with its store_pull over CURVE). The lane authenticates nothing: whatever arrives
// is a claim that the store checks (the pull, the offset asked for, the size, the seal)
// before a byte of it counts.
//
//   auto lane = bulk_lane::open("tcp://10.0.0.1", max_payload, [&](protocol::store_chunk&& c) {
//     (void)local.send(node_addr, protocol::message{std::move(c)});   // on the lane's thread
//   });
//   lane->endpoint();                 // "tcp://10.0.0.1:41234", sent with each store_pull
//   lane->send(puller_lane, chunk);   // false: nothing queued (send it another way)
//
// Frames (DEALER -> ROUTER), nothing back:
//   [header: 'L', request_id (8 bytes), object id (16), offset (8), little-endian]
//   [payload: the sealed chunk]
// Anything else (another frame count, a short header, a payload over max_payload) is
// dropped and counted.

#include "protocol/messages.hpp"

#include <celer/error.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

namespace zmq {
class context_t;
class socket_t;
} // namespace zmq

namespace celer {

class bulk_lane {
public:
  /// Hands a received chunk (ok, its payload shared with the frame it came in) on; called
  /// on the lane's receiving thread.
  using deliver_fn = std::function<void(protocol::store_chunk&&)>;
  struct counters {
    std::uint64_t sent = 0;
    std::uint64_t received = 0;
    /// Frames that were no chunk (wrong frame count, header or size).
    std::uint64_t malformed = 0;
  };
  /// Binds a ROUTER on an ephemeral port of `bind` ("tcp://ip") and starts receiving;
  /// unavailable when it cannot bind.
  static expected<std::unique_ptr<bulk_lane>> open(const std::string& bind,
                                                   std::size_t max_payload, deliver_fn deliver);
  ~bulk_lane();
  bulk_lane(const bulk_lane&) = delete;
  bulk_lane& operator=(const bulk_lane&) = delete;

  /// Where peers send to: "tcp://ip:port".
  [[nodiscard]] const std::string& endpoint() const noexcept { return endpoint_; }
  /// Queues chunk `c`'s header and payload (shared, not copied: `c.data`'s owner is held
  /// until the lane's I/O thread has written it) to the lane at `to`. False, with nothing
  /// queued, when `to` is no tcp endpoint, not connected yet, or its queue is full. Any
  /// thread.
  [[nodiscard]] bool send(const std::string& to, const protocol::store_chunk& c);
  /// Closes the connection to `to` (a node that died), dropping what is queued there.
  void forget(const std::string& to);
  /// Stops receiving and closes every socket (what is queued is dropped). Idempotent.
  void stop();
  [[nodiscard]] counters stats() const;

private:
  bulk_lane() = default;
  void receive_loop();

  std::unique_ptr<zmq::context_t> ctx_;
  std::unique_ptr<zmq::socket_t> router_;  // the receiving thread's
  std::string endpoint_;
  std::size_t max_payload_ = 0;
  deliver_fn deliver_;
  std::thread receiver_;
  std::atomic<bool> stopped_{false};
  std::mutex senders_mutex_;  // guards senders_ and sends on them
  std::unordered_map<std::string, std::unique_ptr<zmq::socket_t>> senders_;
  std::atomic<std::uint64_t> sent_{0}, received_{0}, malformed_{0};
};

} // namespace celer
