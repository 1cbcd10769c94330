#pragma once
// The object store's messages (messages.hpp lists them all in `message`): a process and its
// node's store (create, seal, get, release, free, stats), nodes pulling from each other
// (store_pull, store_chunk), and the head's directory of durable objects and copies. Part of
// the wire: changing a field changes celer::protocol_version.

#include "protocol/bulk.hpp"
#include "protocol/decode_budget.hpp"
#include "protocol/failure_info.hpp"

#include <celer/codec.hpp>
#include <celer/ids.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace celer::protocol {

/// A node's object store in numbers (celer status, metrics, celer::object_store_stats).
struct store_counters {
  std::uint64_t capacity = 0;
  std::uint64_t bytes_in_memory = 0;
  std::uint64_t objects_in_memory = 0;
  std::uint64_t objects_on_disk_only = 0;
  std::uint64_t spilled_objects = 0;
  std::uint64_t spilled_bytes = 0;
  std::uint64_t restored_objects = 0;
  std::uint64_t restored_bytes = 0;
  std::uint64_t pulled_objects = 0;
  std::uint64_t pulled_bytes = 0;
  CELER_MSGPACK_DEFINE(capacity, bytes_in_memory, objects_in_memory, objects_on_disk_only,
                 spilled_objects, spilled_bytes, restored_objects, restored_bytes,
                 pulled_objects, pulled_bytes)
};

// ---- core -> its node: make room for an object of `size` bytes in the node's store,
// starting `lead` bytes into an aligned block (the reply says where; the writer then
// writes it through its own mapping and seals it)
struct store_create {
  std::uint64_t request_id = 0;
  address reply_to;
  object_id id;
  std::uint64_t size = 0;
  std::uint32_t lead = 0;
  /// The core that owns the object (it frees it) and its job (freed when the job ends).
  address owner;
  job_id job;
  bool durable = false;
  /// The arena of this node the sender has mapped already (0: none): the reply carries a
  /// ticket for the object's arena only when it is another.
  std::uint64_t arena_known = 0;
  CELER_MSGPACK_DEFINE(request_id, reply_to, id, size, lead, owner, job, durable, arena_known)
};
// ---- core -> its node: the object is written; readable from now on (a durable object is
// on disk, synced, before the reply)
struct store_seal {
  std::uint64_t request_id = 0;
  address reply_to;
  object_id id;
  /// The job that sent it (the transport sets it for a job's connection; nil: head, node or
  /// this process).
  job_id sender_job;
  CELER_MSGPACK_DEFINE(request_id, reply_to, id, sender_job)
};
// ---- core -> its node: pin this object for me and say where it is; when the node has no
// copy, it pulls one from the node at `source` first (one pull however many ask)
struct store_get {
  std::uint64_t request_id = 0;
  address reply_to;
  object_id id;
  address source;
  std::uint64_t size = 0;
  std::uint32_t lead = 0;
  address owner;
  /// The reader's job: a copy pulled here is recorded under it (freed when it ends).
  job_id job;
  /// The job that sent it (the transport sets it for a job's connection; nil: head, node or
  /// this process).
  job_id sender_job;
  /// As in store_create.
  std::uint64_t arena_known = 0;
  CELER_MSGPACK_DEFINE(request_id, reply_to, id, source, size, lead, owner, job, sender_job,
                       arena_known)
};
// ---- node -> core: the answer to store_create, store_seal and store_get: `size` bytes at
// `offset` in the object's job's arena `arena` (an id) of `capacity` bytes. When the asker
// has not mapped that arena (store_create's `arena_known`), `ticket` (arena_handout's
// ticket_bytes, random, for one use within store_ticket_ttl_ms) and `socket` (an abstract
// Unix socket's name) say where to fetch its fd (node/arena_handout.hpp). No path.
struct store_reply {
  std::uint64_t request_id = 0;
  bool ok = false;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::uint64_t arena = 0;
  std::uint64_t capacity = 0;
  /// store_get: the node pulled the object from another node (a new copy to free later).
  bool pulled = false;
  failure_info fail;
  std::string ticket;
  std::string socket;
  CELER_MSGPACK_DEFINE(request_id, ok, offset, size, arena, capacity, pulled, fail, ticket,
                       socket)
};
// ---- core -> its node: one mapping of the object is gone (drops one pin), or a writer
// gives up an object it created and did not seal
struct store_release {
  object_id id;
  address client;
  bool abandon = false;
  /// The job that sent it (the transport sets it for a job's connection; nil: head, node or
  /// this process).
  job_id sender_job;
  CELER_MSGPACK_DEFINE(id, client, abandon, sender_job)
};
// ---- owner core -> every node holding a copy: no reference to these objects remains
struct store_free {
  std::vector<object_id> ids;
  /// The job that sent it (the transport sets it for a job's connection; nil: head, node or
  /// this process).
  job_id sender_job;
  CELER_MSGPACK_DEFINE(ids, sender_job)
};
// ---- node -> node: send `length` bytes of the object from `offset` (a pull, chunk by chunk)
struct store_pull {
  std::uint64_t request_id = 0;
  address reply_to;
  object_id id;
  std::uint64_t offset = 0;
  std::uint32_t length = 0;
  /// The job of the reader the copy is for (store_get's checked `job`): the node holding
  /// the object sends only that job's objects (nil: not checked).
  job_id job;
  /// The pull's key (32 bytes; empty: none): the chunk comes sealed with it (AES-256-GCM,
  /// node/chunk_seal.hpp), on the puller's bulk lane at `lane` when it has one
  /// (transport/bulk_lane.hpp), else on this connection.
  std::string key;
  std::string lane;
  CELER_MSGPACK_DEFINE(request_id, reply_to, id, offset, length, job, key, lane)
};
// ---- node -> node: one chunk of a pull and its checksum, or why there is none
struct store_chunk {
  std::uint64_t request_id = 0;
  object_id id;
  std::uint64_t offset = 0;
  bool ok = false;
  /// The chunk's bytes, as a bulk value on the wire; shared, not copied, on both sides (the
  /// sender's store memory, the receiver's ZeroMQ frame).
  shared_bytes data;
  std::uint64_t checksum = 0;
  failure_info fail;
  CELER_MSGPACK_DEFINE(request_id, id, offset, ok, data, checksum, fail)
};

