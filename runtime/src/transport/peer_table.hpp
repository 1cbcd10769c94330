#pragma once
// The connections a zmq_transport keeps open to other processes, by endpoint (zmq_peer.hpp
// has the connection and get()'s body). At most max of them: past it the one used least
// recently is closed (its queued messages still flush; a later send opens it again), as
// zmq_transport::options::max_peers says.
//
// Any thread: mutex_ guards the map, not the sockets (each connection has its own mutex).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <string>
#include <unordered_map>

namespace celer {

struct zmq_peer;

class peer_table {
public:
  /// `max` 0: no bound.
  explicit peer_table(std::size_t max) : max_(max) {}

  /// The connection to `endpoint`: the one open, or else the one `open()` makes now (null:
  /// it cannot), closing the least recently used if the table is full. The caller holds it
  /// while it sends, so that closing it elsewhere waits for the send.
  template <class Open>
  std::shared_ptr<zmq_peer> get(const std::string& endpoint, Open&& open);
  /// Takes `endpoint`'s connection out of the table (null when none): no one finds it again.
  std::shared_ptr<zmq_peer> take(const std::string& endpoint);
  /// Closes every connection (waiting for a sender that holds one) and empties the table.
  void close_all();
  /// Connections open now.
  [[nodiscard]] std::size_t size() const;

private:
  static std::int64_t ticks_now() noexcept;
  static void closed_least_used(const std::string& endpoint);

  const std::size_t max_;
  mutable std::shared_mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<zmq_peer>> map_;
};

} // namespace celer
