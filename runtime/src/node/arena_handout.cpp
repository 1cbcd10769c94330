#include "node/arena_handout.hpp"

#include "log.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace celer {

namespace {

std::string os_text(const std::string& what) { return what + ": " + std::strerror(errno); }

/// An abstract address: sun_path starts with a NUL byte, then the name (no file, so no
/// file permissions: processes of other uids and under Landlock reach it alike).
socklen_t abstract_address(const std::string& name, sockaddr_un& a) {
  std::memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  const std::size_t n = std::min(name.size(), sizeof a.sun_path - 1);
  std::memcpy(a.sun_path + 1, name.data(), n);
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

bool random_bytes(char* out, std::size_t n) {
  std::size_t got = 0;
  while (got < n) {
    const auto r = ::getrandom(out + got, n - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    got += static_cast<std::size_t>(r);
  }
  return true;
}

std::string hex_of(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

void set_timeout(int fd, int option, std::chrono::milliseconds t) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(t.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((t.count() % 1000) * 1000);
  (void)::setsockopt(fd, SOL_SOCKET, option, &tv, sizeof tv);
}

} // namespace

expected<std::unique_ptr<arena_handout>> arena_handout::start(config cfg) {
  std::string suffix(8, '\0');
  if (!random_bytes(suffix.data(), suffix.size())) {
    return error(error_code::unavailable, os_text("no random name for the store's arena socket"));
  }
  const std::string name = "celer-arenas-" + hex_of(suffix);
  // Non-blocking: serve() accepts until the queue is empty.
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return error(error_code::unavailable, os_text("creating the store's arena socket"));
  sockaddr_un a{};
  const auto len = abstract_address(name, a);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&a), len) != 0 || ::listen(fd, 64) != 0) {
    const auto e = error(error_code::unavailable, os_text("binding the store's arena socket @" + name));
    ::close(fd);
    return e;
  }
  std::unique_ptr<arena_handout> h(new arena_handout(std::move(cfg), fd, name));
  if (::pipe2(h->wake_, O_CLOEXEC) != 0) {
    return error(error_code::unavailable, os_text("creating the store's arena socket's pipe"));
  }
  h->server_ = std::thread([p = h.get()] { p->serve(); });
  return h;
}

arena_handout::arena_handout(config cfg, int listener, std::string name)
  : cfg_(std::move(cfg)), listener_(listener), name_(std::move(name)) {}

arena_handout::~arena_handout() {
  if (server_.joinable()) {
    const char stop = 0;
    (void)!::write(wake_[1], &stop, 1);
    server_.join();
  }
  for (int fd : {listener_, wake_[0], wake_[1]}) {
    if (fd >= 0) ::close(fd);
  }
  for (auto& [bytes, t] : tickets_) ::close(t.fd);
}

std::chrono::steady_clock::time_point arena_handout::now() const {
  return cfg_.clock ? cfg_.clock() : std::chrono::steady_clock::now();
}

void arena_handout::sweep(std::chrono::steady_clock::time_point t) {
  for (auto it = tickets_.begin(); it != tickets_.end();) {
    if (it->second.expires <= t) {
      ::close(it->second.fd);
      it = tickets_.erase(it);
    } else {
      ++it;
    }
  }
}

std::size_t arena_handout::outstanding() const {
  std::lock_guard lock(mutex_);
  return tickets_.size();
}

std::string arena_handout::issue(const unique_id& job, std::uint64_t arena, int fd) {
  std::string random(ticket_bytes / 2, '\0');
  if (!random_bytes(random.data(), random.size())) {
    CELER_LOG(error, "store", os_text("no random bytes for an arena ticket"));
    return {};
  }
  const std::string bytes = hex_of(random);
  const int own = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (own < 0) {
    CELER_LOG(error, "store", os_text("duplicating an arena's fd for a ticket"));
    return {};
  }
  const auto t = now();
  std::lock_guard lock(mutex_);
  sweep(t);
  tickets_[bytes] = ticket{job, arena, own, t + cfg_.ttl};
  return bytes;
}

void arena_handout::serve() {
  // Connections whose request is still coming in, each until its deadline: served side by
  // side, so that a silent one holds no other up (at most max_pending at once; past that,
  // new ones wait in the listen queue).
  struct pending {
    int fd = -1;
    std::chrono::steady_clock::time_point deadline;
    std::string got;
  };
  constexpr std::size_t max_pending = 64;
  std::vector<pending> conns;
  std::vector<pollfd> fds;
  const auto drop = [&](std::size_t i) {
    ::close(conns[i].fd);
    if (i + 1 != conns.size()) conns[i] = std::move(conns.back());
    conns.pop_back();
  };
  for (;;) {
    fds.clear();
    fds.push_back({wake_[0], POLLIN, 0});
    fds.push_back({conns.size() < max_pending ? listener_ : -1, POLLIN, 0});
    for (const auto& c : conns) fds.push_back({c.fd, POLLIN, 0});
    int wait_ms = -1;
    const auto t = std::chrono::steady_clock::now();
    for (const auto& c : conns) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(c.deadline - t).count();
      const int ms = static_cast<int>(std::max<std::int64_t>(left + 1, 0));
      wait_ms = wait_ms < 0 ? ms : std::min(wait_ms, ms);
    }
    if (::poll(fds.data(), fds.size(), wait_ms) < 0) {
      if (errno == EINTR) continue;
      CELER_LOG(error, "store", os_text("the arena socket stopped serving"));
      break;
    }
    if (fds[0].revents != 0) break;
    // From the last: drop() moves the last connection into the slot it empties.
    for (std::size_t i = conns.size(); i-- > 0;) {
      if (fds[i + 2].revents == 0) continue;
      auto& c = conns[i];
      char buf[request_bytes];
      const auto r = ::recv(c.fd, buf, request_bytes - c.got.size(), MSG_DONTWAIT);
      if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (r > 0) c.got.append(buf, static_cast<std::size_t>(r));
      if (r > 0 && c.got.size() < request_bytes) continue;
      answer(c.fd, r > 0 ? c.got : std::string());
      drop(i);
    }
    const auto now_t = std::chrono::steady_clock::now();
    for (std::size_t i = conns.size(); i-- > 0;) {
      if (conns[i].deadline > now_t) continue;
      answer(conns[i].fd, std::string());
      drop(i);
    }
    while (conns.size() < max_pending) {
      const int conn = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (conn < 0) break;
      conns.push_back({conn, std::chrono::steady_clock::now() + cfg_.read_deadline, {}});
    }
  }
  for (const auto& c : conns) ::close(c.fd);
}

