#include "transport/zmq_transport.hpp"

#include "log.hpp"
#include "transport/wire.hpp"

#include <celer/version.hpp>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include <array>
#include <span>
#include <cstring>
#include <string_view>

#include <sys/random.h>

namespace celer {
namespace {

constexpr std::size_t id_bytes = 16;
/// A message has 5 parts with its routing id, and its bulk frames; more is never valid.
constexpr std::size_t max_parts = 5 + wire::max_bulk_frames;
/// How long closing waits for queued messages to reach live peers.
constexpr int linger_ms = 1000;

std::string id_to_bytes(const unique_id& id) {
  std::string out(id_bytes, '\0');
  for (int i = 0; i < 8; ++i) {
    out[static_cast<std::size_t>(i)] = static_cast<char>(id.hi >> (56 - 8 * i));
    out[static_cast<std::size_t>(8 + i)] = static_cast<char>(id.lo >> (56 - 8 * i));
  }
  return out;
}

unique_id id_from_bytes(std::string_view b) {
  unique_id id;
  for (int i = 0; i < 8; ++i) {
    id.hi = (id.hi << 8) | static_cast<unsigned char>(b[static_cast<std::size_t>(i)]);
    id.lo = (id.lo << 8) | static_cast<unsigned char>(b[static_cast<std::size_t>(8 + i)]);
  }
  return id;
}

/// A zmq message that takes the string's buffer instead of copying it (large bodies).
zmq::message_t adopt(std::string s) {
  if (s.size() < 4096) return zmq::message_t(s.data(), s.size());
  auto* owned = new std::string(std::move(s));
  return zmq::message_t(
    owned->data(), owned->size(),
    [](void*, void* hint) { delete static_cast<std::string*>(hint); }, owned);
}

std::string printable(std::string_view routing_id) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : routing_id.substr(0, 8)) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

} // namespace