// ---- node -> head: durable objects this node holds on disk (at start, all it found
// there; then each one as it is sealed), so that readers can find them again after the
// node agent restarts under a new id
struct durable_objects {
  node_id node;
  std::vector<object_id> ids;
  CELER_MSGPACK_DEFINE(node, ids)
};
// ---- core -> head: which live node has a durable copy of this object?
struct locate_object {
  std::uint64_t request_id = 0;
  address reply_to;
  object_id id;
  CELER_MSGPACK_DEFINE(request_id, reply_to, id)
};
struct object_location {
  std::uint64_t request_id = 0;
  bool found = false;
  node_id node;
  address node_addr;
  CELER_MSGPACK_DEFINE(request_id, found, node, node_addr)
};
// ---- reader core -> owner core: a copy of the owner's object now lives on `node` too
// (pulled there for the reader); the owner frees it with the rest
struct object_copied {
  object_id id;
  node_id node;
  address node_addr;
  CELER_MSGPACK_DEFINE(id, node, node_addr)
};
// ---- core -> its node: the numbers of the node's object store
struct store_stats_query {
  std::uint64_t request_id = 0;
  address reply_to;
  CELER_MSGPACK_DEFINE(request_id, reply_to)
};
struct store_stats_reply {
  std::uint64_t request_id = 0;
  store_counters stats;
  CELER_MSGPACK_DEFINE(request_id, stats)
};

} // namespace celer::protocol
