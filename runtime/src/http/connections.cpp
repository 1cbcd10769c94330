// The head's HTTP connections below the routes (connections.hpp).
#include "http/connections.hpp"

#include "transport/rate_limited_log.hpp"

#include <algorithm>
#include <cstring>
#include <condition_variable>
#include <deque>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace celer::http {
namespace {

thread_local connection* this_connection = nullptr;

std::mutex log_mutex;
rate_limited_log& http_log() {
  static rate_limited_log log("http");
  return log;
}
void warn(const std::string& text) { http_warning(text); }

const char* phase_name(connection::phase p) {
  switch (p) {
    case connection::phase::queued: return "queued";
    case connection::phase::idle: return "idle";
    case connection::phase::headers: return "sending its request's headers";
    case connection::phase::body: return "sending a body";
    case connection::phase::handling: return "being answered";
  }
  return "?";
}

bool unauthenticated(connection::phase p) {
  return p == connection::phase::queued || p == connection::phase::idle || p == connection::phase::headers;
}

int millis_until(std::chrono::steady_clock::time_point deadline, std::chrono::milliseconds cap) {
  // Rounded up: a wait that ends before the deadline would not count as reaching it.
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, cap.count()));
}

bool poll_one(int fd, short events, int timeout_ms) {
  pollfd p{.fd = fd, .events = events, .revents = 0};
  int r = 0;
  do {
    r = ::poll(&p, 1, timeout_ms);
  } while (r < 0 && errno == EINTR);
  return r > 0;
}

void address_of(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  const int r = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len)
                     : ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  if (r != 0) return;
  char host[NI_MAXHOST];
  char serv[NI_MAXSERV];
  if (::getnameinfo(reinterpret_cast<sockaddr*>(&a), len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
    ip = host;
    port = std::atoi(serv);
  }
}

} // namespace

void http_warning(const std::string& text) {
  std::string shown = text;
  for (auto& ch : shown)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7F) ch = '?';
  std::lock_guard lock(log_mutex);
  http_log().warn(shown);
}

void connection::allow_body(std::uint64_t bytes, std::chrono::steady_clock::time_point deadline) {
  budget_ = bytes;
  deadline_ = deadline;
  if (gate_ != nullptr) gate_->set_phase(*this, phase::body);
}

