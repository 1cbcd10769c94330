#pragma once
// What the tasks of one function submitted with the same options share, kept once: the
// spec they are sent with, less each task's id, arguments and attempt. A task waiting in
// the submitter holds a pointer to its descriptor and its own few fields, not a whole
// task_spec (536 bytes, with its function, binary path, owner address, package digest,
// resource map and placement on the heap besides): a million queued tasks of one function
// share one descriptor.
//
//   task_descriptors known;
//   auto d = known.intern(std::move(spec), /*retry_exceptions=*/false);  // id, args, attempt reset
//   protocol::task_spec sent = d->spec_for(id, std::move(args), attempt);
//
// A descriptor is immutable once made, and lives while a task (queued, running, or kept
// for retries) points to it. Threads: task_descriptors is not thread-safe; the task
// submitter calls it under its lock. A descriptor may be read from any thread.

#include "protocol/messages.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace celer {

struct task_descriptor {
  /// The spec of its tasks with a nil id, no arguments and attempt 1.
  protocol::task_spec prototype;
  /// Whether its tasks run again after their own code threw (task_options::retry_exceptions).
  exceptions_to_retry retry_exceptions;

  /// One of its tasks, whole, as a worker receives it.
  [[nodiscard]] protocol::task_spec spec_for(const task_id& id, std::vector<protocol::task_arg> args,
                                             std::int32_t attempt) const;
};

/// The descriptors in use, found again by content: a task submitted with the function and
/// options of an earlier one shares that one's descriptor.
class task_descriptors {
public:
  /// The descriptor of `spec` (its id, arguments and attempt are ignored): an existing
  /// equal one, else a new one made of `spec`.
  std::shared_ptr<const task_descriptor> intern(protocol::task_spec spec,
                                                const exceptions_to_retry& retry_exceptions);
  /// Descriptors known now, some perhaps no longer used (tests).
  [[nodiscard]] std::size_t size() const noexcept { return count_; }

private:
  /// Forgets the descriptors no task uses any more (amortised: when the count has doubled).
  void prune();

  /// By function name; nearly always one per name.
  std::unordered_map<std::string, std::vector<std::weak_ptr<const task_descriptor>>> by_function_;
  /// The last one interned: consecutive submissions of one function find it first.
  std::shared_ptr<const task_descriptor> last_;
  std::size_t count_ = 0;
  std::size_t prune_at_ = 64;
};

} // namespace celer
