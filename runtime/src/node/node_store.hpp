#pragma once
// The node agent's side of the object store: it answers the store_* messages of the
// processes on this node (create, seal, get, release) and of other nodes (pull), keeps
// count of which process maps what, and pulls objects this node lacks from the node that
// holds them, chunk by chunk with several chunks in flight and one pull per object however
// many readers wait. Runs on the node agent's actor (one message at a time).

#include "config/knobs.hpp"
#include "protocol/messages.hpp"
#include "transport/rate_limited_log.hpp"
#include "transport/transport.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
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
  /// The largest chunk a node serves: one message, well inside a connection's 16 MiB frame
  /// limit (zmq_transport::options::max_frame_bytes) with CURVE's overhead.
  static constexpr std::uint64_t max_chunk_bytes = std::uint64_t{8} << 20;
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
  [[nodiscard]] std::uint64_t dropped_chunks() const noexcept { return dropped_chunks_; }
  /// Objects of another job that a job asked to seal, get, release, free or pull (refused).
  [[nodiscard]] std::uint64_t refused() const noexcept { return refused_; }
  /// Chunks sent whose pin is not yet dropped (their bytes may still be queued to send).
  [[nodiscard]] std::size_t chunks_pinned() const noexcept { return chunks_pinned_; }
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
  void unpin_for(const address& client, const object_id& id);
  /// Drops a chunk no pull asked for, saying why in the log (at most a few lines a second).
  void drop_chunk(const protocol::store_chunk& m, const std::string& why);
  /// True when `sender` (a message's sender_job: nil for head, nodes and this process) may
  /// act on object `id`: it is not here, or it is recorded under that job. Otherwise
  /// counts and logs the refusal of `what` (rate-limited).
  bool owned_by_sender(const job_id& sender, const object_id& id, const char* what);
  [[nodiscard]] std::chrono::steady_clock::time_point now() const;
  /// Unpins the objects whose sent chunks the transport has let go of.
  void release_sent_chunks();
  /// The bytes of a chunk to send: shared straight from the object's arena (`at` bytes into
  /// arena `arena`), the object pinned and the arena mapped until the transport lets go of
  /// them.
  protocol::shared_bytes chunk_bytes_of(const object_id& id, std::uint64_t arena, std::uint64_t at,
                                        std::uint32_t length);
  /// Seals the `m.length` bytes at `from` (in the store's memory) with the pull's key into a
  /// buffer of seal_buffers_, and sends them to the puller: on its bulk lane, else on the
  /// nodes' connection.
  void send_sealed(protocol::store_pull& m, const std::byte* from);

  transport& net_;
  config cfg_;
  std::unique_ptr<store::object_store> store_;
  std::unique_ptr<arena_handout> handout_;
  /// The chunks sent and let go of by the transport (on its own thread: ZeroMQ's I/O
  /// thread frees a frame once written), waiting for this actor to drop their pins.
  struct sent_chunks {
    std::mutex mutex;
    std::vector<object_id> released;  // guarded by mutex
  };
  std::shared_ptr<sent_chunks> sent_ = std::make_shared<sent_chunks>();
  std::size_t chunks_pinned_ = 0;
  /// Buffers that sealed chunks are written into, each given back when the transport lets
  /// go of its chunk (on its I/O thread): a fresh buffer per chunk would be faulted in anew.
  struct seal_buffers {
    std::mutex mutex;
    std::vector<std::unique_ptr<char[]>> free;  // guarded by mutex
  };
  std::shared_ptr<seal_buffers> seal_buffers_ = std::make_shared<seal_buffers>();
  /// The bulk lanes of the nodes this one sent sealed chunks to, by node id (forgotten with
  /// the node).
  std::unordered_map<unique_id, std::string> puller_lanes_;
  /// Nodes this one sent chunks to, by id: their endpoint, forgotten when they die (so
  /// that chunks queued to a dead node do not keep objects pinned). One entry per node.
  std::unordered_map<unique_id, std::string> pullers_;
  /// Pins each process holds, by its address, to drop them if it dies.
  std::unordered_map<unique_id, std::unordered_map<object_id, int>> pins_;
  std::unordered_map<unique_id, std::string> client_endpoint_;
  /// The job of each process holding pins (a job's end drops its pins too: a driver that
  /// died, or kept a view past shutdown, never sends its releases).
  std::unordered_map<unique_id, job_id> client_job_;
  void drop_client(const unique_id& client);
  /// Owners of objects created here, by the endpoint of their process.
  std::unordered_map<std::string, std::vector<unique_id>> owners_at_;
  std::unordered_map<object_id, pull> pulls_;
  std::unordered_set<node_id> dead_nodes_;
  std::mt19937_64 pull_ids_;
  std::uint64_t pulled_objects_ = 0, pulled_bytes_ = 0;
  /// Chunks dropped, and the log lines about them in the current second.
  std::uint64_t dropped_chunks_ = 0;
  std::chrono::steady_clock::time_point drop_log_second_;
  int drop_log_lines_ = 0;
  std::uint64_t refused_ = 0;
  rate_limited_log denials_{"store"};
};

} // namespace celer
