#pragma once
// What a connection may say: the transport asks admit() about every message from the wire,
// after decoding it and before any component sees it.
//
//   - A message messages.def marks `local` is never accepted from the wire.
//   - One marked `cluster` only from the head or a node (a job cannot stop a component,
//     declare a worker dead or speak for a node).
//   - From a job's driver or worker, one marked `any`, and only about its own job: a `job`
//     or `spec.job` field must name the sender's job (a nil spec.job, an actor call's, is
//     set to it), and a `sender_job` field is set to it, so that the head and nodes check
//     what it names against what they hold: the head the actor or group (kill_actor,
//     actor_started, actor_failed, remove_placement_group); a node the worker (a worker's
//     messages about itself, return_lease), the GPUs (gpu_usage), the actor (kill_actor),
//     the lease requests (cancel_lease_requests) or the object (store_seal, store_get,
//     store_release, store_free; store_pull carries the reader's job between nodes).
//     Not checked: the addresses a message gives for answers (reply_to, owner), which a
//     job could point at another job's process whose id it knows.
//   - To a job's process from another job (one the head let it meet: a shared namespace's
//     job and a job let into that namespace, zmq_transport.hpp), only a message marked
//     `shared`, and an execute_task only as an actor call (never a task or an actor's
//     creation): the calls to a detached actor, their answers and their cancels.
// Refusals are permission_denied, with what was refused and why.

#include "protocol/messages.hpp"
#include "transport/credentials.hpp"

#include <celer/error.hpp>

namespace celer {

/// `self`: the receiving process's identity (null: not a job's process, or not known).
[[nodiscard]] expected<void> admit(const peer_identity& who, protocol::message& m,
                                   const peer_identity* self = nullptr);

/// The part of admit() that needs only the type tag, checked before a body is decoded (so a
/// message its sender may never send costs no decoding). Unknown tags pass: the decoder
/// refuses them.
[[nodiscard]] expected<void> admit_type(const peer_identity& who, std::uint32_t type,
                                        const peer_identity* self = nullptr);

} // namespace celer
