#pragma once
// Keeps each job to its own objects in the node's store (node_store's): a message from a
// job's connection (its sender_job set) may seal, read, release, free or pull an object only
// when the object is not here or is recorded under that job. A refusal is counted and said
// in the log (rate-limited); the message is left unanswered by node_store, or answered with a
// refusal (a pull). docs/objects.md ("One arena per job") says what this protects.
//
//   job_fence fence(objects);
//   if (!fence.allows(m.sender_job, m.id, "seal")) return;
//
// Threads: the node agent's actor only, as node_store; node_store's one message at a time is
// what guards the members (no lock of their own).

#include "transport/rate_limited_log.hpp"

#include <celer/ids.hpp>

#include <cstdint>

namespace celer {

namespace store {
class object_store;
} // namespace store

class job_fence {
public:
  /// `objects` outlives the fence.
  explicit job_fence(const store::object_store& objects) : objects_(objects) {}
  job_fence(const job_fence&) = delete;
  job_fence& operator=(const job_fence&) = delete;

  /// True when `sender` (a message's sender_job: nil for the head, nodes and this process)
  /// may act on object `id`: it is not here, or it is recorded under that job (at
  /// store_create, or at the store_get that pulled the copy here). Otherwise counts and logs
  /// the refusal of `what` ("seal", "read", ...).
  [[nodiscard]] bool allows(const job_id& sender, const object_id& id, const char* what);
  /// Requests refused so far.
  [[nodiscard]] std::uint64_t refused() const noexcept { return refused_; }

private:
  const store::object_store& objects_;
  std::uint64_t refused_ = 0;
  rate_limited_log denials_{"store"};
};

} // namespace celer
