#pragma once
// celer::peer in one process (<celer/peer.hpp>): the mailboxes that messages land in, and how
// bytes go to another process of the job.
//
//   peer_link link(net, self, job, {.mailbox_bytes = 1 << 30, .lane_bytes = 64 << 20});
//   link.send(to, "ring#3", 7, payload);                 // celer::peer::send
//   link.on_data(msg);                                   // the core, as peer_data arrives
//   auto got = link.mailbox().take("ring#3", 7, deadline);
//
// To a process on another machine, bytes go in a peer_data message (bulk: a frame of its own,
// encrypted like everything on the wire). To a process on this machine they go through a
// lane: a ring of shared memory that the receiver owns and the sender writes, with only a
// small notice (where in the ring) in the peer_data message. The receiver's mailbox holds a
// view of the ring, not a copy, until the bytes are taken and dropped. A same-machine peer
// thus costs one copy (into the ring) and no encryption: CURVE is for bytes that leave the
// machine.
//
// A lane opens on first use. The sender asks, with its machine's boot id; a receiver on the
// same machine creates a memfd ring, writes a random nonce at its start and grants its path;
// the sender maps it and checks the nonce (a path that names another process's file on
// another machine cannot carry it). Until the grant, when the ring is full, and for payloads
// below bulk's threshold or above half the ring, bytes go in the message. Lanes are one way:
// A -> B and B -> A are two rings.
//
// Trust: only processes of the job reach a process's mailboxes (the transport sets
// sender_job; the rest is dropped). A sender writes the ring and could change bytes after
// its notice: same-job processes are trusted with each other's data, as with objects in the
// store. The receiver checks every notice against the ring's bounds and order, so a bad one
// loses only that message. A notice's sender is taken on its word (the transport names the
// job, not the process).

#include "core/peer_mailbox.hpp"
#include "protocol/messages.hpp"
#include "transport/transport.hpp"

#include <celer/ids.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>

namespace celer {

/// What celer::peer moved in this process (<celer/peer.hpp>'s counters()).
struct peer_link_counters {
  std::uint64_t bytes_sent_shared = 0, bytes_sent_message = 0;
  std::uint64_t bytes_received_shared = 0, bytes_received_message = 0;
  std::uint64_t lanes_out = 0, lanes_in = 0;
};

class peer_link {
public:
  struct options {
    std::size_t mailbox_bytes = std::size_t{1} << 30;
    /// Bytes of each lane's ring; 0: no lanes (everything goes in messages).
    std::size_t lane_bytes = std::size_t{64} << 20;
    /// The machine's boot id (lanes only between equal ones); "" reads the kernel's.
    std::string boot_id;
    /// Lanes this process keeps at most in each direction (a ring each).
    std::size_t max_lanes = 64;
  };
  /// Box names the links use between themselves; celer::peer::send refuses them.
  static constexpr std::string_view reserved_prefix = "celer.peer.";

  peer_link(transport& net, address self, job_id job, options o);
  ~peer_link();
  peer_link(const peer_link&) = delete;
  peer_link& operator=(const peer_link&) = delete;

  /// Sends `payload` to mailbox `box` of the process at `to` (this one too: kept at once) as
  /// message `seq`. False when `to` is unknown or gone.
  bool send(const address& to, const std::string& box, std::uint64_t seq, std::span<const std::byte> payload);
  /// A peer_data message for this process (from the wire or this process).
  void on_data(protocol::peer_data& m);
  [[nodiscard]] peer_mailbox& mailbox() noexcept { return mailbox_; }
  [[nodiscard]] peer_link_counters counters() const;
  /// Fails every take from now on (the runtime stops).
  void stop(error_code code, const std::string& reason) { mailbox_.stop(code, reason); }

  struct out_lane;
  struct in_lane;

private:
  void on_ask(const protocol::peer_data& m);
  void on_grant(const protocol::peer_data& m);
  void on_notice(protocol::peer_data& m);
  /// The lane to `to`, ready to write into, or null (asking for one the first time).
  std::shared_ptr<out_lane> lane_to(const address& to);

  transport& net_;
  const address self_;
  const job_id job_;
  const options o_;
  peer_mailbox mailbox_;
  mutable std::mutex mutex_;  // guards the maps and counters below
  std::map<unique_id, std::shared_ptr<out_lane>> out_;
  std::map<unique_id, std::shared_ptr<in_lane>> in_;
  peer_link_counters counters_;
};

} // namespace celer
