#pragma once
/// Point-to-point bytes between the processes of one job: the substrate of the collectives
/// (<celer/actors/collective.hpp>), for code that needs to move data between actors that
/// are busy (blocked inside a call) and cannot take an actor call.
///
///   // Each member tells the others where it is (through an actor, an object, an argument):
///   celer::peer::endpoint me = celer::peer::here();
///   ...
///   (void)celer::peer::send(right, "ring#2", step, std::as_bytes(std::span(chunk)));
///   auto got = celer::peer::receive("ring#1", step, std::chrono::seconds(30));
///   if (!got) return got.error();            // deadline_exceeded, naming what it waited for
///   const auto* floats = reinterpret_cast<const float*>(got->data());
///
/// A message is addressed to a process (an endpoint), a mailbox name and a sequence number;
/// it waits in the receiving process until `receive` takes that (box, seq), whether the
/// receiver is already waiting or not, and is taken once. Messages are sent at once: to a
/// process on another machine on the job's encrypted connections (a large payload travels
/// as a frame of its own, not through msgpack); to a process on the same machine, payloads
/// of 16 KiB and more go through a lane, a ring of shared memory the receiver owns
/// (`peer_lane_bytes`, 64 MiB; one copy, no encryption), and `receive` returns a view of it
/// that frees its place in the ring when dropped. The runtime delivers messages while the
/// receiving actor runs a call. Within one process (embedded: every actor is a thread of
/// it) they are kept at once.
///
/// Contracts: only processes of the sender's job can fill a process's mailboxes (and map
/// its lanes: a lane's bytes are as safe as the job's objects in the node's store). A process
/// holds at most `peer_mailbox_bytes` (a knob, 1 GiB) of messages not yet taken; past it,
/// arriving ones are dropped and their receivers time out saying so. Nothing is resent: a
/// message to a process that dies is lost, and its receiver's deadline says so.
#include <celer/codec.hpp>
#include <celer/error.hpp>
#include <celer/ids.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace celer::peer {

/// The largest payload of one message (8 MiB): a process's connections refuse larger frames
/// (max_message_bytes bounds a whole message; one frame is bounded lower so that a peer
/// without keys cannot make a process hold much). Split larger data, as the collectives do.
inline constexpr std::size_t max_payload = std::size_t{8} << 20;

/// Where a process of the job receives: a celer value, to hand to other members.
struct endpoint {
  unique_id id;
  std::string where;
  [[nodiscard]] bool nil() const noexcept { return id.nil(); }
  friend bool operator==(const endpoint&, const endpoint&) = default;
  MSGPACK_DEFINE(id, where)
};

/// This process's endpoint (the driver's, or the worker process's hosting the caller).
/// failed_precondition without celer::init.
[[nodiscard]] expected<endpoint> here();

/// Sends a copy of `payload` to mailbox `box` of `to` as message `seq`, and returns without
/// waiting for it to arrive. unavailable when `to` is not a process this one can reach
/// (gone, or never was); invalid_argument for an empty box name or one beginning with
/// "celer.peer." (celer's own), or a payload over max_payload; failed_precondition without
/// celer::init.
[[nodiscard]] expected<void> send(const endpoint& to, std::string_view box, std::uint64_t seq,
                                  std::span<const std::byte> payload);

/// Takes message `seq` of this process's mailbox `box`, waiting up to `timeout` for it. The
/// bytes are the message's own (no copy). deadline_exceeded naming the box and seq; the
/// runtime's code when it stops meanwhile.
[[nodiscard]] expected<bytes> receive(std::string_view box, std::uint64_t seq,
                                      std::chrono::nanoseconds timeout);

/// Drops what this process's mailbox `box` holds: messages no one will take (a collective
/// that gave up). Later messages to it are kept again.
void close(std::string_view box);

/// What this process has moved through celer::peer: bytes sent and received through
/// shared-memory lanes and in messages, and the lanes open in each direction.
struct counters {
  std::uint64_t bytes_sent_shared = 0, bytes_sent_message = 0;
  std::uint64_t bytes_received_shared = 0, bytes_received_message = 0;
  std::uint64_t lanes_out = 0, lanes_in = 0;
};
/// This process's counters (zeros without celer::init).
[[nodiscard]] counters stats();

} // namespace celer::peer
