#pragma once
// A core's side of its node's object store: writes values into the node's shared memory
// (store_create, write, store_seal), maps stored objects for reading (store_get, which
// pins them at the node, pulling them there first when they live elsewhere), and drops
// each pin (store_release) when the last user of the mapped bytes lets go. Its job's arena
// on a node is mapped once per process: the first reply that names it carries a ticket,
// which the client trades for the arena's fd at the node's socket (node/arena_handout.hpp).
//
//   store_client store(net, requests, {self, node_addr, node, job}, on_own_copy);
//   auto v = store.store_value(id, size, first, /*durable=*/false, self, job, write);
//   auto bytes = store.map_stored(v, self);  // bytes.keep holds the pin
//
// Threads: any user thread. mappings_mutex_ guards mappings_, segments_ and known_arena_
// (and is held while an arena's fd is fetched); requests go
// through the core's request_table; no lock is held while waiting for the node.

#include "core/request_table.hpp"
#include "protocol/messages.hpp"
#include "transport/transport.hpp"

#include <celer/api.hpp>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace celer::store {
class shm_segment;
} // namespace celer::store

namespace celer {

class store_client {
public:
  struct endpoints {
    /// The core: it names the pins, and its objects' copies are reported to it.
    address self;
    address node;
    node_id this_node;
    /// The job a copy pulled here is recorded under.
    job_id job;
  };
  /// Called (on the reading thread, no lock of this client held) when a read pulled a copy
  /// of an object `self` owns to this node: the owner frees it with the object.
  using copied_here = std::function<void(const protocol::object_copied&)>;

  store_client(transport& net, request_table& requests, endpoints where, copied_here on_copy);
  ~store_client();
  store_client(const store_client&) = delete;
  store_client& operator=(const store_client&) = delete;

  /// Writes a value into the node's object store for `owner`, as object `id`: `write`
  /// packs its `size` bytes (starting with byte `first`). Returns the payload that points
  /// at it, or the failure (not ok) when the node refuses it. Rethrows what `write` throws
  /// (the node is told to drop the object first).
  protocol::object_payload store_value(const object_id& id, std::size_t size, unsigned char first,
                                       bool durable, const address& owner, const job_id& job,
                                       const std::function<void(char*)>& write);

  /// Maps stored object `v` (owned by `owner`) for reading: pins it at this node, pulling
  /// it here first if it is elsewhere.
  detail::fetched map_stored(const protocol::object_payload& v, const address& owner);
  /// map_stored in two steps, so that several objects are asked for at once.
  struct pending_map {
    object_id object;
    address owner;
    std::uint64_t request = 0;
    std::future<protocol::message> reply;
    std::optional<detail::failure> failed;
    /// The node read through (the one attached when the read started).
    address node;
    celer::node_id node_ident;
    /// Where the object is, to read it again through another node if that one dies.
    protocol::object_payload source;
  };
  pending_map start_map(const protocol::object_payload& v, const address& owner);
  detail::fetched finish_map(pending_map& p);

  /// The arena a store reply from `node` names, mapped read-only once per process (its fd
  /// fetched with the reply's ticket the first time); the pointer is its base and owns the
  /// mapping. Throws celer::exception when it cannot be had (a refused ticket included).
  std::shared_ptr<const void> mapping(const address& node, const protocol::store_reply& r);

  /// This node's object store in numbers.
  protocol::store_counters query_stats();

  /// Moves to another node: a cluster driver learns its node after connecting, and takes
  /// another when that one dies. Reads and writes started before go on with the old one.
  void attach_node(address node, node_id id);
  /// Node `id` was declared dead. If it is the node attached now, what waits for its
  /// replies fails now, and writes and reads through it start again through the next node
  /// attached (a cluster driver takes another; a worker dies with its node), within
  /// request_timeout_ms. A read of an object stored on the dead node itself is not tried
  /// again here: the owner's table knows where it is now.
  void on_node_died(const node_id& id);
  /// Mappings that outlive this call drop their pins without telling the node (the node
  /// drops a job's pins when the job ends).
  void stop();

private:
  /// Lets mapped bytes outlive the client: their pins reach it through this while it lives.
  struct link {
    std::mutex m;
    store_client* client = nullptr;
  };

  /// The node attached now (node_mutex_ guards where_.node and where_.this_node).
  [[nodiscard]] std::pair<address, node_id> local() const;
  /// The node attached now; if it died, the next one attached (waiting up to
  /// request_timeout_ms), else nullopt.
  [[nodiscard]] std::optional<std::pair<address, node_id>> live_local() const;
  /// Whether `id` was attached here and died.
  [[nodiscard]] bool attached_died(const node_id& id) const;
  /// store_value through `node` (`here`): one try. `again`: an earlier try through a node
  /// that died may have reached this store, whose copy then gives way to this write.
  protocol::object_payload store_value_at(const address& node, const node_id& here,
                                          const object_id& id, std::size_t size,
                                          unsigned char first, bool durable, const address& owner,
                                          const job_id& job,
                                          const std::function<void(char*)>& write, bool again);

  transport& net_;
  request_table& requests_;
  endpoints where_;
  mutable std::mutex node_mutex_;
  /// Attached nodes that died, and the stop (node_mutex_); notified at each attach.
  std::vector<node_id> dead_;
  bool stopped_ = false;
  mutable std::condition_variable attached_;
  const copied_here on_copy_;
  std::shared_ptr<link> link_;

  /// The arena mapped last from `node`: sent as arena_known, so that replies carry a ticket
  /// only for an arena not mapped yet.
  std::uint64_t known_arena(const address& node);
  /// mapping()'s segment, for a writer's view.
  std::shared_ptr<store::shm_segment> segment(const address& node, const protocol::store_reply& r);

  std::mutex mappings_mutex_;  // guards mappings_, segments_, known_arena_
  /// The nodes' arenas, mapped once each, by node and arena id.
  std::unordered_map<std::string, std::shared_ptr<const void>> mappings_;
  /// The same segments, for writers' views (mapping() fills both).
  std::unordered_map<std::string, std::shared_ptr<store::shm_segment>> segments_;
  /// By node id.
  std::unordered_map<unique_id, std::uint64_t> known_arena_;
};

} // namespace celer
