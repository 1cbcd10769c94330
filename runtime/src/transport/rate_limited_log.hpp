#pragma once
// Log lines about what peers do wrong, at most a few a second: a flood of junk costs a
// counter, not a disk. Each line that follows suppressed ones says how many were dropped.
// One thread only (the transport's receiver).

#include "log.hpp"

#include <chrono>
#include <cstdint>
#include <string>

namespace celer {

class rate_limited_log {
public:
  explicit rate_limited_log(const char* component, int per_second = 5)
    : component_(component), per_second_(per_second) {}

  void warn(const std::string& text) {
    const auto now = std::chrono::steady_clock::now();
    if (now - window_ >= std::chrono::seconds(1)) {
      window_ = now;
      in_window_ = 0;
    }
    if (in_window_ >= per_second_) {
      ++suppressed_;
      return;
    }
    ++in_window_;
    if (suppressed_ > 0) {
      CELER_LOG(warn, component_, text + " (" + std::to_string(suppressed_) +
                                    " similar lines suppressed before this one)");
      suppressed_ = 0;
    } else {
      CELER_LOG(warn, component_, text);
    }
  }

private:
  const char* component_;
  int per_second_;
  std::chrono::steady_clock::time_point window_{};
  int in_window_ = 0;
  std::uint64_t suppressed_ = 0;
};

} // namespace celer
