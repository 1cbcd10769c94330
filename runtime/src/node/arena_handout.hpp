#pragma once
// How a process on this node gets its job's object-store arena: not by a path (the node
// agent's /proc/<pid>/fd is closed to other users and to non-dumpable peers, and was open to
// every same-user process before), but as a file descriptor passed with SCM_RIGHTS over an
// abstract Unix socket the node agent serves. A store reply names the arena and carries a
// one-time ticket; the process connects, presents the ticket with the arena's id, and
// receives the fd. docs/objects.md ("One arena per job") says what this protects.
//
//   auto handout = arena_handout::start({});                      // the node agent, once
//   reply.ticket = (*handout)->issue(job, arena, fd);              // the actor, per reply
//   reply.socket = (*handout)->name();
//   auto fd = fetch_arena_fd(reply.socket, reply.arena, reply.ticket, timeout);  // a process
//
// A ticket is random (128 bits from the kernel's getrandom, in hex), bound to the job and arena
// it was issued for, good for one use within its time to live (store_ticket_ttl_ms). A
// wrong, reused, expired or unknown ticket, or one presented with another arena's id, gets a
// refusal byte and no fd, and a log line (rate-limited) on the node.
//
// Threads: issue() on any thread (the node agent's actor); the socket is served by a thread
// of its own, up to 64 connections side by side (more wait in the listen queue), each
// dropped with a refusal if its request is not complete within a short read deadline.
// mutex_ guards tickets_.

#include "transport/rate_limited_log.hpp"

#include <celer/error.hpp>
#include <celer/ids.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace celer {

class arena_handout {
public:
  /// A ticket is the hex of 16 random bytes (128 bits): text, so that it travels in a
  /// message's string field as it is.
  static constexpr std::size_t ticket_bytes = 32;
  /// What a process sends: the arena's id (8 bytes, little-endian) then the ticket.
  static constexpr std::size_t request_bytes = 8 + ticket_bytes;
  /// The first byte of the answer: granted (the fd rides with it) or refused (no fd; a
  /// reason follows, up to the end of the stream).
  static constexpr char granted = 'y';
  static constexpr char refused = 'n';

  struct config {
    /// How long a ticket may be presented.
    std::chrono::milliseconds ttl{10000};
    /// How long a connection may take to send its request (a slow one is refused and
    /// dropped, so that silent connections cannot pile up).
    std::chrono::milliseconds read_deadline{500};
    /// The time, for expiry (tests pass a fake one).
    std::function<std::chrono::steady_clock::time_point()> clock;
  };

  /// Binds a new abstract socket ("celer-arenas-<random hex>") and starts serving it.
  /// unavailable when the socket cannot be made.
  [[nodiscard]] static expected<std::unique_ptr<arena_handout>> start(config cfg);
  ~arena_handout();
  arena_handout(const arena_handout&) = delete;
  arena_handout& operator=(const arena_handout&) = delete;

  /// The socket's abstract name (without the leading NUL byte).
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  /// A ticket for `job`'s arena `arena`, whose fd is `fd` (duplicated: the ticket holds its
  /// own until it is used or expires). Empty when no ticket can be made (out of fds); the
  /// reason is logged.
  [[nodiscard]] std::string issue(const unique_id& job, std::uint64_t arena, int fd);
  /// Tickets refused so far, and granted.
  [[nodiscard]] std::uint64_t refusals() const noexcept { return refused_.load(); }
  [[nodiscard]] std::uint64_t grants() const noexcept { return granted_.load(); }
  /// Tickets issued and not yet used nor expired.
  [[nodiscard]] std::size_t outstanding() const;

private:
  struct ticket {
    unique_id job;
    std::uint64_t arena = 0;
    int fd = -1;
    std::chrono::steady_clock::time_point expires;
  };

  arena_handout(config cfg, int listener, std::string name);
  [[nodiscard]] std::chrono::steady_clock::time_point now() const;
  void serve();
  /// Answers one connection's request (`request_bytes`; anything else is refused).
  void answer(int conn, const std::string& request);
  /// Forgets expired tickets (closing their fds). mutex_ held.
  void sweep(std::chrono::steady_clock::time_point t);

  config cfg_;
  int listener_ = -1;
  int wake_[2] = {-1, -1};  // a pipe: written to stop serve()
  std::string name_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, ticket> tickets_;  // by ticket bytes; guarded by mutex_
  std::atomic<std::uint64_t> refused_{0};
  std::atomic<std::uint64_t> granted_{0};
  rate_limited_log denials_{"store"};  // serve()'s thread only
  std::thread server_;
};

/// A process's side: connects to the abstract socket `socket`, presents `ticket` for arena
/// `arena`, and returns the fd received (the caller owns it). permission_denied with the
/// node's reason when refused; unavailable when the socket cannot be reached or answers
/// nothing within `timeout`.
[[nodiscard]] expected<int> fetch_arena_fd(const std::string& socket, std::uint64_t arena,
                                           const std::string& ticket,
                                           std::chrono::milliseconds timeout);

} // namespace celer
