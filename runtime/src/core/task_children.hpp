#pragma once
// What each running task or actor call of this process submitted (its children), so that
// celer::cancel with `recursive` reaches them: recorded when a call submits work, taken when
// the call is cancelled, forgotten when it ends.
//
//   task_children children;
//   children.add(parent, child_result);            // a user thread, submitting
//   auto kids = children.take(parent);              // a cancel of the parent
//   children.forget(parent);                        // the parent's call returned
//
// Thread-safe: mutex_ guards the table; forget costs no lock while nothing is recorded.

#include <celer/ids.hpp>

#include <atomic>
#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace celer {

class task_children {
public:
  void add(const task_id& parent, const object_id& child);
  /// The results of what `parent` submitted (and forgets them).
  std::vector<object_id> take(const task_id& parent);
  void forget(const task_id& parent);
  /// Parents with children recorded (tests).
  [[nodiscard]] std::size_t parents() const;

private:
  mutable std::mutex mutex_;
  std::unordered_map<task_id, std::vector<object_id>> children_;
  /// children_.size(), readable without mutex_.
  std::atomic<std::size_t> count_{0};
};

} // namespace celer
