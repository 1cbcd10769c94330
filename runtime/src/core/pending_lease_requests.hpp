#pragma once
// A core's lease requests sent and not answered yet (Ray's lease design, task_submitter.hpp):
// each request's id, the task class it asks a worker for, how many each class has
// outstanding, and where requests go: the local node, or the head once that node died.
//
//   pending_lease_requests requests(ids);
//   const task_id rid = requests.open(/*cls=*/0);  // sent as request_lease's spec.id
//   requests.pending(0);                            // 1
//   auto cls = requests.close(rid);                 // answered: 0; later: none
//   auto withdrawn = requests.withdraw(std::nullopt);  // told to the node: cancel them
//
// Threads: none of its own; its owner's lock guards it (task_submitter::mutex_).

#include "core/task_ids.hpp"

#include <celer/ids.hpp>

#include <cstddef>
#include <optional>
#include <unordered_map>
#include <vector>

namespace celer {

class pending_lease_requests {
public:
  /// Request ids come from `ids` (the core's: they never collide with its tasks').
  explicit pending_lease_requests(task_ids& ids) : ids_(ids) {}

  /// A new request for a worker for class `cls`: its id, pending until closed, withdrawn or
  /// forgotten.
  [[nodiscard]] task_id open(std::size_t cls);
  /// Request `id` was answered (or could not be sent): no longer pending. Its class, or none
  /// when it was not pending (withdrawn, or forgotten when a node died).
  std::optional<std::size_t> close(const task_id& id);
  /// Withdraws the pending requests of class `cls` (of every class if none): their ids, for
  /// the message that cancels them.
  [[nodiscard]] std::vector<task_id> withdraw(std::optional<std::size_t> cls);
  /// A node died: every request is forgotten (a grant that still comes is returned unused),
  /// and asked again by whoever needs it.
  void forget_all();

  /// The local node died: requests go to the head from now on.
  void local_node_died() noexcept { via_head_ = true; }
  /// A (new) local node to send requests to.
  void local_node_attached() noexcept { via_head_ = false; }
  /// Whether requests go to the head (the local node died) rather than the local node.
  [[nodiscard]] bool via_head() const noexcept { return via_head_; }

  /// Requests pending for class `cls`, and for all classes.
  [[nodiscard]] std::size_t pending(std::size_t cls) const noexcept {
    return cls < per_class_.size() ? per_class_[cls] : 0;
  }
  [[nodiscard]] std::size_t size() const noexcept { return by_id_.size(); }

private:
  task_ids& ids_;
  /// Each pending request's class.
  std::unordered_map<task_id, std::size_t> by_id_;
  /// Pending requests per class (indexed by class; grown when a class first asks).
  std::vector<std::size_t> per_class_;
  bool via_head_ = false;
};

} // namespace celer
