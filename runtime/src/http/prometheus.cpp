// Prometheus's text exposition format (prometheus.hpp).
#include "http/prometheus.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace celer::prometheus {
namespace {

bool valid_name(const std::string& n) {
  if (n.empty()) return false;
  for (std::size_t i = 0; i < n.size(); ++i) {
    const char c = n[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!letter && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

/// HELP text escapes backslash and newline (not quotes).
std::string escape_help(const std::string& h) {
  std::string out;
  for (char c : h) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string label_set(const std::map<std::string, std::string>& labels, const std::string& extra_name = {},
                      const std::string& extra_value = {}) {
  if (labels.empty() && extra_name.empty()) return {};
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!valid_name(k) || k.starts_with("__")) throw std::invalid_argument("bad Prometheus label name '" + k + "'");
    out += (first ? "" : ",") + k + "=\"" + escape_label(v) + "\"";
    first = false;
  }
  if (!extra_name.empty()) out += (first ? "" : ",") + extra_name + "=\"" + extra_value + "\"";
  return out + "}";
}

} // namespace

std::string escape_label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 1e15) std::snprintf(buf, sizeof buf, "%.0f", v);
  else std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

void exposition::family(const std::string& name, const std::string& help, const char* type) {
  if (!valid_name(name)) throw std::invalid_argument("bad Prometheus metric name '" + name + "'");
  if (std::find(names_.begin(), names_.end(), name) != names_.end())
    throw std::invalid_argument("Prometheus metric '" + name + "' written twice");
  names_.push_back(name);
  text_ += "# HELP " + name + " " + escape_help(help) + "\n# TYPE " + name + " " + type + "\n";
}

void exposition::counter(const std::string& name, const std::string& help, const std::vector<sample>& samples) {
  family(name, help, "counter");
  for (const auto& s : samples) text_ += name + label_set(s.labels) + " " + format_value(s.value) + "\n";
}

void exposition::gauge(const std::string& name, const std::string& help, const std::vector<sample>& samples) {
  family(name, help, "gauge");
  for (const auto& s : samples) text_ += name + label_set(s.labels) + " " + format_value(s.value) + "\n";
}

void exposition::histogram(const std::string& name, const std::string& help, const std::map<std::string, std::string>& labels,
                           const std::vector<double>& bounds, const std::vector<std::uint64_t>& counts, double sum,
                           std::uint64_t count) {
  if (bounds.size() != counts.size()) throw std::invalid_argument("histogram '" + name + "': a count per bound");
  family(name, help, "histogram");
  for (std::size_t i = 0; i < bounds.size(); ++i)
    text_ += name + "_bucket" + label_set(labels, "le", format_value(bounds[i])) + " " +
             format_value(static_cast<double>(counts[i])) + "\n";
  text_ += name + "_bucket" + label_set(labels, "le", "+Inf") + " " + format_value(static_cast<double>(count)) + "\n";
  text_ += name + "_sum" + label_set(labels) + " " + format_value(sum) + "\n";
  text_ += name + "_count" + label_set(labels) + " " + format_value(static_cast<double>(count)) + "\n";
}

} // namespace celer::prometheus
