#include "scheduler/labels.hpp"

#include <algorithm>

namespace celer::scheduling {
namespace {

bool valid_key(std::string_view key) {
  return !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == '/' || c == '-';
  });
}

std::vector<std::string> split_values(std::string_view text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const auto bar = text.find('|', start);
    out.emplace_back(text.substr(start, bar == std::string_view::npos ? bar : bar - start));
    if (bar == std::string_view::npos) break;
    start = bar + 1;
  }
  return out;
}

} // namespace

expected<protocol::label_selector> parse_label_selector(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return error(error_code::invalid_argument,
                 "label selector '" + std::string(text) + "' " + why +
                   " (write key=value, key!=value, key=a|b, key!=a|b, key or !key)");
  };
  protocol::label_selector s;
  const auto eq = text.find('=');
  if (eq == std::string_view::npos) {
    const bool negated = !text.empty() && text.front() == '!';
    s.key = std::string(text.substr(negated ? 1 : 0));
    s.op = negated ? protocol::label_op::not_exists : protocol::label_op::exists;
  } else {
    const bool negated = eq > 0 && text[eq - 1] == '!';
    s.key = std::string(text.substr(0, negated ? eq - 1 : eq));
    s.values = split_values(text.substr(eq + 1));
    const bool many = s.values.size() > 1;
    s.op = negated ? (many ? protocol::label_op::not_in : protocol::label_op::not_equals)
                   : (many ? protocol::label_op::in : protocol::label_op::equals);
    if (std::any_of(s.values.begin(), s.values.end(), [](const auto& v) { return v.empty(); })) {
      return bad("has an empty value");
    }
  }
  if (!valid_key(s.key)) return bad("has no valid key");
  return s;
}

expected<std::vector<protocol::label_selector>> parse_label_selectors(
  const std::vector<std::string>& texts) {
  std::vector<protocol::label_selector> out;
  out.reserve(texts.size());
  for (const auto& t : texts) {
    auto s = parse_label_selector(t);
    if (!s) return s.error();
    out.push_back(std::move(*s));
  }
  return out;
}

bool labels_match(const std::map<std::string, std::string>& labels,
                  const std::vector<protocol::label_selector>& selectors) {
  for (const auto& s : selectors) {
    const auto it = labels.find(s.key);
    const bool has = it != labels.end();
    const bool among =
      has && std::find(s.values.begin(), s.values.end(), it->second) != s.values.end();
    bool ok = false;
    switch (s.op) {
      case protocol::label_op::equals:
      case protocol::label_op::in: ok = among; break;
      // A node without the label is not the excluded value.
      case protocol::label_op::not_equals:
      case protocol::label_op::not_in: ok = !among; break;
      case protocol::label_op::exists: ok = has; break;
      case protocol::label_op::not_exists: ok = !has; break;
    }
    if (!ok) return false;
  }
  return true;
}

std::string to_string(const protocol::label_selector& s) {
  std::string values;
  for (const auto& v : s.values) values += (values.empty() ? "" : "|") + v;
  switch (s.op) {
    case protocol::label_op::equals:
    case protocol::label_op::in: return s.key + "=" + values;
    case protocol::label_op::not_equals:
    case protocol::label_op::not_in: return s.key + "!=" + values;
    case protocol::label_op::exists: return s.key;
    case protocol::label_op::not_exists: return "!" + s.key;
  }
  return s.key;
}

} // namespace celer::scheduling
