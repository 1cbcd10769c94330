#pragma once
// The head's HTTP connections below the routes (server.hpp): who holds the server's threads
// and for how long. cpp-httplib gives each connection a thread for as long as it lasts and
// reads a request's line, headers and body with no bound on the time they take; here each
// connection is registered from accept to close, reads through a stream with a deadline and
// a byte budget per phase (the headers; then the body the pre-routing check allowed), and a
// new connection that finds every thread taken closes the oldest one that has not yet been
// authenticated (idle, still sending headers, or still queued). So slow senders cost a
// thread each for at most the header deadline, and never all of them while anyone else
// knocks.
//
//   connection_gate gate(limits);
//   auto srv = std::make_unique<guarded_server<httplib::Server>>(gate);
//   srv->new_task_queue = [&] { return gate.make_queue(); };
//   ... in the pre-routing handler, on this connection's thread:
//   connection_gate::current()->allow_body(bytes, deadline);

#include <httplib.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>

namespace celer::http {

struct connection_limits {
  /// Server threads: connections served at once (a followed log holds one throughout).
  int threads = 32;
  /// From a request's first byte to the end of its headers.
  std::chrono::milliseconds header_deadline{10'000};
  /// The request line and headers together.
  std::size_t header_bytes = 64u << 10;
  /// How long an idle connection is kept for its next request.
  std::chrono::milliseconds keep_alive{5'000};
  /// Requests on one connection before the server closes it.
  int requests_per_connection = 100;
  /// Each wait for bytes to read or room to write (what httplib calls its read and write
  /// timeouts).
  std::chrono::milliseconds io_timeout{5'000};
};

/// One accepted connection, from accept to close.
class connection {
public:
  enum class phase { queued, idle, headers, body, handling };

  /// The peer's address ("127.0.0.1"), for log lines.
  [[nodiscard]] const std::string& peer() const noexcept { return peer_; }
  /// From the pre-routing check, on this connection's thread: the body may take `bytes`
  /// until `deadline`; the request counts as authenticated from now on (never evicted).
  void allow_body(std::uint64_t bytes, std::chrono::steady_clock::time_point deadline);
  /// The request was refused before its body was read: the connection closes after the
  /// answer (a lingering close, so a small body's sender still reads it).
  void close_after_reply() noexcept { close_after_ = true; }

private:
  friend class connection_gate;
  template <class Base>
  friend class guarded_server;
  friend class guarded_stream;

  int fd_ = -1;
  std::string peer_;
  // Guarded by the gate's mutex: what eviction looks at.
  phase at_ = phase::queued;
  std::chrono::steady_clock::time_point since_;
  bool evicted_ = false;
  class connection_gate* gate_ = nullptr;
  // This connection's thread only.
  std::chrono::steady_clock::time_point deadline_;
  std::uint64_t budget_ = 0;
  bool close_after_ = false;
  const char* overrun_ = nullptr;  // what cut the request short, for the log
  std::string buffer_;             // read ahead of what httplib has consumed
  std::size_t consumed_ = 0;
};

class connection_gate {
public:
  explicit connection_gate(connection_limits limits) : limits_(limits) {}
  connection_gate(const connection_gate&) = delete;
  connection_gate& operator=(const connection_gate&) = delete;

  [[nodiscard]] const connection_limits& limits() const noexcept { return limits_; }
  /// httplib's task queue: `threads` threads; each accepted connection is registered (and
  /// may evict another) as it is queued.
  [[nodiscard]] httplib::TaskQueue* make_queue();
  /// The connection the calling server thread serves, or null.
  [[nodiscard]] static connection* current() noexcept;

  // For guarded_server, on the connection's thread.
  void begin(connection& c, int fd);
  void set_phase(connection& c, connection::phase p);
  [[nodiscard]] bool evicted(const connection& c);
  void end(connection& c);
  /// Shuts every live connection down (the server stops).
  void shutdown_all();

  /// Connections closed so far by eviction and by deadlines or budgets.
  [[nodiscard]] std::uint64_t evictions() const;
  [[nodiscard]] std::uint64_t cut_short() const;
  void note_cut_short(const connection& c);

private:
  friend class gated_queue;
  std::shared_ptr<connection> admit();
  connection_limits limits_;
  mutable std::mutex m_;
  std::list<std::shared_ptr<connection>> live_;  // in accept order
  std::uint64_t evictions_ = 0;
  std::uint64_t cut_short_ = 0;
};

/// A Stream for httplib with celer's deadline and byte budget: plain sockets or TLS.
class guarded_stream final : public httplib::Stream {
public:
  guarded_stream(connection& c, SSL* ssl, std::chrono::milliseconds io_timeout)
    : c_(c), ssl_(ssl), io_timeout_(io_timeout) {}
  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return c_.fd_; }

  /// Waits up to `timeout` (and no later than `deadline`) for bytes to read.
  [[nodiscard]] static bool wait_readable(connection& c, SSL* ssl, std::chrono::milliseconds timeout);

private:
  bool fill();
  connection& c_;
  SSL* ssl_;
  std::chrono::milliseconds io_timeout_;
};

/// Serves each connection itself (httplib's Server or SSLServer underneath, for parsing and
/// routing): registered with the gate, TLS handshake and headers under the deadline, reads
/// through guarded_stream.
template <class Base>
class guarded_server final : public Base {
public:
  template <class... Args>
  explicit guarded_server(connection_gate& gate, Args&&... args) : Base(std::forward<Args>(args)...), gate_(gate) {}

private:
  bool process_and_close_socket(socket_t sock) override;
  connection_gate& gate_;
};

/// A warning in the head's log about what a client did, at most 5 lines a second (anyone
/// who can connect can cause them); control characters shown as '?'.
void http_warning(const std::string& text);

/// The TLS handshake before `deadline` on a blocking socket: the session, or null.
[[nodiscard]] SSL* accept_tls(SSL_CTX* ctx, int fd, std::chrono::steady_clock::time_point deadline);
/// Closes after draining what the peer still sends (up to 256 KiB or 1 s), so that a peer
/// whose body was refused unread reads the refusal rather than a reset.
void lingering_close(int fd);

template <class Base>
bool guarded_server<Base>::process_and_close_socket(socket_t sock) {
  // Set by the gate's queue for the duration of this call (it owns the connection).
  connection* c = connection_gate::current();
  bool ret = false;
  if (c != nullptr) gate_.begin(*c, sock);
  SSL* ssl = nullptr;
  bool ok = c != nullptr && !gate_.evicted(*c);
  if (ok) {
    if constexpr (std::is_same_v<Base, httplib::SSLServer>) {
      gate_.set_phase(*c, connection::phase::headers);
      ssl = accept_tls(this->ssl_context(), sock, std::chrono::steady_clock::now() + gate_.limits().header_deadline);
      ok = ssl != nullptr;
    }
  }
  const auto& lim = gate_.limits();
  for (int count = lim.requests_per_connection; ok && count > 0 && this->svr_sock_ != INVALID_SOCKET; --count) {
    gate_.set_phase(*c, connection::phase::idle);
    c->deadline_ = std::chrono::steady_clock::now() + lim.keep_alive;
    c->budget_ = lim.header_bytes;
    if (!guarded_stream::wait_readable(*c, ssl, lim.keep_alive) || gate_.evicted(*c)) break;
    gate_.set_phase(*c, connection::phase::headers);
    c->deadline_ = std::chrono::steady_clock::now() + lim.header_deadline;
    c->overrun_ = nullptr;
    c->close_after_ = false;
    guarded_stream strm(*c, ssl, lim.io_timeout);
    bool closed = false;
    ret = this->process_request(strm, /*close_connection=*/count == 1, closed, nullptr);
    if (c->overrun_ != nullptr) {
      gate_.note_cut_short(*c);
      break;  // what is left of its request is never read
    }
    if (!ret || closed || c->close_after_) break;
  }
  if (ssl != nullptr) {
    if (ret && !c->close_after_) SSL_shutdown(ssl);
    SSL_free(ssl);
  }
  if (c != nullptr) gate_.end(*c);
  if (c != nullptr && c->close_after_) {
    lingering_close(sock);
  } else {
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
  }
  return ret;
}

} // namespace celer::http
