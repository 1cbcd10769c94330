#pragma once
// A process's mailboxes for celer::peer (<celer/peer.hpp>): bytes other processes of the job
// sent here, kept by (box, seq) until the code waiting for them takes them.
//
//   peer_mailbox m(1 << 30);
//   m.deposit("ring#3", 7, std::move(payload));              // the core, as peer_data arrives
//   auto got = m.take("ring#3", 7, deadline);                // a member of the collective
//
// Messages can arrive before anyone waits for them, in any order; each (box, seq) is taken
// once. The bytes held are bounded: past the bound a message is dropped (its sender's
// receiver then times out, saying so), so that a peer cannot fill the process's memory.
#include <celer/codec.hpp>
#include <celer/error.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace celer {

class peer_mailbox {
public:
  using clock = std::chrono::steady_clock;

  explicit peer_mailbox(std::size_t max_bytes) : max_bytes_(max_bytes) {}

  /// Keeps `payload` as message `seq` of `box` and wakes its taker. False when it is
  /// dropped: the mailboxes hold max_bytes already, or they were stopped. A second message
  /// with the same (box, seq) replaces the first. The bytes may be a view (of a lane's ring):
  /// they are handed to the taker as they are.
  bool deposit(const std::string& box, std::uint64_t seq, bytes payload);
  bool deposit(const std::string& box, std::uint64_t seq, std::string payload);
  /// Takes message `seq` of `box`, waiting until `deadline` (none: forever). The bytes are
  /// the message's own (no copy). deadline_exceeded at the deadline (naming what it waited
  /// for, and how many messages were dropped as over the bound); the stop's code when
  /// stopped.
  [[nodiscard]] expected<bytes> take(const std::string& box, std::uint64_t seq,
                                     std::optional<clock::time_point> deadline);
  /// Drops what `box` holds (a collective that is done, or gave up).
  void close(const std::string& box);
  /// Fails every take, now and later, with `code` and `reason` (the runtime stops).
  void stop(error_code code, const std::string& reason);
  /// The bytes held now (tests, metrics).
  [[nodiscard]] std::size_t bytes_held() const;

private:
  const std::size_t max_bytes_;
  mutable std::mutex mutex_;  // guards everything below
  std::condition_variable arrived_;
  std::map<std::string, std::map<std::uint64_t, bytes>> boxes_;
  std::size_t bytes_ = 0;
  std::uint64_t dropped_ = 0;
  std::optional<error> stopped_;
};

} // namespace celer
