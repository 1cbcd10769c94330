#include "protocol/resources.hpp"

#include <charconv>
#include <cmath>

namespace celer::protocol {
namespace {

std::int64_t to_fixed(double amount) {
  return static_cast<std::int64_t>(std::llround(amount * static_cast<double>(resource_unit)));
}
double from_fixed(std::int64_t v) { return static_cast<double>(v) / resource_unit; }

} // namespace

namespace {

/// `amount` as an ostream writes a double by default (printf's %g: 6 significant digits),
/// without a stream: the scheduler words amounts in every reason it gives.
void append_amount(std::string& out, double amount) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, amount, std::chars_format::general, 6);
  out.append(buf, r.ptr);
}

} // namespace

std::string format_amount(double amount) {
  std::string out;
  append_amount(out, amount);
  return out;
}

void resource_set::set(const std::string& name, double amount) {
  const auto v = to_fixed(amount);
  if (v == 0) {
    amounts.erase(name);
  } else {
    amounts[name] = v;
  }
}

double resource_set::get(const std::string& name) const {
  auto it = amounts.find(name);
  return it == amounts.end() ? 0.0 : from_fixed(it->second);
}

bool resource_set::covers(const resource_set& need) const { return first_short(need).empty(); }

std::string resource_set::first_short(const resource_set& need) const {
  for (const auto& [name, v] : need.amounts) {
    auto it = amounts.find(name);
    const std::int64_t have = it == amounts.end() ? 0 : it->second;
    if (v > have) return name;
  }
  return {};
}

void resource_set::add(const resource_set& other) {
  for (const auto& [name, v] : other.amounts) amounts[name] += v;
}

void resource_set::subtract(const resource_set& other) {
  for (const auto& [name, v] : other.amounts) amounts[name] -= v;
}

std::map<std::string, double> resource_set::to_map() const {
  std::map<std::string, double> out;
  for (const auto& [name, v] : amounts) out[name] = from_fixed(v);
  return out;
}

std::string resource_set::to_string() const {
  std::string out;
  bool first = true;
  for (const auto& [name, v] : amounts) {
    if (name.starts_with("node:")) continue;  // the node's own resource: its id says it
    out += first ? "" : ", ";
    out += name;
    out += ": ";
    if (name == memory) {
      append_amount(out, from_fixed(v) / 1e9);
      out += " GB";
    } else {
      append_amount(out, from_fixed(v));
    }
    first = false;
  }
  return first ? "nothing" : out;
}

expected<void> validate_amounts(const resource_set& s, const std::string& what) {
  auto bad = [&](const std::string& why) {
    return error(error_code::invalid_argument, what + ": " + why);
  };
  if (s.amounts.size() > max_resource_names) {
    return bad(std::to_string(s.amounts.size()) + " resources named, more than " +
               std::to_string(max_resource_names));
  }
  for (const auto& [name, v] : s.amounts) {
    if (name.empty() || name.size() > max_resource_name_bytes) {
      return bad("a resource name must have 1 to " + std::to_string(max_resource_name_bytes) +
                 " bytes, got " + std::to_string(name.size()));
    }
    const double bound = name == memory ? max_memory_bytes : max_resource_amount;
    const auto limit = to_fixed(bound);
    if (v < 0 || v > limit) {
      return bad("resource '" + name + "' amount " + format_amount(from_fixed(v)) +
                 " is outside 0 to " + format_amount(bound));
    }
    if (name == gpu && v > resource_unit && v % resource_unit != 0) {
      return bad("a GPU amount above 1 must be a whole number, got " + format_amount(from_fixed(v)));
    }
  }
  return {};
}

expected<resource_set> make_request(double num_cpus, double num_gpus, double memory,
                                    const std::map<std::string, double>& custom) {
  auto bad = [](const std::string& what) {
    return error(error_code::invalid_argument, what);
  };
  if (!(num_cpus >= 0) || !(num_gpus >= 0) || !(memory >= 0)) {
    return bad("resource amounts must be zero or positive (num_cpus " + std::to_string(num_cpus) +
               ", num_gpus " + std::to_string(num_gpus) + ", memory " + std::to_string(memory) +
               ")");
  }
  if (num_gpus > 1 && num_gpus != std::floor(num_gpus)) {
    return bad("num_gpus above 1 must be a whole number, got " + std::to_string(num_gpus));
  }
  resource_set out;
  out.set(cpu, num_cpus);
  out.set(gpu, num_gpus);
  out.set(protocol::memory, memory);
  for (const auto& [name, amount] : custom) {
    if (name.empty() || name == cpu || name == gpu || name == protocol::memory) {
      return bad("custom resource name '" + name +
                 "' is empty or reserved; use num_cpus, num_gpus or memory");
    }
    if (!(amount >= 0)) {
      return bad("custom resource '" + name + "' must be zero or positive");
    }
    out.set(name, amount);
  }
  return out;
}

} // namespace celer::protocol
