#pragma once
// The node agent's side of the object store: it answers the store_* messages of the
// processes on this node (create, seal, get, release) and of other nodes (pull), keeps
// count of which process maps what, and pulls objects this node lacks from the node that
// holds them, chunk by chunk with several chunks in flight and one pull per object however
// many readers wait. Runs on the node agent's actor (one message at a time).
//
// Its pieces, each in a file of its own: store_clients (the pins, jobs and owned objects of
// the processes here), chunk_server (the holder's side of a transfer: chunks to the nodes
// that pull them), job_fence (which job may act on which object) and dropped_chunk_log (the
// chunks no pull asked for). The pulls this node makes are node_store's own.

#include "config/knobs.hpp"
#include "node/chunk_server.hpp"
#include "node/dropped_chunk_log.hpp"
#include "node/job_fence.hpp"
#include "node/store_clients.hpp"
#include "protocol/messages.hpp"
#include "transport/transport.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace celer {

namespace store {
class object_store;
class shm_segment;
} // namespace store
class bulk_lane;
class arena_handout;

class node_store {
public:
  struct config {
    node_id node;
    address self;
    /// Told of the durable objects this node holds.
    address head;
    std::size_t capacity = 0;
    /// The disk tier (spill and durable objects); empty: none.
    std::string dir;
    bool spill = true;
    /// A pull that receives no chunk for this long expires: its readers are told the
    /// object is unavailable and its memory is freed. Zero or less: pulls never expire.
    std::chrono::milliseconds pull_timeout{knobs().object_pull_timeout_ms};
    /// The time, for pull expiry (tests pass a fake one).
    std::function<std::chrono::steady_clock::time_point()> clock;
    /// Seeds the pulls' request ids; zero (the default) seeds them from the OS. Fuzzing
    /// passes a fixed one, so that a found input replays the same way.
    std::uint64_t pull_id_seed = 0;
    /// Bytes per pulled chunk (at most max_chunk_bytes) and chunks asked for at once.
    std::uint64_t chunk_bytes = static_cast<std::uint64_t>(knobs().object_transfer_chunk_bytes);
    std::size_t chunks_in_flight =
      static_cast<std::size_t>(std::max(1, knobs().object_transfer_chunks_in_flight));
    /// This node's bulk lane (transport/bulk_lane.hpp; it outlives the store), or none. With
    /// one, each pull gets a key, and the node holding the object seals its chunks with it
    /// and sends them on the lane (node/chunk_seal.hpp). Null: chunks go in clear on the
    /// nodes' connection (CURVE encrypts them when encryption is on), checksummed.
    bulk_lane* lane = nullptr;
    /// How long a ticket for an arena's fd (in a store reply) may be presented.
    std::chrono::milliseconds ticket_ttl{knobs().store_ticket_ttl_ms};
  };
  /// The largest chunk a node serves (chunk_server's).
  static constexpr std::uint64_t max_chunk_bytes = chunk_server::max_chunk_bytes;
  /// Opens the store and starts serving its arenas' fds (arena_handout); throws
  /// celer::exception when the disk tier or the socket cannot be had.
  node_store(transport& net, config cfg);
  ~node_store();
  node_store(const node_store&) = delete;
  node_store& operator=(const node_store&) = delete;

  // From a job's connection (sender_job set), seal, get, release and free act only on
  // objects of that job (the job recorded when the object was created or pulled here):
  // the others are left, unanswered, and the refusal counted and logged (rate-limited).
  void on(protocol::store_create& m);
  void on(protocol::store_seal& m);
  void on(protocol::store_get& m);
  void on(protocol::store_release& m);
  void on(protocol::store_free& m);
  /// Sends a chunk; of an object of the job the pull names (when it names one) only.
  void on(protocol::store_pull& m);
  void on(protocol::store_chunk& m);
  /// The process at `endpoint` is gone: its mappings are dropped and the objects it owned
  /// freed (durable ones stay).
  void process_gone(const std::string& endpoint);
  /// The job ended: its objects are freed.
  void job_finished(const job_id& job);
  /// A node died: pulls from it fail, now and later, and the chunks still queued to it are
  /// dropped (the transport forgets its connection), which unpins their objects.
  void node_died(const node_id& node);
  /// Tells the head which durable objects this node found on disk (after registering).
  void announce_durable();
  /// Fails the pulls that have received no chunk for config::pull_timeout, and drops the
  /// pins of chunks the transport has finished sending. Every store message runs it first;
  /// the node agent may also call it on its tick, so that a stuck pull on an otherwise
  /// quiet node expires too, and a sent object is unpinned there.
  void expire_pulls();

