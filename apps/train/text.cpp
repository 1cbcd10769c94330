// Numbers for people (text.hpp).
#include "text.hpp"

#include <cmath>
#include <cstdio>

namespace celer::train_app {

std::string fixed(double v, int digits) {
  if (std::isnan(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string bytes_text(double b) {
  if (std::isnan(b)) return "-";
  if (b >= 1e6) return fixed(b / 1e6, 2) + " MB";
  if (b >= 1e3) return fixed(b / 1e3, 1) + " KB";
  return fixed(b, 0) + " B";
}

std::string scale_text(double s) {
  int e = 0;
  if (s > 0 && std::frexp(s, &e) == 0.5) return "2^" + std::to_string(e - 1);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g", s);
  return buf;
}

} // namespace celer::train_app
