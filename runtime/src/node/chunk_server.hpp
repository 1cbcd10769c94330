#pragma once
// The holder's side of a transfer between nodes (node_store's): answers another node's
// store_pull with one chunk of an object held here. A chunk in clear shares the object's bytes
// straight from its arena, checksummed, the object pinned until the transport lets go of them;
// a chunk for a pull with a key is sealed (node/chunk_seal.hpp) into a pooled buffer and sent
// on the puller's bulk lane, else on the nodes' connection. The server remembers each
// puller's endpoint and lane, so that a dead node's queued chunks go with its connection.
//
//   chunk_server server(net, objects, lane);
//   server.serve(pull);          // after node_store checked the pull's job
//   server.release_sent();       // on every store message and tick: drops sent chunks' pins
//   server.forget(dead_node);
//
// Threads: every method runs on the node agent's actor, as node_store's do; node_store's one
// message at a time is what guards the members without a lock of their own. The transport's
// I/O thread touches only sent_ and seal_buffers_ (shared with the chunks in flight), each
// guarded by its own mutex, when it lets go of a chunk's bytes.

#include "protocol/messages.hpp"
#include "transport/transport.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace celer {

namespace store {
class object_store;
} // namespace store
class bulk_lane;

class chunk_server {
public:
  /// The largest chunk a node serves: one message, well inside a connection's 16 MiB frame
  /// limit (zmq_transport::options::max_frame_bytes) with CURVE's overhead.
  static constexpr std::uint64_t max_chunk_bytes = std::uint64_t{8} << 20;

  /// `objects` and `lane` (null: none) outlive the server. Chunks still queued when the
  /// server is gone keep what they need (their pin list and buffer pool are shared).
  chunk_server(transport& net, store::object_store& objects, bulk_lane* lane);
  chunk_server(const chunk_server&) = delete;
  chunk_server& operator=(const chunk_server&) = delete;

  /// Sends the chunk `m` asks for, or a failed chunk saying why (the object is not here,
  /// the range lies outside it or is larger than max_chunk_bytes, the key has the wrong
  /// size). The caller has checked that `m.job` may read the object.
  void serve(protocol::store_pull& m);
  /// Answers `m` with a failed chunk: the object is another job's.
  void refuse(const protocol::store_pull& m);
  /// Unpins the objects whose sent chunks the transport has let go of.
  void release_sent();
  /// `node` died: the transport and the bulk lane forget its connections, so that the
  /// chunks still queued to it are dropped (and unpin on the next release_sent).
  void forget(const node_id& node);
  /// Chunks sent whose pin is not yet dropped (their bytes may still be queued to send).
  [[nodiscard]] std::size_t chunks_pinned() const noexcept { return chunks_pinned_; }

private:
  /// The chunks sent and let go of by the transport (on its own thread: ZeroMQ's I/O
  /// thread frees a frame once written), waiting for the actor to drop their pins.
  struct sent_chunks {
    std::mutex mutex;
    std::vector<object_id> released;  // guarded by mutex
  };
  /// Buffers that sealed chunks are written into, each given back when the transport lets
  /// go of its chunk (on its I/O thread): a fresh buffer per chunk would be faulted in anew.
  struct seal_buffers {
    std::mutex mutex;
    std::vector<std::unique_ptr<char[]>> free;  // guarded by mutex
  };

  /// The bytes of a chunk to send: shared straight from the object's arena (`at` bytes into
  /// arena `arena`), the object pinned and the arena mapped until the transport lets go of
  /// them.
  protocol::shared_bytes share(const object_id& id, std::uint64_t arena, std::uint64_t at, std::uint32_t length);
  /// Seals the `m.length` bytes at `from` (in the store's memory) with the pull's key into a
  /// buffer of seal_buffers_, and sends them to the puller: on its bulk lane, else on the
  /// nodes' connection.
  void send_sealed(protocol::store_pull& m, const std::byte* from);

  transport& net_;
  store::object_store& objects_;
  bulk_lane* lane_;
  std::shared_ptr<sent_chunks> sent_ = std::make_shared<sent_chunks>();
  std::size_t chunks_pinned_ = 0;
  std::shared_ptr<seal_buffers> seal_buffers_ = std::make_shared<seal_buffers>();
  /// The bulk lanes of the nodes this one sent sealed chunks to, by node id (forgotten with
  /// the node).
  std::unordered_map<unique_id, std::string> puller_lanes_;
  /// Nodes this one sent chunks to, by id: their endpoint, forgotten when they die (so
  /// that chunks queued to a dead node do not keep objects pinned). One entry per node.
  std::unordered_map<unique_id, std::string> pullers_;
};

} // namespace celer
