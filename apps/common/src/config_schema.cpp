// The non-template parts of config_schema.hpp.
#include <celer/apps/config_schema.hpp>

namespace celer::apps {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

std::string_view closest_to(std::string_view name, std::span<const std::string_view> candidates) {
  std::string_view best;
  std::size_t best_distance = 3;
  for (auto c : candidates) {
    if (auto d = edit_distance(name, c); d < best_distance) best = c, best_distance = d;
  }
  return best;
}

std::string unknown_key_message(std::string_view name, std::string_view where,
                                std::span<const std::string_view> valid) {
  std::string message = "unknown key '" + std::string(name) + "'" + (where.empty() ? "" : " " + std::string(where)) + ".";
  if (auto near = closest_to(name, valid); !near.empty()) message += " Did you mean '" + std::string(near) + "'?";
  std::string all;
  for (auto v : valid) all += (all.empty() ? "" : ", ") + std::string(v);
  return message + " Valid keys: " + all + ".";
}

std::string either_of(std::span<const std::string_view> values) {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += i + 1 == values.size() ? " or " : ", ";
    out += values[i];
  }
  return out;
}

std::string flag_of(std::string_view key) {
  std::string flag = "--" + std::string(key);
  std::replace(flag.begin() + 2, flag.end(), '_', '-');
  return flag;
}

} // namespace celer::apps