/// httplib's task queue: a fixed pool of threads; each task is one accepted connection,
/// registered with the gate as it is queued.
class gated_queue final : public httplib::TaskQueue {
public:
  explicit gated_queue(connection_gate& gate) : gate_(gate) {
    for (int i = 0; i < gate.limits().threads; ++i) threads_.emplace_back([this] { work(); });
  }
  void enqueue(std::function<void()> fn) override {
    auto c = gate_.admit();
    {
      std::lock_guard lock(m_);
      jobs_.emplace_back(std::move(fn), std::move(c));
    }
    cv_.notify_one();
  }
  void shutdown() override {
    {
      std::lock_guard lock(m_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }

private:
  void work() {
    for (;;) {
      std::pair<std::function<void()>, std::shared_ptr<connection>> job;
      {
        std::unique_lock lock(m_);
        cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      this_connection = job.second.get();
      job.first();
      this_connection = nullptr;
    }
  }
  connection_gate& gate_;
  std::mutex m_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::deque<std::pair<std::function<void()>, std::shared_ptr<connection>>> jobs_;
  std::vector<std::thread> threads_;
};

httplib::TaskQueue* connection_gate::make_queue() { return new gated_queue(*this); }

connection* connection_gate::current() noexcept { return this_connection; }

std::shared_ptr<connection> connection_gate::admit() {
  auto c = std::make_shared<connection>();
  c->gate_ = this;
  std::lock_guard lock(m_);
  c->since_ = std::chrono::steady_clock::now();
  // Every thread taken (or about to be, by those queued): the oldest connection not yet
  // authenticated makes room. Its thread notices at once (its socket is shut down) or, if
  // it is still queued, when it starts.
  if (live_.size() >= static_cast<std::size_t>(limits_.threads)) {
    std::shared_ptr<connection> oldest;
    for (const auto& l : live_)
      if (!l->evicted_ && unauthenticated(l->at_) && (!oldest || l->since_ < oldest->since_)) oldest = l;
    if (oldest) {
      oldest->evicted_ = true;
      ++evictions_;
      if (oldest->fd_ >= 0) ::shutdown(oldest->fd_, SHUT_RDWR);
      const auto held = std::chrono::duration_cast<std::chrono::milliseconds>(c->since_ - oldest->since_).count();
      warn("HTTP: all " + std::to_string(limits_.threads) + " connections taken; closed the oldest not yet authenticated (" +
           (oldest->peer_.empty() ? std::string("queued") : "from " + oldest->peer_) + ", " + phase_name(oldest->at_) +
           " for " + std::to_string(held) + " ms) to serve a new one");
    }
  }
  live_.push_back(c);
  return c;
}

void connection_gate::begin(connection& c, int fd) {
  std::string ip;
  int port = 0;
  address_of(fd, /*peer=*/true, ip, port);
  std::lock_guard lock(m_);
  c.fd_ = fd;
  c.peer_ = ip;
  if (c.evicted_) ::shutdown(fd, SHUT_RDWR);
}

void connection_gate::set_phase(connection& c, connection::phase p) {
  std::lock_guard lock(m_);
  c.at_ = p;
  c.since_ = std::chrono::steady_clock::now();
}

bool connection_gate::evicted(const connection& c) {
  std::lock_guard lock(m_);
  return c.evicted_;
}

void connection_gate::end(connection& c) {
  std::lock_guard lock(m_);
  c.fd_ = -1;  // from here on nobody shuts it down: its number may be reused once closed
  live_.remove_if([&](const auto& l) { return l.get() == &c; });
}

void connection_gate::shutdown_all() {
  std::lock_guard lock(m_);
  for (const auto& c : live_) {
    c->evicted_ = true;
    if (c->fd_ >= 0) ::shutdown(c->fd_, SHUT_RDWR);
  }
}

void connection_gate::note_cut_short(const connection& c) {
  {
    std::lock_guard lock(m_);
    ++cut_short_;
  }
  warn("HTTP: closed the connection from " + c.peer_ + ": " + c.overrun_);
}

std::uint64_t connection_gate::evictions() const {
  std::lock_guard lock(m_);
  return evictions_;
}

std::uint64_t connection_gate::cut_short() const {
  std::lock_guard lock(m_);
  return cut_short_;
}

bool guarded_stream::wait_readable(connection& c, SSL* ssl, std::chrono::milliseconds timeout) {
  if (c.consumed_ < c.buffer_.size()) return true;
  if (ssl != nullptr && SSL_pending(ssl) > 0) return true;
  return poll_one(c.fd_, POLLIN, millis_until(c.deadline_, timeout));
}

bool guarded_stream::is_readable() const { return wait_readable(c_, ssl_, io_timeout_); }

bool guarded_stream::is_writable() const { return poll_one(c_.fd_, POLLOUT, static_cast<int>(io_timeout_.count())); }

bool guarded_stream::fill() {
  if (std::chrono::steady_clock::now() >= c_.deadline_) {
    c_.overrun_ = c_.at_ == connection::phase::body ? "its body did not arrive in time"
                                                     : "its request's headers did not arrive in time";
    return false;
  }
  if (!wait_readable(c_, ssl_, io_timeout_)) {
    if (std::chrono::steady_clock::now() >= c_.deadline_)
      c_.overrun_ = c_.at_ == connection::phase::body ? "its body did not arrive in time"
                                                       : "its request's headers did not arrive in time";
    return false;
  }
  c_.buffer_.resize(16u << 10);
  c_.consumed_ = 0;
  ssize_t n = 0;
  if (ssl_ != nullptr) {
    n = SSL_read(ssl_, c_.buffer_.data(), static_cast<int>(c_.buffer_.size()));
  } else {
    do {
      n = ::recv(c_.fd_, c_.buffer_.data(), c_.buffer_.size(), 0);
    } while (n < 0 && errno == EINTR);
  }
  c_.buffer_.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return n > 0;
}

ssize_t guarded_stream::read(char* ptr, size_t size) {
  if (c_.budget_ == 0) {
    // The body ends where its Content-Length said (a DELETE without one has none: httplib
    // would read it up to the end of the stream).
    if (c_.at_ == connection::phase::body) return 0;
    if (c_.overrun_ == nullptr) c_.overrun_ = "its request line and headers are longer than allowed";
    return -1;
  }
  if (c_.consumed_ >= c_.buffer_.size() && !fill()) return c_.overrun_ != nullptr ? -1 : 0;
  const auto n = std::min<std::uint64_t>({size, c_.buffer_.size() - c_.consumed_, c_.budget_});
  std::memcpy(ptr, c_.buffer_.data() + c_.consumed_, n);
  c_.consumed_ += n;
  c_.budget_ -= n;
  return static_cast<ssize_t>(n);
}

ssize_t guarded_stream::write(const char* ptr, size_t size) {
  if (!is_writable()) return -1;
  if (ssl_ != nullptr) return SSL_write(ssl_, ptr, static_cast<int>(size));
  ssize_t n = 0;
  do {
    n = ::send(c_.fd_, ptr, size, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n;
}

void guarded_stream::get_remote_ip_and_port(std::string& ip, int& port) const { address_of(c_.fd_, true, ip, port); }

void guarded_stream::get_local_ip_and_port(std::string& ip, int& port) const { address_of(c_.fd_, false, ip, port); }

SSL* accept_tls(SSL_CTX* ctx, int fd, std::chrono::steady_clock::time_point deadline) {
  SSL* ssl = SSL_new(ctx);
  if (ssl == nullptr) return nullptr;
  const int flags = ::fcntl(fd, F_GETFL, 0);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  bool ok = SSL_set_fd(ssl, fd) == 1;
  while (ok) {
    const int r = SSL_accept(ssl);
    if (r == 1) break;
    const int e = SSL_get_error(ssl, r);
    const int left = millis_until(deadline, std::chrono::milliseconds(60'000));
    if (left <= 0) ok = false;
    else if (e == SSL_ERROR_WANT_READ) ok = poll_one(fd, POLLIN, left);
    else if (e == SSL_ERROR_WANT_WRITE) ok = poll_one(fd, POLLOUT, left);
    else ok = false;
  }
  ::fcntl(fd, F_SETFL, flags);
  if (!ok) {
    SSL_free(ssl);
    return nullptr;
  }
  return ssl;
}

void lingering_close(int fd) {
  ::shutdown(fd, SHUT_WR);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  char sink[16u << 10];
  std::size_t drained = 0;
  while (drained < (256u << 10) && poll_one(fd, POLLIN, millis_until(deadline, std::chrono::milliseconds(1000)))) {
    const auto n = ::recv(fd, sink, sizeof sink, 0);
    if (n <= 0) break;
    drained += static_cast<std::size_t>(n);
  }
  ::close(fd);
}

} // namespace celer::http