  void on(protocol::store_stats_query& m);
  [[nodiscard]] protocol::store_counters stats() const;
  /// Chunks dropped because no pull asked for them (wrong object, offset or size).
  [[nodiscard]] std::uint64_t dropped_chunks() const noexcept { return dropped_.count(); }
  /// Objects of another job that a job asked to seal, get, release, free or pull (refused).
  [[nodiscard]] std::uint64_t refused() const noexcept { return fence_.refused(); }
  /// Chunks sent whose pin is not yet dropped (their bytes may still be queued to send).
  [[nodiscard]] std::size_t chunks_pinned() const noexcept { return server_.chunks_pinned(); }
  /// Where processes fetch their job's arena (the socket, its tickets and refusals).
  [[nodiscard]] const arena_handout& handout() const noexcept { return *handout_; }
  [[nodiscard]] const store::object_store& objects() const noexcept { return *store_; }

private:
  struct waiter {
    std::uint64_t request_id = 0;
    address reply_to;
    /// The arena it has mapped (store_get's arena_known).
    std::uint64_t arena_known = 0;
  };
  struct pull {
    address source;
    std::uint64_t size = 0;
    /// Where create() put the new copy (the puller's pin keeps it there): at `offset` in
    /// the reader's job's arena `segment`.
    std::uint64_t offset = 0;
    std::shared_ptr<const store::shm_segment> segment;
    std::uint64_t next = 0;      // next offset to ask for
    std::uint64_t received = 0;  // bytes written so far
    /// Chunks asked for and not yet received: length by offset. A chunk that matches none
    /// is dropped.
    std::map<std::uint64_t, std::uint32_t> in_flight;
    /// Random, so that a chunk cannot be forged for a pull by guessing a counter.
    std::uint64_t request_id = 0;
    /// The job the copy is for (store_pull names it to the node holding the object).
    job_id job;
    /// Sealed chunks: the key they are sealed with (chunk_seal::key_bytes; empty: in clear).
    std::string key;
    /// When the pull started or last received a chunk.
    std::chrono::steady_clock::time_point progress;
    std::vector<waiter> waiters;
  };

  void reply_error(std::uint64_t request_id, const address& to, const error& e,
                   detail::failure_kind kind);
  /// Pins `id` for `client` and answers where it is.
  void answer_get(std::uint64_t request_id, const address& client, const object_id& id,
                  bool pulled, std::uint64_t arena_known);
  /// Names the arena of `r` (the object at `arena`) and, when the asker has mapped another
  /// (`known`), gives it a ticket for the arena's fd.
  void name_arena(protocol::store_reply& r, std::uint64_t arena, const store::shm_segment& segment,
                  std::uint64_t known);
  void ask_next_chunks(const object_id& id, pull& p);
  /// After a chunk: the pull is sealed when every byte came, else asks for more.
  void finish_or_ask(const object_id& id, pull& p);
  void finish_pull(const object_id& id, const error* failed);
  [[nodiscard]] std::chrono::steady_clock::time_point now() const;

  // Every member is touched by the node agent's actor only, one message at a time (the
  // pieces below say so too); chunk_server alone shares state with the transport's I/O
  // thread, under locks of its own.
  transport& net_;
  config cfg_;
  std::unique_ptr<store::object_store> store_;
  std::unique_ptr<arena_handout> handout_;
  /// The processes here that use the store: their pins, jobs, and the objects they own.
  store_clients clients_;
  /// Chunks of the objects here, to the nodes that pull them.
  chunk_server server_;
  /// Which job may act on which object.
  job_fence fence_;
  std::unordered_map<object_id, pull> pulls_;
  std::unordered_set<node_id> dead_nodes_;
  std::mt19937_64 pull_ids_;
  std::uint64_t pulled_objects_ = 0, pulled_bytes_ = 0;
  /// Chunks that no pull asked for.
  dropped_chunk_log dropped_;
};

} // namespace celer