std::string make_token() {
  std::array<unsigned char, 32> raw{};
  std::size_t got = 0;
  while (got < raw.size()) {
    const ssize_t n = ::getrandom(raw.data() + got, raw.size() - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw exception(error_code::internal, "cannot read random bytes for the cluster token");
    }
    got += static_cast<std::size_t>(n);
  }
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

bool token_equal(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

struct zmq_transport::peer {
  std::mutex mutex;  // guards socket
  zmq::socket_t socket;
  explicit peer(zmq::context_t& ctx) : socket(ctx, zmq::socket_type::dealer) {}
};

zmq_transport::zmq_transport(local_transport& local, options o)
  : local_(local), opts_(std::move(o)), ctx_(std::make_unique<zmq::context_t>(1)) {
  router_ = std::make_unique<zmq::socket_t>(*ctx_, zmq::socket_type::router);
  router_->set(zmq::sockopt::linger, 0);
  router_->set(zmq::sockopt::sndhwm, 0);
  router_->set(zmq::sockopt::rcvhwm, 0);
  // A frame longer than the largest body (plus room for the header) closes the connection
  // before ZeroMQ allocates it.
  router_->set(zmq::sockopt::maxmsgsize,
               static_cast<std::int64_t>(opts_.max_body_bytes + wire::max_header_bytes + 64));
  try {
    router_->bind(opts_.bind);
  } catch (const zmq::error_t& e) {
    throw exception(error_code::unavailable, "cannot listen on " + opts_.bind + ": " + e.what());
  }
  endpoint_ = router_->get(zmq::sockopt::last_endpoint);
  wake_rx_ = std::make_unique<zmq::socket_t>(*ctx_, zmq::socket_type::pair);
  wake_tx_ = std::make_unique<zmq::socket_t>(*ctx_, zmq::socket_type::pair);
  const std::string inproc = "inproc://wake-" + unique_id::random().hex();
  wake_rx_->bind(inproc);
  wake_tx_->connect(inproc);
  hello_frame_ = wire::encode_hello(
    wire::hello{std::string(wire::magic), protocol_version, opts_.token, endpoint_});
}

zmq_transport::~zmq_transport() { stop(); }

void zmq_transport::handle_directly(const unique_id& id,
                                    std::function<void(protocol::message&)> handler) {
  direct_[id] = std::move(handler);
}

void zmq_transport::start() { receiver_ = std::thread([this] { receive_loop(); }); }

void zmq_transport::stop() {
  if (stopped_.exchange(true)) return;
  if (receiver_.joinable()) {
    wake_tx_->send(zmq::str_buffer("x"), zmq::send_flags::none);
    receiver_.join();
  }
  {
    std::unique_lock lock(peers_mutex_);
    for (auto& [ep, p] : peers_) {
      std::lock_guard plock(p->mutex);
      p->socket.close();
    }
    peers_.clear();
  }
  router_->close();
  wake_rx_->close();
  wake_tx_->close();
  ctx_->close();  // waits (up to linger_ms per socket) for queued messages to leave
}

zmq_transport::peer* zmq_transport::peer_for(const std::string& endpoint) {
  {
    std::shared_lock lock(peers_mutex_);
    auto it = peers_.find(endpoint);
    if (it != peers_.end()) return it->second.get();
  }
  std::unique_lock lock(peers_mutex_);
  auto it = peers_.find(endpoint);
  if (it != peers_.end()) return it->second.get();
  if (stopped_) return nullptr;
  auto p = std::make_unique<peer>(*ctx_);
  try {
    p->socket.set(zmq::sockopt::linger, linger_ms);
    p->socket.set(zmq::sockopt::sndhwm, 0);  // never drop or block: peers' death is
                                             // detected by heartbeats and reapers
    p->socket.set(zmq::sockopt::rcvhwm, 16);
    // A peer that went away is retried less and less often (up to every 10 s).
    p->socket.set(zmq::sockopt::reconnect_ivl_max, 10000);
    p->socket.connect(endpoint);
    // The hello goes first on the connection; the messages queued behind it follow.
    p->socket.send(zmq::str_buffer("H"), zmq::send_flags::sndmore);
    p->socket.send(zmq::buffer(hello_frame_), zmq::send_flags::none);
  } catch (const zmq::error_t& e) {
    CELER_LOG(error, "transport", "cannot connect to " + endpoint + ": " + e.what());
    return nullptr;
  }
  auto* raw = p.get();
  peers_.emplace(endpoint, std::move(p));
  return raw;
}

bool zmq_transport::send(const address& to, protocol::message m) {
  if (to.endpoint.empty() || to.endpoint == endpoint_) return local_.send(to, std::move(m));
  if (stopped_) return false;
  auto frames = wire::encode(m);
  peer* p = peer_for(to.endpoint);
  if (p == nullptr) return false;
  try {
    std::lock_guard lock(p->mutex);
    p->socket.send(zmq::str_buffer("M"), zmq::send_flags::sndmore);
    p->socket.send(zmq::buffer(id_to_bytes(to.id)), zmq::send_flags::sndmore);
    for (std::size_t i = 0; i < frames.size(); ++i) {
      p->socket.send(adopt(std::move(frames[i])), i + 1 < frames.size()
                                                     ? zmq::send_flags::sndmore
                                                     : zmq::send_flags::none);
    }
  } catch (const zmq::error_t& e) {
    CELER_LOG(warn, "transport", "sending to " + to.endpoint + " failed: " + e.what());
    return false;
  }
  return true;
}

void zmq_transport::forget(const std::string& endpoint) {
  std::unique_ptr<peer> gone;
  {
    std::unique_lock lock(peers_mutex_);
    auto it = peers_.find(endpoint);
    if (it == peers_.end()) return;
    gone = std::move(it->second);
    peers_.erase(it);
  }
  std::lock_guard plock(gone->mutex);  // no sender is inside; none can find it any more
  gone->socket.set(zmq::sockopt::linger, 0);
  gone->socket.close();
}

expected<void> zmq_transport::probe(const std::string& endpoint, std::chrono::milliseconds timeout) {
  try {
    zmq::socket_t s(*ctx_, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.connect(endpoint);
    s.send(zmq::str_buffer("H"), zmq::send_flags::sndmore);
    s.send(zmq::buffer(hello_frame_), zmq::send_flags::none);
    zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, timeout) == 0) {
      return error(error_code::unavailable,
                   "no celer process answered at " + endpoint + " within " +
                     std::to_string(timeout.count()) + " ms");
    }
    std::vector<zmq::message_t> parts;
    (void)zmq::recv_multipart(s, std::back_inserter(parts));
    const std::string kind = parts.empty() ? "" : parts[0].to_string();
    const std::string why = parts.size() > 1 ? parts[1].to_string() : "";
    if (kind == "A") return {};
    if (kind == "R") {
      return error(why.find("version") != std::string::npos ? error_code::failed_precondition
                                                            : error_code::unauthenticated,
                   endpoint + " refused this process: " + why);
    }
    return error(error_code::internal, endpoint + " answered the hello with '" + kind + "'");
  } catch (const zmq::error_t& e) {
    return error(error_code::unavailable, "cannot reach " + endpoint + ": " + e.what());
  }
}

void zmq_transport::receive_loop() {
  std::array<zmq::pollitem_t, 2> items{
    {{router_->handle(), 0, ZMQ_POLLIN, 0}, {wake_rx_->handle(), 0, ZMQ_POLLIN, 0}}};
  std::vector<zmq::message_t> parts;
  std::vector<std::string_view> views;
  for (;;) {
    try {
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(-1));
      if (items[1].revents & ZMQ_POLLIN) return;
      if (!(items[0].revents & ZMQ_POLLIN)) continue;
      // Drain what is ready before polling again.
      for (;;) {
        parts.clear();
        bool more = true;
        bool first = true;
        while (more) {
          zmq::message_t part;
          const auto got =
            router_->recv(part, first ? zmq::recv_flags::dontwait : zmq::recv_flags::none);
          if (!got) break;
          first = false;
          more = part.more();
          if (parts.size() < max_parts + 1) parts.push_back(std::move(part));
        }
        if (parts.empty()) break;
        views.clear();
        for (const auto& p : parts) views.emplace_back(p.data<char>(), p.size());
        on_frames(views);
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      CELER_LOG(error, "transport", std::string("receive failed: ") + e.what());
    }
  }
}

void zmq_transport::reply(const std::string& routing_id, char kind, const std::string& text) {
  try {
    router_->send(zmq::buffer(routing_id), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    if (text.empty()) {
      router_->send(zmq::buffer(&kind, 1), zmq::send_flags::dontwait);
    } else {
      router_->send(zmq::buffer(&kind, 1), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      router_->send(zmq::buffer(text), zmq::send_flags::dontwait);
    }
  } catch (const zmq::error_t&) {
    // The peer is gone; nothing to tell.
  }
}

void zmq_transport::on_frames(const std::vector<std::string_view>& parts) {
  const std::string rid(parts[0]);
  const std::string_view kind = parts.size() > 1 ? parts[1] : std::string_view{};
  if (kind == "H") {
    if (parts.size() != 3) {
      ++refused_;
      CELER_LOG(warn, "transport", "refused a connection: a hello has 1 frame, got " +
                                     std::to_string(parts.size() - 2));
      reply(rid, 'R', "malformed hello");
      return;
    }
    auto h = wire::decode_hello(parts[2]);
    if (!h) {
      ++refused_;
      CELER_LOG(warn, "transport", "refused a connection: " + h.error().message());
      reply(rid, 'R', h.error().message());
      return;
    }
    if (!token_equal(h->token, opts_.token)) {
      ++refused_;
      CELER_LOG(warn, "transport",
                "refused a connection from " + h->from +
                  (h->token.empty() ? ": it presented no cluster token"
                                    : ": it presented a wrong cluster token"));
      reply(rid, 'R', h->token.empty() ? "no cluster token" : "wrong cluster token");
      return;
    }
    ++accepted_;
    authenticated_.insert(rid);
    reply(rid, 'A', "");
    return;
  }
  if (kind != "M") {
    ++malformed_;
    CELER_LOG(warn, "transport", "dropped frames of unknown kind from connection " + printable(rid));
    reply(rid, 'E', "unknown frame kind");
    return;
  }
  if (!authenticated_.contains(rid)) {
    // Logged once per thousand so that a flood cannot fill the log.
    if (unauthenticated_++ % 1000 == 0) {
      CELER_LOG(warn, "transport",
                "dropped a message from connection " + printable(rid) + " that said no hello");
    }
    reply(rid, 'E', "not authenticated: the connection sent no accepted hello");
    return;
  }
  if (parts.size() < 5 || parts.size() > max_parts || parts[2].size() != id_bytes) {
    ++malformed_;
    CELER_LOG(warn, "transport", "dropped a message with " + std::to_string(parts.size() - 1) +
                                   " frames (expected kind, destination, header, body, bulk...)");
    reply(rid, 'E', "malformed message frames");
    return;
  }
  auto m = wire::decode(std::span<const std::string_view>(parts).subspan(3), opts_.max_body_bytes);
  if (!m) {
    ++malformed_;
    CELER_LOG(warn, "transport", "dropped a message from connection " + printable(rid) + ": " +
                                   m.error().to_string());
    reply(rid, 'E', m.error().to_string());
    return;
  }
  const address to{id_from_bytes(parts[2]), {}};
  if (auto direct = direct_.find(to.id); direct != direct_.end()) {
    try {
      direct->second(*m);
    } catch (const std::exception& e) {
      CELER_LOG(error, "transport", std::string("handling ") + protocol::name_of(*m) + ": " + e.what());
    }
    ++delivered_;
    return;
  }
  const char* name = protocol::name_of(*m);
  if (!local_.send(to, std::move(*m))) {
    ++undeliverable_;
    CELER_LOG(info, "transport",
              std::string("no component ") + to.id.short_hex() + " here for " + name);
    return;
  }
  ++delivered_;
}

zmq_transport::counters zmq_transport::stats() const {
  return {delivered_.load(), accepted_.load(),        refused_.load(),
          unauthenticated_.load(), malformed_.load(), undeliverable_.load()};
}

} // namespace celer
