#include "core/reaper_alarm.hpp"

namespace celer {

void reaper_alarm::sleep(std::unique_lock<std::mutex>& lock, time_point next) {
  wakes_ = next;
  if (next == time_point::max()) {
    cv_.wait(lock);
  } else {
    cv_.wait_until(lock, next);
  }
}

} // namespace celer
