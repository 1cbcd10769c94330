#pragma once
// Each task's changes of state as its owner saw them (waiting, running, finished, failed),
// kept until a driver's job heartbeat takes them to the head (task_counts::changes). Bounded:
// past its capacity (protocol::max_task_changes) a change is only counted as dropped, so a
// driver that submits faster than heartbeats drain holds no more than one heartbeat's worth.
//
//   task_event_log events;
//   events.record(id, protocol::task_state::waiting, /*attempt=*/1, {}, "f");
//   protocol::task_counts c;
//   events.take(c);  // c.changes: the one change; the log is empty again
//
// Threads: none of its own; its owner's lock guards it (task_submitter::mutex_).

#include "protocol/task_counts.hpp"

#include <celer/ids.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace celer {

class task_event_log {
public:
  /// Keeps at most `capacity` changes between two takes.
  explicit task_event_log(std::size_t capacity = protocol::max_task_changes) : capacity_(capacity) {}

  /// Task `id` is now in `state`, at `attempt`, as of now on the wall clock. `detail`: the
  /// node it runs on, or why it failed or waits again; `function`: named in its submission's
  /// change only.
  void record(const task_id& id, protocol::task_state state, std::int32_t attempt, std::string detail = {},
              std::string function = {});
  /// Moves the changes since the last take (oldest first), and how many were dropped, into
  /// `c`; the log starts again empty.
  void take(protocol::task_counts& c);

  /// Changes kept, and dropped past capacity, since the last take.
  [[nodiscard]] std::size_t size() const noexcept { return changes_.size(); }
  [[nodiscard]] std::uint64_t dropped() const noexcept { return dropped_; }

private:
  std::size_t capacity_;
  std::vector<protocol::task_event> changes_;
  std::uint64_t dropped_ = 0;
};

} // namespace celer
