#include "transport/bulk_lane.hpp"

#include "log.hpp"

#include <zmq.hpp>

#include <cerrno>
#include <cstring>

namespace celer {
namespace {

constexpr char header_tag = 'L';
constexpr std::size_t header_bytes = 1 + 8 + 16 + 8;
/// Chunks queued to one peer, and taken from one peer before its connection is read no more.
constexpr int queue_chunks = 16;
/// Peers the lane keeps a connection to; past it, all are closed (and opened again on use).
constexpr std::size_t max_senders = 256;

void put64(char*& at, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) *at++ = static_cast<char>((v >> (8 * i)) & 0xff);
}

std::uint64_t get64(const unsigned char*& at) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= std::uint64_t{*at++} << (8 * i);
  return v;
}

} // namespace

expected<std::unique_ptr<bulk_lane>> bulk_lane::open(const std::string& bind,
                                                     std::size_t max_payload,
                                                     deliver_fn deliver) {
  std::unique_ptr<bulk_lane> lane(new bulk_lane());
  lane->max_payload_ = max_payload;
  lane->deliver_ = std::move(deliver);
  try {
    lane->ctx_ = std::make_unique<zmq::context_t>(1);
    lane->router_ = std::make_unique<zmq::socket_t>(*lane->ctx_, zmq::socket_type::router);
    lane->router_->set(zmq::sockopt::maxmsgsize, static_cast<std::int64_t>(std::max(max_payload, header_bytes)));
    lane->router_->set(zmq::sockopt::rcvhwm, queue_chunks);
    lane->router_->set(zmq::sockopt::linger, 0);
    lane->router_->bind(bind + ":*");
    lane->endpoint_ = lane->router_->get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    if (lane->router_) lane->router_->close();
    return error(error_code::unavailable, "cannot open the bulk lane on " + bind + ": " + e.what());
  }
  lane->receiver_ = std::thread([l = lane.get()] { l->receive_loop(); });
  return lane;
}

bulk_lane::~bulk_lane() { stop(); }

void bulk_lane::stop() {
  if (stopped_.exchange(true)) return;
  ctx_->shutdown();  // the receiving thread's blocking recv returns
  if (receiver_.joinable()) receiver_.join();
  {
    std::lock_guard lock(senders_mutex_);
    senders_.clear();  // linger 0: what is queued is dropped (its owners let go)
  }
  ctx_->close();
}

bool bulk_lane::send(const std::string& to, const protocol::store_chunk& c) {
  if (to.rfind("tcp://", 0) != 0 || c.data.size() > max_payload_ || c.data.owner() == nullptr) {
    return false;
  }
  char header[header_bytes];
  char* at = header;
  *at++ = header_tag;
  put64(at, c.request_id);
  put64(at, c.id.hi);
  put64(at, c.id.lo);
  put64(at, c.offset);
  std::lock_guard lock(senders_mutex_);
  if (stopped_) return false;
  try {
    auto it = senders_.find(to);
    if (it == senders_.end()) {
      if (senders_.size() >= max_senders) senders_.clear();
      auto s = std::make_unique<zmq::socket_t>(*ctx_, zmq::socket_type::dealer);
      s->set(zmq::sockopt::sndhwm, queue_chunks);
      s->set(zmq::sockopt::linger, 0);
      s->set(zmq::sockopt::immediate, 1);  // nothing queues for a peer not connected
      s->connect(to);
      it = senders_.emplace(to, std::move(s)).first;
    }
    auto& s = *it->second;
    if (!s.send(zmq::const_buffer(header, header_bytes), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
      return false;
    }
    // The rest of a message whose first frame was taken is always taken.
    auto* owner = new std::shared_ptr<const void>(c.data.owner());
    zmq::message_t payload(
      const_cast<char*>(c.data.data()), c.data.size(),  // ZeroMQ only reads it
      [](void*, void* hint) { delete static_cast<std::shared_ptr<const void>*>(hint); }, owner);
    (void)s.send(payload, zmq::send_flags::dontwait);
  } catch (const zmq::error_t& e) {
    CELER_LOG(debug, "transport", "the bulk lane cannot send to " + to + ": " + e.what());
    return false;
  }
  ++sent_;
  return true;
}

void bulk_lane::forget(const std::string& to) {
  std::lock_guard lock(senders_mutex_);
  senders_.erase(to);
}

bulk_lane::counters bulk_lane::stats() const {
  return {sent_.load(), received_.load(), malformed_.load()};
}

void bulk_lane::receive_loop() {
  auto& r = *router_;
  while (!stopped_) {
    zmq::message_t peer, header, payload;
    try {
      if (!r.recv(peer) || !peer.more() || !r.recv(header) || !header.more() || !r.recv(payload)) {
        ++malformed_;
        continue;
      }
      if (payload.more()) {
        zmq::message_t rest;
        do {
          if (!r.recv(rest)) break;
        } while (rest.more());
        ++malformed_;
        continue;
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) break;
      continue;
    }
    const auto* at = static_cast<const unsigned char*>(header.data());
    if (header.size() != header_bytes || *at != header_tag || payload.size() > max_payload_) {
      ++malformed_;
      continue;
    }
    ++at;
    protocol::store_chunk c;
    c.request_id = get64(at);
    c.id.hi = get64(at);
    c.id.lo = get64(at);
    c.offset = get64(at);
    c.ok = true;
    auto frame = std::make_shared<zmq::message_t>(std::move(payload));
    c.data = protocol::shared_bytes(static_cast<const char*>(frame->data()), frame->size(), frame);
    ++received_;
    deliver_(std::move(c));
  }
  r.close();
}

} // namespace celer
