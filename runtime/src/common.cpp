// Small definitions of the public headers: splitting CELER_REMOTE's names and logging (the
// registry is remote_registry.cpp; ids and errors are celer::base, base/).
#include "log.hpp"

#include <celer/api.hpp>
#include <celer/remote.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <string>

namespace celer {

namespace detail {

std::vector<std::string> split_remote_names(std::string_view spelled) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  auto flush = [&] {
    std::size_t b = cur.find_first_not_of(" \t\n");
    std::size_t e = cur.find_last_not_of(" \t\n");
    std::string name = b == std::string::npos ? "" : cur.substr(b, e - b + 1);
    if (!name.empty() && name.front() == '&') name.erase(0, 1);
    b = name.find_first_not_of(" \t\n");
    out.push_back(b == std::string::npos ? "" : name.substr(b));
    cur.clear();
  };
  for (char c : spelled) {
    if (c == '<' || c == '(' || c == '[') ++depth;
    if (c == '>' || c == ')' || c == ']') --depth;
    if (c == ',' && depth == 0) {
      flush();
    } else {
      cur += c;
    }
  }
  flush();
  return out;
}

} // namespace detail

namespace {
log_level threshold() {
  static const log_level level = [] {
    const char* v = std::getenv("CELER_LOG_LEVEL");
    if (v == nullptr) return log_level::warn;
    std::string s = v;
    if (s == "debug") return log_level::debug;
    if (s == "info") return log_level::info;
    if (s == "error") return log_level::error;
    return log_level::warn;
  }();
  return level;
}
} // namespace

bool log_enabled(log_level level) noexcept { return level >= threshold(); }

namespace {

void append_hex_byte(std::string& out, unsigned char c) {
  static constexpr char digits[] = "0123456789abcdef";
  out += "\\x";
  out += digits[c >> 4];
  out += digits[c & 0xf];
}

/// The length of the valid UTF-8 sequence at the start of `s` and its code point, or 0 when
/// it is not one (truncated, overlong, a surrogate, above U+10FFFF).
std::size_t utf8_sequence(std::string_view s, char32_t& cp) {
  const auto b = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = b(0);
  std::size_t len = 0;
  char32_t min = 0;
  if (c >= 0xc2 && c <= 0xdf) {
    len = 2, cp = c & 0x1f, min = 0x80;
  } else if (c >= 0xe0 && c <= 0xef) {
    len = 3, cp = c & 0x0f, min = 0x800;
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4, cp = c & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (s.size() < len) return 0;
  for (std::size_t i = 1; i < len; ++i) {
    if ((b(i) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b(i) & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return len;
}

/// Code points above ASCII that change how a terminal or editor shows the rest of the line:
/// C1 controls (U+009B is CSI in many terminals), line/paragraph separators and the
/// bidirectional embeddings, overrides and isolates ("Trojan Source").
bool invisible_control(char32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 ||
         (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069) ||
         cp == 0x200e || cp == 0x200f || cp == 0x061c;
}

} // namespace

std::string millis(std::chrono::nanoseconds d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
}

std::string escaped_for_log(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      switch (c) {
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
          if (c < 0x20 || c == 0x7f) {
            append_hex_byte(out, c);
          } else {
            out += static_cast<char>(c);
          }
      }
      ++i;
      continue;
    }
    char32_t cp = 0;
    const std::size_t len = utf8_sequence(text.substr(i), cp);
    if (len == 0) {
      append_hex_byte(out, c);
      ++i;
    } else if (invisible_control(cp)) {
      char buf[16];
      std::snprintf(buf, sizeof buf, "\\u{%04x}", static_cast<unsigned>(cp));
      out += buf;
      i += len;
    } else {
      out.append(text.substr(i, len));
      i += len;
    }
  }
  return out;
}

void log_line(log_level level, std::string_view component, std::string_view text) {
  static std::mutex mutex;
  static constexpr const char* names[] = {"debug", "info", "warn", "error"};
  const std::string line = std::string("[celer ") + names[static_cast<int>(level)] + "] " +
                           escaped_for_log(component) + ": " + escaped_for_log(text) + '\n';
  std::lock_guard lock(mutex);
  std::cerr << line;
}

} // namespace celer
