#pragma once
// Minimal leveled logging to stderr: CELER_LOG_LEVEL=debug|info|warn|error (default warn).

#include <string_view>

namespace celer {

enum class log_level { debug, info, warn, error };

bool log_enabled(log_level level) noexcept;
void log_line(log_level level, std::string_view component, std::string_view text);

} // namespace celer

#define CELER_LOG(level, component, text)                          \
  do {                                                             \
    if (::celer::log_enabled(::celer::log_level::level)) {         \
      ::celer::log_line(::celer::log_level::level, component, text); \
    }                                                              \
  } while (false)
