#pragma once
// A zmq_transport's connections to other processes (zmq_transport.hpp): a DEALER socket per
// peer endpoint, which senders hold while they send, and the table that keeps at most
// max_peers of them open. Shared by zmq_transport.cpp (opening, sending, closing) and
// zmq_transport_keys.cpp (asking the head whose a job key is).
#include "transport/peer_table.hpp"

#include <zmq.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>

namespace celer {

struct zmq_peer {
  std::mutex mutex;  // guards socket
  zmq::socket_t socket;
  /// When it was last looked up to send (steady clock ticks): the least recent goes first.
  std::atomic<std::int64_t> last_used{0};
  explicit zmq_peer(zmq::context_t& ctx) : socket(ctx, zmq::socket_type::dealer) {}
};

inline std::int64_t peer_table::ticks_now() noexcept {
  return std::chrono::steady_clock::now().time_since_epoch().count();
}

template <class Open>
std::shared_ptr<zmq_peer> peer_table::get(const std::string& endpoint, Open&& open) {
  {
    std::shared_lock lock(mutex_);
    if (auto it = map_.find(endpoint); it != map_.end()) {
      it->second->last_used.store(ticks_now(), std::memory_order_relaxed);
      return it->second;
    }
  }
  std::unique_lock lock(mutex_);
  if (auto it = map_.find(endpoint); it != map_.end()) return it->second;
  // Opened under the lock: two senders to a new endpoint open one connection, not two.
  std::shared_ptr<zmq_peer> p = open();
  if (p == nullptr) return nullptr;
  if (max_ > 0 && map_.size() >= max_) {
    // The least recently used connection goes (its socket closes, lingering to flush, once
    // no sender holds it).
    auto oldest = std::min_element(map_.begin(), map_.end(), [](const auto& a, const auto& b) {
      return a.second->last_used.load(std::memory_order_relaxed) <
             b.second->last_used.load(std::memory_order_relaxed);
    });
    closed_least_used(oldest->first);
    map_.erase(oldest);
  }
  p->last_used.store(ticks_now(), std::memory_order_relaxed);
  map_.emplace(endpoint, p);
  return p;
}

} // namespace celer
