#pragma once
// Prometheus's text exposition format (version 0.0.4), written by hand: HELP and TYPE lines,
// then one line per sample, label values escaped. What the head serves at /metrics
// (docs/dashboard.md). Pure: no I/O.
//
//   prometheus::exposition e;
//   e.gauge("celer_nodes", "Nodes the head knows, by state", {{{{"state", "alive"}}, 3}});
//   e.counter("celer_http_requests_total", "HTTP requests by code", {{{{"code", "200"}}, 17}});
//   e.histogram("celer_request_seconds", "...", {}, {0.001, 0.01}, {4, 9}, 0.05, 10);
//   std::string body = e.text();   // Content-Type: text/plain; version=0.0.4

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace celer::prometheus {

/// One sample: its labels (name -> value) and value.
struct sample {
  std::map<std::string, std::string> labels;
  double value = 0;
};

class exposition {
public:
  /// A counter family; by Prometheus's convention its name ends in _total. Families must
  /// have distinct, valid names ([a-zA-Z_:][a-zA-Z0-9_:]*); a bad one throws
  /// std::invalid_argument (a programming error, not input).
  void counter(const std::string& name, const std::string& help, const std::vector<sample>& samples);
  void gauge(const std::string& name, const std::string& help, const std::vector<sample>& samples);
  /// A histogram: cumulative counts at each upper bound (`counts[i]` observations <=
  /// `bounds[i]`, bounds increasing), then +Inf = `count`, with `sum`.
  void histogram(const std::string& name, const std::string& help, const std::map<std::string, std::string>& labels,
                 const std::vector<double>& bounds, const std::vector<std::uint64_t>& counts, double sum,
                 std::uint64_t count);

  /// The whole exposition, each family's HELP and TYPE before its samples, ending in "\n".
  [[nodiscard]] const std::string& text() const noexcept { return text_; }

private:
  void family(const std::string& name, const std::string& help, const char* type);
  std::string text_;
  std::vector<std::string> names_;
};

/// A label value as the format writes it: backslash, double quote and newline escaped.
[[nodiscard]] std::string escape_label(const std::string& v);

/// A sample value: integers without a fraction, NaN and the infinities by name.
[[nodiscard]] std::string format_value(double v);

} // namespace celer::prometheus
