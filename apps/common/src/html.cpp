// HTML text (html.hpp).
#include <celer/apps/html.hpp>

#include <cstdio>

namespace celer::apps {

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string format_number(double v, const char* format) {
  char buf[32];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

} // namespace celer::apps