void arena_handout::answer(int conn, const std::string& request) {
  ucred peer{};
  socklen_t peer_len = sizeof peer;
  (void)::getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &peer, &peer_len);
  const std::string who = "pid " + std::to_string(peer.pid) + " (uid " + std::to_string(peer.uid) + ")";
  const auto refuse = [&](const std::string& why) {
    ++refused_;
    denials_.warn("permission_denied: " + who + " asked for an object arena: " + why + "; refused");
    const std::string text = std::string(1, refused) + "permission_denied: " + why;
    (void)::send(conn, text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  };
  if (request.size() != request_bytes) {
    refuse("no complete request (" + std::to_string(request_bytes) + " bytes) within " +
           std::to_string(cfg_.read_deadline.count()) + " ms");
    return;
  }
  std::uint64_t arena = 0;
  for (int i = 7; i >= 0; --i) arena = (arena << 8) | static_cast<unsigned char>(request[i]);
  const std::string bytes = request.substr(8, ticket_bytes);
  ticket t;
  {
    std::lock_guard lock(mutex_);
    sweep(now());
    auto it = tickets_.find(bytes);
    if (it == tickets_.end()) {
      // Ids and numbers only in the log: the ticket's bytes are not (a real one stays secret).
      refuse("its ticket for arena " + std::to_string(arena) +
             " is unknown (forged, used already, or expired)");
      return;
    }
    if (it->second.arena != arena) {
      // Presented for another arena: spent all the same, so that it cannot be tried again.
      ::close(it->second.fd);
      tickets_.erase(it);
      refuse("its ticket is for another arena than " + std::to_string(arena));
      return;
    }
    t = it->second;
    tickets_.erase(it);  // one use
  }
  char status = granted;
  iovec iov{&status, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  std::memset(control, 0, sizeof control);
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &t.fd, sizeof(int));
  // Counted before the send: the process that receives the fd may look at grants() (a
  // test does) before this thread would have counted it after.
  ++granted_;
  if (::sendmsg(conn, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) {
    CELER_LOG(debug, "store", "handed arena " + std::to_string(arena) + " of job " +
                                t.job.short_hex() + " to " + who);
  } else {
    --granted_;
  }
  ::close(t.fd);
}

expected<int> fetch_arena_fd(const std::string& socket, std::uint64_t arena,
                             const std::string& ticket, std::chrono::milliseconds timeout) {
  if (ticket.size() != arena_handout::ticket_bytes) {
    return error(error_code::permission_denied,
                 "the node's store sent no ticket for arena " + std::to_string(arena));
  }
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return error(error_code::unavailable, os_text("creating a socket to the node's store"));
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } close_it{fd};
  set_timeout(fd, SO_RCVTIMEO, timeout);
  set_timeout(fd, SO_SNDTIMEO, timeout);
  sockaddr_un a{};
  const auto len = abstract_address(socket, a);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), len) != 0) {
    return error(error_code::unavailable, os_text("connecting to the node's arena socket @" + socket));
  }
  char request[arena_handout::request_bytes];
  for (int i = 0; i < 8; ++i) request[i] = static_cast<char>((arena >> (8 * i)) & 0xff);
  std::memcpy(request + 8, ticket.data(), ticket.size());
  if (::send(fd, request, sizeof request, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof request)) {
    return error(error_code::unavailable, os_text("sending a ticket to the node's arena socket"));
  }
  char status = 0;
  iovec iov{&status, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  std::memset(control, 0, sizeof control);
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t r = 0;
  do {
    r = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
  } while (r < 0 && errno == EINTR);
  if (r != 1) {
    return error(error_code::unavailable,
                 "the node's arena socket answered nothing within " + std::to_string(timeout.count()) + " ms");
  }
  int received = -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int))) {
      std::memcpy(&received, CMSG_DATA(c), sizeof(int));
    }
  }
  if (status == arena_handout::granted && received >= 0) return received;
  if (received >= 0) ::close(received);
  std::string why;
  char buf[256];
  for (;;) {
    const auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0 || why.size() > 1024) break;
    why.append(buf, static_cast<std::size_t>(n));
  }
  return error(error_code::permission_denied,
               "the node's store refused arena " + std::to_string(arena) + ": " +
                 (why.empty() ? std::string("no reason given") : why));
}

} // namespace celer
