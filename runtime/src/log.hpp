#pragma once
// Minimal leveled logging to stderr: CELER_LOG_LEVEL=debug|info|warn|error (default warn).
//
// Every line is escaped at the sink (log_line): messages carry text from peers (hello
// senders, function and actor names, error messages), and a peer must not be able to forge
// log lines or drive the terminal that shows them. So no call site has to remember to escape.
//
//   CELER_LOG(warn, "transport", "refused a connection from " + from);  // from is escaped

#include <chrono>
#include <string>
#include <string_view>

namespace celer {

enum class log_level { debug, info, warn, error };

bool log_enabled(log_level level) noexcept;
/// Writes "[celer LEVEL] component: text" and a newline, with `component` and `text`
/// passed through escaped_for_log.
void log_line(log_level level, std::string_view component, std::string_view text);

/// `text` safe to write as part of one log line: valid UTF-8 passes unchanged except
/// control characters (C0, DEL, C1), line and paragraph separators and bidirectional
/// overrides, which become \n, \r, \t, \xNN or \u{NNNN}; bytes that are not valid UTF-8
/// become \xNN. A backslash is kept as it is (the escapes only ever add text, they cannot
/// remove a line break).
std::string escaped_for_log(std::string_view text);

/// A duration for a message, in whole milliseconds (rounded down): "1500 ms".
std::string millis(std::chrono::nanoseconds d);

} // namespace celer

#define CELER_LOG(level, component, text)                          \
  do {                                                             \
    if (::celer::log_enabled(::celer::log_level::level)) {         \
      ::celer::log_line(::celer::log_level::level, component, text); \
    }                                                              \
  } while (false)
