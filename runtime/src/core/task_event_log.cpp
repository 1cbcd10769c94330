#include "core/task_event_log.hpp"

#include <chrono>
#include <utility>

namespace celer {

void task_event_log::record(const task_id& id, protocol::task_state state, std::int32_t attempt, std::string detail,
                            std::string function) {
  if (changes_.size() >= capacity_) {
    ++dropped_;
    return;
  }
  const auto ms =
    std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch());
  changes_.push_back({id, std::move(function), state, attempt, ms.count(), std::move(detail)});
}

void task_event_log::take(protocol::task_counts& c) {
  c.changes = std::move(changes_);
  changes_.clear();
  c.changes_dropped = std::exchange(dropped_, 0);
}

} // namespace celer
