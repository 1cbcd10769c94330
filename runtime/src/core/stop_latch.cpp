#include "core/stop_latch.hpp"

namespace celer {

bool stop_latch::stop(const std::string& reason, std::optional<error_code> code) {
  if (stopped_) return false;
  stopped_ = true;
  reason_ = reason;
  code_ = code;
  return true;
}

std::string stop_latch::message() const {
  return code_ ? reason_ : "celer is shutting down: " + reason_;
}

} // namespace celer
