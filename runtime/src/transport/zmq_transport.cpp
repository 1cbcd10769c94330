#include "transport/zmq_transport.hpp"

#include "log.hpp"
#include "transport/admission.hpp"
#include "transport/wire.hpp"
#include "transport/zmq_peer.hpp"

#include <celer/version.hpp>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <span>
#include <string_view>

#include <sys/random.h>

namespace celer {
namespace {

constexpr std::size_t id_bytes = 16;
/// A message has 2 parts with its routing id (the routing id; kind, destination and the
/// message frame together), and its bulk frames; more is never valid.
constexpr std::size_t max_parts = 2 + wire::max_bulk_frames;
/// How long closing waits for queued messages to reach live peers.
constexpr int linger_ms = 1000;
/// A connection that has not finished its handshake by then is closed (what a peer
/// without keys can hold: one descriptor, this long).
constexpr int handshake_ms = 5000;
/// Connections waiting to be accepted (the kernel caps it at net.core.somaxconn). ZeroMQ's
/// default, 100, overflowed when a cluster's nodes joined at once: the kernel dropped their
/// SYNs, they retried after 1, 3 and 7 s and missed their hello's timeout (at 1,000 nodes,
/// a fifth of them; docs/benchmarks.md, "A simulated cluster of 1,000 nodes").
constexpr int listen_backlog = 4096;
/// Messages a peer may have queued at this process before its connection is read no more
/// (back-pressure, not loss).
constexpr int receive_queue = 1000;
constexpr const char* zap_endpoint = "inproc://zeromq.zap.01";

/// A zmq message that takes the string's buffer instead of copying it (large bodies).
zmq::message_t adopt(std::string s) {
  if (s.size() < 4096) return zmq::message_t(s.data(), s.size());
  auto* owned = new std::string(std::move(s));
  return zmq::message_t(
    owned->data(), owned->size(),
    [](void*, void* hint) { delete static_cast<std::string*>(hint); }, owned);
}

/// A zmq message that sends shared bytes where they lie: ZeroMQ holds a copy of their owner
/// until its I/O thread has written them (then frees it there, on that thread).
zmq::message_t share(const protocol::shared_bytes& b) {
  if (b.size() < 4096 || b.owner() == nullptr) return zmq::message_t(b.data(), b.size());
  auto* owner = new std::shared_ptr<const void>(b.owner());
  return zmq::message_t(
    const_cast<char*>(b.data()), b.size(),  // ZeroMQ only reads it
    [](void*, void* hint) { delete static_cast<std::shared_ptr<const void>*>(hint); }, owner);
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

namespace {
} // namespace

zmq_transport::zmq_transport(local_transport& local, options o)
  : local_(local),
    opts_(std::move(o)),
    // Room for every connection kept, those closed and still flushing (up to linger_ms), and
    // the few sockets of its own; ZeroMQ's default (1,023) for the usual cap.
    ctx_(std::make_unique<zmq::context_t>(
      1, static_cast<int>(std::clamp<std::size_t>(2 * opts_.max_peers + 64, ZMQ_MAX_SOCKETS_DFLT, 1u << 20)))),
    seat_({opts_.standby_receiver, opts_.standby_after, opts_.lend_seat},
          [this](std::chrono::milliseconds timeout) { return poll_once(timeout); },
          [this](const char* word) {
            // A doorbell, never a queue: with the pipe full (a word is waiting unread) there
            // is nothing to add, and a send that blocked here would hold the seat's mutex
            // until the reader, which needs that mutex, read.
            (void)wake_tx_->send(zmq::buffer(word, 1), zmq::send_flags::dontwait);
          }) {
  // The ZAP handler must be bound before the first connection: without one, ZeroMQ lets
  // every CURVE or PLAIN client in.
  zap_ = std::make_unique<zmq::socket_t>(*ctx_, zmq::socket_type::router);
  zap_->set(zmq::sockopt::linger, 0);
  zap_->bind(zap_endpoint);
  router_ = std::make_unique<zmq::socket_t>(*ctx_, zmq::socket_type::router);
  router_->set(zmq::sockopt::linger, 0);
  router_->set(zmq::sockopt::sndhwm, 0);
  router_->set(zmq::sockopt::rcvhwm, receive_queue);
  router_->set(zmq::sockopt::backlog, listen_backlog);
  router_->set(zmq::sockopt::handshake_ivl, handshake_ms);
  router_->set(zmq::sockopt::zap_domain, "celer");
  if (opts_.encrypt) {
    router_->set(zmq::sockopt::curve_server, true);
    router_->set(zmq::sockopt::curve_secretkey, zmq::const_buffer(opts_.creds.secret_key().data(), 32));
  } else {
    router_->set(zmq::sockopt::plain_server, true);
  }
  // A frame longer than that (or than the largest message) closes the connection before
  // ZeroMQ allocates it, during the handshake too.
  router_->set(zmq::sockopt::maxmsgsize,
               static_cast<std::int64_t>(std::min(opts_.max_frame_bytes,
                                                  opts_.max_body_bytes + wire::max_header_bytes + 64)));
  try {
    router_->bind(opts_.bind);
  } catch (const zmq::error_t& e) {
    throw exception(error_code::unavailable, "cannot listen on " + opts_.bind + ": " + e.what());
  }
  endpoint_ = router_->get(zmq::sockopt::last_endpoint);
  // Handshakes that fail before ZAP is asked are seen only by a monitor.
  const std::string monitor = "inproc://handshakes-" + unique_id::random().hex();
  if (zmq_socket_monitor(router_->handle(), monitor.c_str(),
                         ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) != 0) {
    throw exception(error_code::internal, "cannot monitor the listening socket");
  }
  events_ = std::make_unique<zmq::socket_t>(*ctx_, zmq::socket_type::pair);
  events_->set(zmq::sockopt::linger, 0);
  events_->connect(monitor);
  if (opts_.creds.identity().role == peer_role::job) {
    // A namespace job's processes give their key: the jobs that meet them cannot derive it.
    const auto& job = opts_.creds.identity().job;
    endpoint_ = job_endpoint(endpoint_, job,
                             is_namespace_job(job) ? std::optional<key32>(opts_.creds.public_key()) : std::nullopt);
  }
  wake_rx_ = std::make_unique<zmq::socket_t>(*ctx_, zmq::socket_type::pair);
  wake_tx_ = std::make_unique<zmq::socket_t>(*ctx_, zmq::socket_type::pair);
  const std::string inproc = "inproc://wake-" + unique_id::random().hex();
  wake_rx_->bind(inproc);
  wake_tx_->connect(inproc);
}

zmq_transport::~zmq_transport() { stop(); }

void zmq_transport::handle_directly(const unique_id& id,
                                    std::function<void(protocol::message&)> handler) {
  direct_[id] = std::move(handler);
}

void zmq_transport::start() { seat_.start(); }

void zmq_transport::run_on_receiver(std::function<void()> work) { seat_.run_on_receiver(std::move(work)); }

void zmq_transport::post_to_receiver(std::function<void()> work) { seat_.post(std::move(work)); }

void zmq_transport::receiver_waits() { seat_.receiver_waits(); }

bool zmq_transport::receive_until(const std::function<bool()>& done,
                                  std::chrono::steady_clock::time_point until) {
  return seat_.receive_until(done, until);
}

void zmq_transport::wake_receiving() { seat_.wake_receiving(); }

void zmq_transport::stop() {
  if (stopped_.exchange(true)) return;
  seat_.stop();  // its threads poll no more
  peers_.close_all();
  zmq_socket_monitor(router_->handle(), nullptr, 0);
  events_->close();
  router_->close();
  zap_->close();
  wake_rx_->close();
  wake_tx_->close();
  ctx_->close();  // waits (up to linger_ms per socket) for queued messages to leave
}

void zmq_transport::connect_options(zmq::socket_t& s, const std::string& endpoint,
                                    bool as_cluster) {
  auto parts = split_endpoint(endpoint);
  if (!parts) throw exception(parts.error().code(), parts.error().message());
  key32 pub = opts_.creds.public_key(), sec = opts_.creds.secret_key();
  if (as_cluster) {
    auto kp = opts_.creds.cluster_keypair();
    if (kp) std::tie(pub, sec) = *kp;
  }
  if (opts_.encrypt) {
    key32 server = opts_.creds.cluster_public();
    if (!parts->job.nil()) {
      auto k = opts_.creds.job_public(parts->job);
      if (k) {
        server = *k;
      } else if (auto met = job_keys_.key_of(parts->job); met && met->size() == 32) {
        std::memcpy(server.data(), met->data(), 32);  // a job the head let this one meet
      } else if (parts->key) {
        server = *parts->key;  // a namespace job's endpoint gives its key
      } else {
        throw exception(k.error().code(), k.error().message());
      }
    }
    s.set(zmq::sockopt::curve_serverkey, zmq::const_buffer(server.data(), 32));
    s.set(zmq::sockopt::curve_publickey, zmq::const_buffer(pub.data(), 32));
    s.set(zmq::sockopt::curve_secretkey, zmq::const_buffer(sec.data(), 32));
  } else {
    if (!parts->job.nil() && opts_.creds.identity().role == peer_role::job &&
        parts->job != opts_.creds.identity().job) {
      throw exception(error_code::permission_denied,
                      "job " + opts_.creds.identity().job.short_hex() +
                        " cannot reach a process of job " + parts->job.short_hex());
    }
    const bool cluster = as_cluster && opts_.creds.holds_cluster_secret();
    const peer_identity who = cluster ? peer_identity{peer_role::cluster, {}} : opts_.creds.identity();
    s.set(zmq::sockopt::plain_username, who.user_id());
    s.set(zmq::sockopt::plain_password, opts_.creds.plain_password(cluster));
  }
  s.connect(parts->tcp);
}

std::shared_ptr<zmq_peer> zmq_transport::peer_for(const std::string& endpoint) {
  return peers_.get(endpoint, [&]() -> std::shared_ptr<zmq_peer> {
    if (stopped_) return nullptr;
    try {
      // Out of file descriptors, the socket itself cannot be made: the send fails (as one
      // to a peer that is gone), it does not throw into the sender.
      auto p = std::make_shared<zmq_peer>(*ctx_);
      p->socket.set(zmq::sockopt::linger, linger_ms);
      p->socket.set(zmq::sockopt::sndhwm, 0);  // never drop or block: peers' death is
                                               // detected by heartbeats and reapers
      p->socket.set(zmq::sockopt::rcvhwm, 16);
      // A peer that went away is retried less and less often, up to every 2 s: a head
      // restarted after a crash is reached again within 2 s of its start, and it gives the
      // nodes and drivers it recovers that long on top of node_timeout_ms (head::restore;
      // a dead peer costs one refused connection per 2 s until it is forgotten).
      p->socket.set(zmq::sockopt::reconnect_ivl_max,
                    static_cast<int>(reconnect_interval_max.count()));
      connect_options(p->socket, endpoint, /*as_cluster=*/false);
      return p;
    } catch (const std::exception& e) {
      CELER_LOG(error, "transport", "cannot connect to " + endpoint + ": " + e.what());
      return nullptr;
    }
  });
}

std::size_t zmq_transport::peer_count() const { return peers_.size(); }

bool zmq_transport::send(const address& to, protocol::message&& m) {
  if (to.endpoint.empty() || to.endpoint == endpoint_) return local_.send(to, std::move(m));
  return send_encoded(to, m);
}

bool zmq_transport::send_copy(const address& to, const protocol::message& m) {
  if (to.endpoint.empty() || to.endpoint == endpoint_) return local_.send(to, protocol::message(m));
  return send_encoded(to, m);
}

bool zmq_transport::send_encoded(const address& to, const protocol::message& m) {
  if (stopped_) return false;
  // Kind and destination ride in the message frame: one frame (one CURVE box) for a small
  // message.
  auto frames = wire::encode_shared(m, "M" + to.id.bytes());
  auto p = peer_for(to.endpoint);
  if (p == nullptr) return false;
  try {
    std::lock_guard lock(p->mutex);
    p->socket.send(adopt(std::move(frames.message)),
                   frames.bulk.empty() ? zmq::send_flags::none : zmq::send_flags::sndmore);
    for (std::size_t i = 0; i < frames.bulk.size(); ++i) {
      p->socket.send(share(frames.bulk[i]), i + 1 < frames.bulk.size() ? zmq::send_flags::sndmore
                                                                       : zmq::send_flags::none);
    }
  } catch (const zmq::error_t& e) {
    CELER_LOG(warn, "transport", "sending to " + to.endpoint + " failed: " + e.what());
    return false;
  }
  return true;
}

void zmq_transport::forget(const std::string& endpoint) {
  auto gone = peers_.take(endpoint);
  if (gone == nullptr) return;
  // None can find it any more; a sender that already holds it finds the socket closed, and
  // its send fails (as to a peer that is gone).
  std::lock_guard plock(gone->mutex);
  gone->socket.set(zmq::sockopt::linger, 0);
  gone->socket.close();
}

expected<void> zmq_transport::probe(const std::string& endpoint, std::chrono::milliseconds timeout,
                                    when_refused refused) {
  try {
    zmq::socket_t s(*ctx_, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    // A refused handshake is silent on the socket itself; its monitor says why. It also says
    // when the TCP connection itself was refused (ZeroMQ then retries it quietly): nothing
    // listens there, which a caller may want to hear at once rather than after `timeout`.
    const std::string monitor = "inproc://probe-" + unique_id::random().hex();
    if (zmq_socket_monitor(s.handle(), monitor.c_str(),
                           ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                             ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_CONNECTED |
                             ZMQ_EVENT_CONNECT_RETRIED) != 0) {
      return error(error_code::internal, "cannot monitor a probe socket");
    }
    zmq::socket_t events(*ctx_, zmq::socket_type::pair);
    events.set(zmq::sockopt::linger, 0);
    events.connect(monitor);
    // Holders of the secret say hello as the cluster, so that a driver can register its job.
    connect_options(s, endpoint, /*as_cluster=*/true);
    wire::hello h{std::string(wire::magic), protocol_version, {}, endpoint_};
    if (opts_.creds.identity().role == peer_role::job && opts_.creds.holds_cluster_secret()) {
      h.register_job = opts_.creds.identity().job.hex();
    }
    const std::string hello = wire::encode_hello(h);
    s.send(zmq::str_buffer("H"), zmq::send_flags::sndmore);
    s.send(zmq::buffer(hello), zmq::send_flags::none);
    std::array<zmq::pollitem_t, 2> items{
      {{s.handle(), 0, ZMQ_POLLIN, 0}, {events.handle(), 0, ZMQ_POLLIN, 0}}};
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    // Whether a TCP connection was ever made, and whether one was refused before that.
    bool connected = false;
    bool was_refused = false;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || zmq::poll(items.data(), items.size(), left) == 0) {
        zmq_socket_monitor(s.handle(), nullptr, 0);
        if (was_refused && !connected) {
          return error(error_code::unavailable, "nothing answers at " + endpoint +
                                                  ": every connection was refused for " +
                                                  std::to_string(timeout.count()) + " ms");
        }
        return error(error_code::unavailable,
                     "no celer process answered at " + endpoint + " within " +
                       std::to_string(timeout.count()) + " ms");
      }
      if (items[1].revents & ZMQ_POLLIN) {
        std::vector<zmq::message_t> ev;
        (void)zmq::recv_multipart(events, std::back_inserter(ev));
        std::uint16_t event = 0;
        if (!ev.empty() && ev[0].size() >= 2) std::memcpy(&event, ev[0].data(), 2);
        if (event == ZMQ_EVENT_CONNECTED) {
          connected = true;
          continue;
        }
        if (event == ZMQ_EVENT_CONNECT_RETRIED) {
          if (connected) continue;  // a connection that was made and lost: keep waiting
          was_refused = true;
          if (refused == when_refused::fail) {
            zmq_socket_monitor(s.handle(), nullptr, 0);
            return error(error_code::unavailable,
                         "nothing answers at " + endpoint + ": the connection was refused");
          }
          continue;
        }
        zmq_socket_monitor(s.handle(), nullptr, 0);
        return error(error_code::unauthenticated,
                     endpoint + " refused this process in the handshake: the cluster token is "
                                "wrong, or encryption is on at one end only (the encryption "
                                "knob must match)");
      }
      if (items[0].revents & ZMQ_POLLIN) break;
    }
    zmq_socket_monitor(s.handle(), nullptr, 0);
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
  } catch (const exception& e) {
    return error(e.code(), e.what());
  }
}

bool zmq_transport::poll_once(std::chrono::milliseconds timeout) {
  // Per thread: the standby and the receiver take turns, never at once.
  thread_local std::vector<zmq::message_t> parts;
  thread_local std::vector<std::string_view> views;
  thread_local std::vector<std::shared_ptr<const void>> owners;
  std::array<zmq::pollitem_t, 4> items{{{router_->handle(), 0, ZMQ_POLLIN, 0},
                                        {wake_rx_->handle(), 0, ZMQ_POLLIN, 0},
                                        {zap_->handle(), 0, ZMQ_POLLIN, 0},
                                        {events_->handle(), 0, ZMQ_POLLIN, 0}}};
  // One thread at a time, always (ZeroMQ sockets are not thread-safe): counted if not.
  const receiver_seat::poller seat_check(seat_);
  {
    if (stopped_) return false;
    try {
      zmq::poll(items.data(), items.size(),
                !key_lookups_.empty() ? std::chrono::milliseconds(200) : timeout);
      if (items[1].revents & ZMQ_POLLIN) {
        // Every word says "look at the seat's flags" ("g": a thread wants the seat, "r":
        // the receiver wants it back, "w": look at done() again, "p": run posted work, "x":
        // stop): take them all.
        zmq::message_t word;
        while (wake_rx_->recv(word, zmq::recv_flags::dontwait)) {
        }
        // After the drain: a "w" rung from now on is unread, and one rung before is read
        // (its fill shows in the caller's next look at done()).
        seat_.heard_wake();
        return !stopped_;
      }
      if (items[2].revents & ZMQ_POLLIN) on_zap();
      if (items[3].revents & ZMQ_POLLIN) on_event();
      if (!key_lookups_.empty()) expire_key_lookups();
      if (!(items[0].revents & ZMQ_POLLIN)) return true;
      // Drain what is ready before polling again.
      for (;;) {
        parts.clear();
        bool more = true;
        bool first = true;
        std::size_t bytes = 0;
        bool oversized = false;
        while (more) {
          zmq::message_t part;
          const auto got =
            router_->recv(part, first ? zmq::recv_flags::dontwait : zmq::recv_flags::none);
          if (!got) break;
          first = false;
          more = part.more();
          bytes += part.size();
          // The whole message is capped, not one frame: past the cap, the rest is dropped
          // as it is read.
          if (bytes > opts_.max_body_bytes + 4096) oversized = true;
          if (!oversized && parts.size() < max_parts + 1) parts.push_back(std::move(part));
        }
        if (parts.empty()) break;
        if (oversized) {
          ++count_.malformed;
          refusals_.warn("dropped a message of over " + std::to_string(opts_.max_body_bytes) +
                         " bytes (max_message_bytes)");
          continue;
        }
        const char* user = parts.size() > 1 ? zmq_msg_gets(parts[1].handle(), "User-Id") : nullptr;
        // Bulk frames (after routing id and message frame) large enough to matter are lent
        // to the decoded message, which may keep them (shared_bytes) instead of a copy.
        owners.clear();
        for (std::size_t i = 2; i < parts.size(); ++i) {
          if (parts[i].size() < protocol::bulk::threshold) {
            owners.emplace_back();
            continue;
          }
          auto held = std::make_shared<zmq::message_t>();
          held->move(parts[i]);
          owners.push_back(std::move(held));
        }
        views.clear();
        for (std::size_t i = 0; i < parts.size(); ++i) {
          if (i >= 2 && owners[i - 2] != nullptr) {
            const auto* held = static_cast<const zmq::message_t*>(owners[i - 2].get());
            views.emplace_back(held->data<char>(), held->size());
          } else {
            views.emplace_back(parts[i].data<char>(), parts[i].size());
          }
        }
        on_frames(views, user, owners);
        owners.clear();
        // A handler ran work off the seat and the standby holds it now.
        if (seat_.reclaim_wanted()) return true;
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return false;
      CELER_LOG(error, "transport", std::string("receive failed: ") + e.what());
    }
  }
  return true;
}

void zmq_transport::on_event() {
  std::vector<zmq::message_t> frames;
  if (!zmq::recv_multipart(*events_, std::back_inserter(frames), zmq::recv_flags::dontwait)) return;
  std::uint16_t event = 0;
  if (!frames.empty() && frames[0].size() >= 2) std::memcpy(&event, frames[0].data(), 2);
  ++count_.failed;
  if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
    // Most often a peer that went away mid-handshake (a process stopping); said once in a
    // while only.
    refusals_.warn("a connection ended during its handshake");
    return;
  }
  refusals_.warn("a connection failed its handshake: a peer without this cluster's keys, one "
                 "whose encryption knob differs, or one still reconnecting to an endpoint that "
                 "a process of another job holds now");
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

void zmq_transport::on_hello(const std::string& rid, std::string_view frame,
                             const peer_identity* who) {
  auto h = wire::decode_hello(frame);
  if (!h) {
    refusals_.warn("refused a hello: " + h.error().message());
    reply(rid, 'R', h.error().message());
    return;
  }
  if (!h->register_job.empty()) {
    auto j = job_id::parse(h->register_job);
    if (who == nullptr || who->role != peer_role::cluster || !j || j->nil()) {
      ++count_.denied;
      refusals_.warn("refused to register a job for " +
                     (who == nullptr ? std::string("an unknown peer") : who->describe()));
      reply(rid, 'R', "only holders of the cluster token register jobs");
      return;
    }
    // A driver started with the token could derive any credential: it is let into every
    // shared namespace.
    register_job(*j, {std::string(namespace_grants::every)});
  }
  reply(rid, 'A', "");
}

void zmq_transport::on_frames(std::vector<std::string_view>& parts, const char* user_id,
                              std::span<const std::shared_ptr<const void>> owners) {
  const std::string_view first = parts.size() > 1 ? parts[1] : std::string_view{};
  const char kind = first.empty() ? '\0' : first[0];
  // Every connection passed the handshake, so it has an identity; parse it once per run
  // of messages from the same one.
  const peer_identity* who = identities_.of(user_id);
  if (who == nullptr) {
    ++count_.malformed;
    refusals_.warn("dropped a message from a connection without an identity");
    return;
  }
  if (kind == 'H' && first.size() == 1 && parts.size() == 3) {
    on_hello(std::string(parts[0]), parts[2], who);
    return;
  }
  if ((kind == 'K' || kind == 'k') && first.size() == 1) {
    // A job's process may ask (about a job it may meet, answered to its own job's process);
    // only the head answers.
    const bool job_asks = kind == 'K' && who->role == peer_role::job && parts.size() == 4 &&
                          [&] {
                            auto reply_to = split_endpoint(parts[3]);
                            return reply_to && reply_to->job == who->job;
                          }();
    const bool answers = opts_.key_authority.empty();  // the head; a process that asks it does not
    if ((who->role != peer_role::cluster && !job_asks) || (kind == 'K' && !answers) || parts.size() != 4 ||
        parts[2].size() != 32) {
      ++count_.denied;
      refusals_.warn("dropped a key lookup from " + who->describe());
      return;
    }
    if (kind == 'K') {
      std::string job;
      if (auto known = job_keys_.find(std::string(parts[2]))) {
        if (!job_asks || grants_.may_meet(who->job, *known)) job = known->hex();
      }
      if (auto p = peer_for(std::string(parts[3]))) {
        std::lock_guard lock(p->mutex);
        p->socket.send(zmq::str_buffer("k"), zmq::send_flags::sndmore);
        p->socket.send(zmq::buffer(parts[2]), zmq::send_flags::sndmore);
        p->socket.send(zmq::buffer(job), zmq::send_flags::none);
      }
    } else {
      on_key_answer(parts[2], parts[3]);
    }
    return;
  }
  if (kind != 'M' || first.size() < 1 + id_bytes + 1 || parts.size() > max_parts) {
    ++count_.malformed;
    refusals_.warn("dropped " + std::to_string(parts.size() - 1) + " frames from " +
                   who->describe() +
                   " that are no message (expected 'M', destination and message, then bulk frames)");
    return;
  }
  const std::string_view destination = first.substr(1, id_bytes);
  parts[1] = first.substr(1 + id_bytes);  // the message frame, as wire::decode reads it
  // Who may send this type is known from the header alone: a message its sender may never
  // send is refused before its body is decoded.
  const peer_identity* self =
    opts_.creds.identity().role == peer_role::job ? &opts_.creds.identity() : nullptr;
  if (auto h = wire::peek_header(parts[1])) {
    if (auto ok = admit_type(*who, h->type, self); !ok) {
      ++count_.denied;
      refusals_.warn(ok.error().to_string());
      return;
    }
  }
  auto m = wire::decode(std::span<const std::string_view>(parts).subspan(1), opts_.max_body_bytes,
                        owners);
  if (!m) {
    ++count_.malformed;
    refusals_.warn("dropped a message from " + who->describe() + ": " + m.error().to_string());
    return;
  }
  if (auto ok = admit(*who, *m, self); !ok) {
    ++count_.denied;
    refusals_.warn(ok.error().to_string());
    return;
  }
  const address to{*unique_id::from_bytes(destination), {}};
  if (auto direct = direct_.find(to.id); direct != direct_.end()) {
    try {
      direct->second(*m);
    } catch (const std::exception& e) {
      CELER_LOG(error, "transport", std::string("handling ") + protocol::name_of(*m) + ": " + e.what());
    }
    ++count_.delivered;
    return;
  }
  const char* name = protocol::name_of(*m);
  if (!local_.send(to, std::move(*m))) {
    ++count_.undeliverable;
    CELER_LOG(info, "transport",
              std::string("no component ") + to.id.short_hex() + " here for " + name);
    return;
  }
  ++count_.delivered;
}

zmq_transport::counters zmq_transport::stats() const {
  return {count_.delivered.load(), count_.accepted.load(),  count_.refused.load(),
          count_.failed.load(),    count_.denied.load(),    count_.malformed.load(),
          count_.undeliverable.load(), seat_.overlaps()};
}

} // namespace celer
