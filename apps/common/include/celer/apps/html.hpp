#pragma once
/// Text for the apps' HTML pages (report.html): escaping and numbers.
///
///   std::string cell = "<td>" + celer::apps::html_escape(run_name) + "</td>";
///   std::string x = celer::apps::format_number(3.14159, "%.2f");   // "3.14"
///
/// Standard C++ only: no runtime, no LibTorch.

#include <string>
#include <string_view>

namespace celer::apps {

/// `s` with &, <, > and " written as entities: safe as element text and as a double-quoted
/// attribute value.
[[nodiscard]] std::string html_escape(std::string_view s);

/// `v` through printf's `format` (one double conversion, at most 31 characters).
[[nodiscard]] std::string format_number(double v, const char* format = "%.1f");

} // namespace celer::apps
