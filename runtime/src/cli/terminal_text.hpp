#pragma once
// What the CLI prints of strings a job controls (names, messages, entrypoints, errors, its
// log on a terminal): control characters escaped, so that a job cannot move the cursor,
// clear the screen, retitle the window or write to the clipboard of whoever reads the table.
// One helper for every such string.
//
//   std::cout << cli::printable(task_name);                        // "a\x1b]0;x\x07" -> "a\x1b]0;x\x07" as text
//   std::cout << cli::printable(log_text, cli::keep::newlines);    // a log keeps its lines

#include <string>
#include <string_view>

namespace celer::cli {

enum class keep {
  /// A table cell or a one-line field: newline and tab are escaped too.
  nothing,
  /// A block of text (a log, an error's detail): newline and tab stay.
  newlines,
};

/// `s` with every control character written as an escape: C0 bytes and DEL as \xNN (but
/// newline and tab with keep::newlines), the C1 controls U+0080..U+009F as \u0080..\u009F,
/// bytes that are not valid UTF-8 as \xNN. Valid UTF-8 text otherwise unchanged.
[[nodiscard]] inline std::string printable(std::string_view s, keep k = keep::nothing) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  auto escape_byte = [&](unsigned char b) {
    out += "\\x";
    out += hex[b >> 4];
    out += hex[b & 0xF];
  };
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      const bool allowed = b >= 0x20 ? b != 0x7F : (k == keep::newlines && (b == '\n' || b == '\t'));
      if (allowed) out += static_cast<char>(b);
      else escape_byte(b);
      ++i;
      continue;
    }
    // A UTF-8 sequence: its length from the lead byte, then its continuation bytes, no
    // overlong forms, no surrogates, nothing past U+10FFFF.
    const std::size_t n = b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
    bool valid = n != 0 && i + n <= s.size();
    char32_t cp = n == 2 ? b & 0x1F : n == 3 ? b & 0x0F : b & 0x07;
    for (std::size_t j = 1; valid && j < n; ++j) {
      const auto c = static_cast<unsigned char>(s[i + j]);
      valid = (c & 0xC0) == 0x80;
      cp = (cp << 6) | (c & 0x3F);
    }
    if (valid && ((n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF))))
      valid = false;
    if (!valid) {
      escape_byte(b);
      ++i;
      continue;
    }
    if (cp >= 0x80 && cp <= 0x9F) {
      out += "\\u00";
      out += hex[cp >> 4];
      out += hex[cp & 0xF];
    } else {
      out.append(s.substr(i, n));
    }
    i += n;
  }
  return out;
}

} // namespace celer::cli
