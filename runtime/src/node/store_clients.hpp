#pragma once
// The processes on this node that use its object store (node_store's): the pins each holds,
// by its address, with its endpoint and its job, and the owners of the objects created here,
// by the endpoint of their process. A process that dies, or whose job ends, never sends its
// releases: this is what lets node_store drop exactly the pins it held and free what it owned.
//
//   store_clients clients(objects);
//   clients.pinned(reader, id);            // after objects.pin(id) for that reader
//   clients.unpin(reader, id);             // its store_release
//   clients.process_gone("ipc://...");     // its pins dropped, its owners' objects freed
//
// Threads: the node agent's actor only, as node_store; node_store's one message at a time is
// what guards the members (no lock of their own).

#include "protocol/messages.hpp"

#include <string>
#include <unordered_map>
#include <vector>

namespace celer {

namespace store {
class object_store;
} // namespace store

class store_clients {
public:
  /// `objects` outlives this: the pins recorded here are pins taken in it.
  explicit store_clients(store::object_store& objects) : objects_(objects) {}
  store_clients(const store_clients&) = delete;
  store_clients& operator=(const store_clients&) = delete;

  /// `client` holds one more pin of `id` (the caller took it: create or pin), and is at
  /// its address's endpoint.
  void pinned(const address& client, const object_id& id);
  /// `client` is of `job` (a job's end drops its pins: a driver that died, or kept a view
  /// past shutdown, never sends its releases).
  void joined(const unique_id& client, const job_id& job) { job_[client] = job; }
  /// `owner`'s process created an object here: its objects are freed when that process is gone.
  void owns(const address& owner);
  /// Drops one of `client`'s pins of `id`, when it holds one; a client left with none is
  /// forgotten.
  void unpin(const address& client, const object_id& id);
  /// The process at `endpoint` is gone: its clients' pins are dropped and the objects its
  /// owners created freed (durable ones stay).
  void process_gone(const std::string& endpoint);
  /// `job` ended: the pins of its clients are dropped.
  void job_finished(const job_id& job);

  /// The pins of `id` that `client` holds.
  [[nodiscard]] int pins(const unique_id& client, const object_id& id) const;
  /// Whether `client` is known here (holds pins, or its job is recorded).
  [[nodiscard]] bool knows(const unique_id& client) const {
    return pins_.contains(client) || endpoint_.contains(client) || job_.contains(client);
  }

private:
  void drop(const unique_id& client);

  store::object_store& objects_;
  /// Pins each process holds, by its address, to drop them if it dies.
  std::unordered_map<unique_id, std::unordered_map<object_id, int>> pins_;
  std::unordered_map<unique_id, std::string> endpoint_;
  std::unordered_map<unique_id, job_id> job_;
  /// Owners of objects created here, by the endpoint of their process.
  std::unordered_map<std::string, std::vector<unique_id>> owners_at_;
};

} // namespace celer
