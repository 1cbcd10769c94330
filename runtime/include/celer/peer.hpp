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
/// receiver is already waiting or not, and is taken once. Messages are sent at once, on the
/// job's encrypted connections (a large payload travels as a frame of its own, not through
/// msgpack); the runtime delivers them while the receiving actor runs a call. Within one
/// process (embedded: every actor is a thread of it) they are moved, not sent.
///
/// Contracts: only processes of the sender's job can fill a process's mailboxes. A process
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
/// (gone, or never was); invalid_argument for an empty box name; failed_precondition
/// without celer::init.
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

} // namespace celer::peer
