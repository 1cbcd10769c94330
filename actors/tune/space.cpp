// Search spaces and params: validation, checks, printing, JSON, and random draws.
#include "draw.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <ostream>
#include <set>

namespace celer::tune {
namespace {

error invalid(std::string message) { return error(error_code::invalid_argument, std::move(message)); }

std::string named(std::string_view name) { return "'" + std::string(name) + "'"; }

std::string real_text(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);
  std::string s(buf, end);
  // A real keeps a mark of being one, as JSON writes it: 3.0, not 3.
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

bool is_integral(double d) { return std::isfinite(d) && d == std::floor(d); }

} // namespace

std::string to_string(const value& v) {
  if (auto* d = std::get_if<double>(&v)) return real_text(*d);
  if (auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  return nlohmann::json(std::get<std::string>(v)).dump();
}

bool same_value(const value& a, const value& b) {
  if (std::holds_alternative<std::string>(a) || std::holds_alternative<std::string>(b)) return a == b;
  if (std::holds_alternative<std::int64_t>(a) && std::holds_alternative<std::int64_t>(b)) return a == b;
  return detail::as_number(a) == detail::as_number(b);
}

const value* params::find(std::string_view name) const {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

expected<double> params::number(std::string_view name) const {
  const value* v = find(name);
  if (!v) return error(error_code::not_found, "no parameter " + named(name));
  if (std::holds_alternative<std::string>(*v))
    return invalid("parameter " + named(name) + " is a string, not a number");
  return detail::as_number(*v);
}

expected<std::int64_t> params::integer(std::string_view name) const {
  const value* v = find(name);
  if (!v) return error(error_code::not_found, "no parameter " + named(name));
  if (auto* i = std::get_if<std::int64_t>(v)) return *i;
  if (auto* d = std::get_if<double>(v); d && is_integral(*d) && std::abs(*d) < 0x1.0p63)
    return static_cast<std::int64_t>(*d);
  return invalid("parameter " + named(name) + " = " + to_string(*v) + " is not an integer");
}

expected<std::string> params::text(std::string_view name) const {
  const value* v = find(name);
  if (!v) return error(error_code::not_found, "no parameter " + named(name));
  if (auto* s = std::get_if<std::string>(v)) return *s;
  return invalid("parameter " + named(name) + " = " + to_string(*v) + " is not a string");
}

std::string params::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (auto& [name, v] : values_) std::visit([&, &key = name](auto& x) { j[key] = x; }, v);
  return j.dump();
}

expected<params> params::from_json(std::string_view json) {
  nlohmann::json j = nlohmann::json::parse(json, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid("params are not valid JSON: " + std::string(json.substr(0, 80)));
  if (!j.is_object()) return invalid("params must be a JSON object of names to values, got " + std::string(j.type_name()));
  params p;
  for (auto& [name, v] : j.items()) {
    if (v.is_number_integer() && v.is_number_unsigned()) {
      if (v.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        return invalid("parameter " + named(name) + " = " + v.dump() + " is beyond the int64 range");
      p.set(name, static_cast<std::int64_t>(v.get<std::uint64_t>()));
    } else if (v.is_number_integer()) {
      p.set(name, v.get<std::int64_t>());
    } else if (v.is_number_float()) {
      p.set(name, v.get<double>());
    } else if (v.is_string()) {
      p.set(name, v.get<std::string>());
    } else {
      return invalid("parameter " + named(name) + " must be a number or a string, got " + std::string(v.type_name()) +
                     (v.is_null() ? " (a NaN or infinite real is written as null)" : ""));
    }
  }
  return p;
}

std::string to_string(const params& p) {
  std::string s = "{";
  for (auto& [name, v] : p) {
    if (s.size() > 1) s += ", ";
    s += name + "=" + to_string(v);
  }
  return s + "}";
}

std::ostream& operator<<(std::ostream& out, const params& p) { return out << to_string(p); }

std::string_view to_string(distribution d) noexcept {
  switch (d) {
  case distribution::uniform: return "uniform";
  case distribution::log_uniform: return "log_uniform";
  case distribution::integer: return "integer";
  case distribution::log_integer: return "log_integer";
  case distribution::categorical: return "categorical";
  case distribution::grid: return "grid";
  }
  return "?";
}

std::optional<std::size_t> parameter::index_of(const value& v) const {
  for (std::size_t i = 0; i < choices.size(); ++i)
    if (same_value(choices[i], v)) return i;
  return std::nullopt;
}

search_space& search_space::uniform(std::string name, double low, double high) {
  parameters_.push_back({std::move(name), distribution::uniform, low, high, {}});
  return *this;
}

search_space& search_space::log_uniform(std::string name, double low, double high) {
  parameters_.push_back({std::move(name), distribution::log_uniform, low, high, {}});
  return *this;
}

search_space& search_space::integer(std::string name, std::int64_t low, std::int64_t high, bool log) {
  parameters_.push_back({std::move(name), log ? distribution::log_integer : distribution::integer,
                         static_cast<double>(low), static_cast<double>(high), {}});
  return *this;
}

search_space& search_space::categorical(std::string name, std::vector<value> choices) {
  parameters_.push_back({std::move(name), distribution::categorical, 0, 0, std::move(choices)});
  return *this;
}

search_space& search_space::grid(std::string name, std::vector<value> values) {
  parameters_.push_back({std::move(name), distribution::grid, 0, 0, std::move(values)});
  return *this;
}

const parameter* search_space::find(std::string_view name) const {
  for (auto& p : parameters_)
    if (p.name == name) return &p;
  return nullptr;
}

expected<void> search_space::validate() const {
  if (parameters_.empty()) return invalid("the search space has no parameters");
  std::set<std::string_view> names;
  for (auto& p : parameters_) {
    const std::string what = std::string(to_string(p.kind)) + " parameter " + named(p.name);
    if (p.name.empty()) return invalid("a " + std::string(to_string(p.kind)) + " parameter has an empty name");
    if (!names.insert(p.name).second) return invalid("parameter " + named(p.name) + " is declared twice");
    if (p.numeric()) {
      if (!std::isfinite(p.low) || !std::isfinite(p.high))
        return invalid(what + " has a bound that is not finite: [" + real_text(p.low) + ", " + real_text(p.high) + "]");
      if (p.low >= p.high) {
        auto bound = [&](double d) { return p.integral() ? std::to_string(static_cast<std::int64_t>(d)) : real_text(d); };
        return invalid(what + " needs low < high, got low = " + bound(p.low) + ", high = " + bound(p.high));
      }
      if (p.log() && p.low <= 0)
        return invalid(what + " is drawn in log space and needs low > 0, got low = " +
                       (p.integral() ? std::to_string(static_cast<std::int64_t>(p.low)) : real_text(p.low)));
      continue;
    }
    if (p.choices.empty()) return invalid(what + " has no values to choose from");
    for (std::size_t i = 0; i < p.choices.size(); ++i) {
      if (auto* d = std::get_if<double>(&p.choices[i]); d && !std::isfinite(*d))
        return invalid(what + " lists a value that is not finite: " + real_text(*d));
      for (std::size_t j = 0; j < i; ++j)
        if (same_value(p.choices[i], p.choices[j]))
          return invalid(what + " lists " + to_string(p.choices[i]) + " twice");
    }
  }
  return {};
}

expected<void> search_space::check(const params& values) const {
  for (auto& p : parameters_) {
    const value* v = values.find(p.name);
    if (!v) return invalid("params " + to_string(values) + " have no value for " + named(p.name));
    const std::string which = "parameter " + named(p.name) + " = " + to_string(*v);
    if (!p.numeric()) {
      if (!p.index_of(*v)) return invalid(which + " is not one of its " + std::to_string(p.choices.size()) + " values");
      continue;
    }
    if (std::holds_alternative<std::string>(*v)) return invalid(which + " is a string; a number is needed");
    const double x = detail::as_number(*v);
    if (p.integral() && !is_integral(x)) return invalid(which + " is not an integer");
    if (!(x >= p.low && x <= p.high))
      return invalid(which + " is outside its range [" + real_text(p.low) + ", " + real_text(p.high) + "]");
  }
  return {};
}

namespace detail {

double as_number(const value& v) {
  if (auto* d = std::get_if<double>(&v)) return *d;
  if (auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
  return 0;
}

value draw(const parameter& p, rng_type& rng) {
  switch (p.kind) {
  case distribution::uniform: return std::min(p.high, p.low + unit(rng) * (p.high - p.low));
  case distribution::log_uniform: {
    const double lo = std::log(p.low), hi = std::log(p.high);
    return std::clamp(std::exp(lo + unit(rng) * (hi - lo)), p.low, p.high);
  }
  case distribution::integer: {
    const auto low = static_cast<std::int64_t>(p.low), high = static_cast<std::int64_t>(p.high);
    const auto span = static_cast<std::uint64_t>(high) - static_cast<std::uint64_t>(low) + 1;
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(low) + rng() % span);
  }
  case distribution::log_integer: {
    const double lo = std::log(p.low - 0.5), hi = std::log(p.high + 0.5);
    const double x = std::nearbyint(std::exp(lo + unit(rng) * (hi - lo)));
    return static_cast<std::int64_t>(std::clamp(x, p.low, p.high));
  }
  case distribution::categorical:
  case distribution::grid: return p.choices[below(rng, p.choices.size())];
  }
  return 0.0;
}

params draw(const search_space& space, rng_type& rng) {
  params out;
  for (auto& p : space.parameters()) out.set(p.name, draw(p, rng));
  return out;
}

} // namespace detail
} // namespace celer::tune
