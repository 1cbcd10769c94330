#include "node/chunk_server.hpp"

#include "node/chunk_seal.hpp"
#include "transport/bulk_lane.hpp"

#include <celer/store/checksum.hpp>
#include <celer/store/object_store.hpp>
#include <celer/store/shm_arena.hpp>

namespace celer {

namespace {

/// Sealing buffers kept for reuse (one per chunk in flight to other nodes, about).
constexpr std::size_t max_free_seal_buffers = 32;

} // namespace

chunk_server::chunk_server(transport& net, store::object_store& objects, bulk_lane* lane)
  : net_(net), objects_(objects), lane_(lane) {}

void chunk_server::refuse(const protocol::store_pull& m) {
  protocol::store_chunk c;
  c.request_id = m.request_id;
  c.id = m.id;
  c.offset = m.offset;
  c.fail = protocol::failure_info::make(detail::failure_kind::object_lost, error_code::permission_denied,
                                        "object " + m.id.hex() + " is another job's");
  (void)net_.send(m.reply_to, std::move(c));
}

void chunk_server::serve(protocol::store_pull& m) {
  protocol::store_chunk c;
  c.request_id = m.request_id;
  c.id = m.id;
  c.offset = m.offset;
  auto at = objects_.pin(m.id);
  if (!at) {
    c.fail = protocol::failure_info::make(detail::failure_kind::object_lost, at.error().code(),
                                          at.error().message());
  } else if (m.offset > at->size || m.length > at->size - m.offset) {  // cannot wrap
    c.fail = protocol::failure_info::make(
      detail::failure_kind::object_lost, error_code::invalid_argument,
      "object " + m.id.hex() + " has " + std::to_string(at->size) + " bytes; asked for " +
        std::to_string(m.length) + " at " + std::to_string(m.offset));
  } else if (m.length > max_chunk_bytes) {
    // A puller asks chunk by chunk; one request for gigabytes would be one message larger
    // than a connection takes.
    c.fail = protocol::failure_info::make(
      detail::failure_kind::object_lost, error_code::invalid_argument,
      "object " + m.id.hex() + ": asked for " + std::to_string(m.length) +
        " bytes in one chunk (at most " + std::to_string(max_chunk_bytes) + ")");
  } else if (!m.key.empty() && m.key.size() != chunk_seal::key_bytes) {
    c.fail = protocol::failure_info::make(
      detail::failure_kind::object_lost, error_code::invalid_argument,
      "object " + m.id.hex() + ": a pull's key has " + std::to_string(chunk_seal::key_bytes) +
        " bytes, not " + std::to_string(m.key.size()));
  } else if (!m.key.empty()) {
    send_sealed(m, at->segment->base() + at->offset + m.offset);
    objects_.unpin(m.id);
    return;
  } else {
    c.data = share(m.id, at->arena, at->offset + m.offset, m.length);
    if (!m.reply_to.endpoint.empty()) pullers_[m.reply_to.id] = m.reply_to.endpoint;
    c.checksum = store::checksum(c.data.data(), c.data.size());
    c.ok = true;
  }
  // The pin taken above; share took one of its own for the bytes it shares.
  if (at) objects_.unpin(m.id);
  // Sent or not, the chunk's pin is dropped once the transport and `c` let go of its bytes.
  (void)net_.send(m.reply_to, std::move(c));
}

protocol::shared_bytes chunk_server::share(const object_id& id, std::uint64_t arena, std::uint64_t at,
                                           std::uint32_t length) {
  // The arena stays mapped for the bytes (a frame still queued when the job's arena, or this
  // store, is gone keeps it), and the object stays pinned (neither freed, moved nor
  // spilled) until the last copy of the bytes is gone: ZeroMQ's I/O thread lets go of them
  // once written, or the send fails and the message is dropped here.
  struct chunk_pin {
    std::shared_ptr<sent_chunks> sent;
    std::shared_ptr<const store::shm_segment> view;
    object_id id;
    chunk_pin(std::shared_ptr<sent_chunks> s, std::shared_ptr<const store::shm_segment> v, const object_id& i)
      : sent(std::move(s)), view(std::move(v)), id(i) {}
    chunk_pin(const chunk_pin&) = delete;
    chunk_pin& operator=(const chunk_pin&) = delete;
    ~chunk_pin() {
      try {
        std::lock_guard lock(sent->mutex);
        sent->released.push_back(id);
      } catch (...) {
        // Out of memory: the object stays pinned until its job ends. Nothing is unsafe.
      }
    }
  };
  (void)objects_.pin(id);  // cannot fail: the caller holds a pin
  ++chunks_pinned_;
  auto view = objects_.arena_segment(arena);  // the caller's pin keeps the arena
  auto pin = std::make_shared<const chunk_pin>(sent_, view, id);
  const auto* bytes = reinterpret_cast<const char*>(view->base() + at);
  return protocol::shared_bytes(bytes, length, std::move(pin));
}

void chunk_server::send_sealed(protocol::store_pull& m, const std::byte* from) {
  std::unique_ptr<char[]> buffer;
  {
    std::lock_guard lock(seal_buffers_->mutex);
    if (!seal_buffers_->free.empty()) {
      buffer = std::move(seal_buffers_->free.back());
      seal_buffers_->free.pop_back();
    }
  }
  if (!buffer) buffer.reset(new char[max_chunk_bytes + chunk_seal::tag_bytes]);
  protocol::store_chunk c;
  c.request_id = m.request_id;
  c.id = m.id;
  c.offset = m.offset;
  const auto* plain = reinterpret_cast<const char*>(from);
  if (!chunk_seal::seal(m.key, {m.request_id, m.id, m.offset}, plain, m.length, buffer.get())) {
    c.fail = protocol::failure_info::make(detail::failure_kind::object_lost, error_code::internal,
                                          "object " + m.id.hex() + ": its chunk could not be sealed");
    (void)net_.send(m.reply_to, std::move(c));
    return;
  }
  // The buffer goes back to the pool once the transport (on its I/O thread) and `c` let go.
  struct lent {
    std::shared_ptr<seal_buffers> pool;
    std::unique_ptr<char[]> buffer;
    lent(std::shared_ptr<seal_buffers> p, std::unique_ptr<char[]> b) : pool(std::move(p)), buffer(std::move(b)) {}
    lent(const lent&) = delete;
    lent& operator=(const lent&) = delete;
    ~lent() {
      try {
        std::lock_guard lock(pool->mutex);
        if (pool->free.size() < max_free_seal_buffers) pool->free.push_back(std::move(buffer));
      } catch (...) {
        // Out of memory: the buffer is freed instead.
      }
    }
  };
  auto owner = std::make_shared<const lent>(seal_buffers_, std::move(buffer));
  c.data = protocol::shared_bytes(owner->buffer.get(), m.length + chunk_seal::tag_bytes, owner);
  c.ok = true;
  if (!m.lane.empty() && lane_ != nullptr && lane_->send(m.lane, c)) {
    puller_lanes_[m.reply_to.id] = m.lane;
    return;
  }
  // No lane of ours, none at the puller, or not connected yet: sealed on the connection.
  if (!m.reply_to.endpoint.empty()) pullers_[m.reply_to.id] = m.reply_to.endpoint;
  (void)net_.send(m.reply_to, std::move(c));
}

void chunk_server::release_sent() {
  std::vector<object_id> released;
  {
    std::lock_guard lock(sent_->mutex);
    if (sent_->released.empty()) return;
    released.swap(sent_->released);
  }
  for (const auto& id : released) {
    objects_.unpin(id);
    --chunks_pinned_;
  }
}

void chunk_server::forget(const node_id& node) {
  if (auto p = pullers_.find(node); p != pullers_.end()) {
    // Its chunks still queued go with the connection; their pins are dropped on the next
    // store message or tick.
    net_.forget(p->second);
    pullers_.erase(p);
  }
  if (auto l = puller_lanes_.find(node); l != puller_lanes_.end()) {
    if (lane_ != nullptr) lane_->forget(l->second);
    puller_lanes_.erase(l);
  }
}

} // namespace celer
