// CSV (RFC 4180), JSON Lines, text and IDX files into items (readers.hpp). Each reader reads
// its whole file through zlib (gzipped or plain) and then parses memory; nlohmann-json
// parses the JSON, so no JSON grammar is hand-rolled here.
#include <celer/actors/preprocess/readers.hpp>

#include "input_parse.hpp"

#include "idx_file.hpp"  // actors/common: read_maybe_gzip, idx_header

#include <nlohmann/json.hpp>

#include <charconv>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <utility>

namespace celer::preprocess {
namespace {

using actors::detail::read_maybe_gzip;
using json = nlohmann::json;

std::string file_name(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

std::string in_quotes(std::string_view s) {
  return "\"" + std::string(s) + "\"";
}

bool ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

bool blank(std::string_view s) {
  for (char c : s)
    if (!ascii_space(c)) return false;
  return true;
}

std::string_view trim_spaces(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

/// `s` as a float, or why not.
std::optional<std::string> parse_float(std::string_view s, float& out) {
  const auto t = trim_spaces(s);
  if (t.empty()) return "an empty value is not a number";
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), out);
  if (ec == std::errc::result_out_of_range) return in_quotes(s) + " is out of a float's range";
  if (ec != std::errc{} || end != t.data() + t.size()) return in_quotes(s) + " is not a number";
  return std::nullopt;
}

/// `s` as an int32 label (empty: -1), or why not.
std::optional<std::string> parse_label(std::string_view s, std::int32_t& out) {
  const auto t = trim_spaces(s);
  if (t.empty()) {
    out = -1;
    return std::nullopt;
  }
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), out);
  if (ec != std::errc{} || end != t.data() + t.size()) {
    return in_quotes(s) + " is not an int32 label";
  }
  return std::nullopt;
}

/// The items' default key: "<file name>:<row>".
std::string row_key(const std::string& name, std::size_t row) {
  return name + ":" + std::to_string(row);
}

bool reached(std::size_t count, std::size_t limit) {
  return limit > 0 && count >= limit;
}

error bad_value(const std::string& path, std::size_t line, std::string_view where,
                std::string_view column, const std::string& why) {
  return error(error_code::invalid_argument, path + " line " + std::to_string(line) + " " +
                                               std::string(where) + " " + in_quotes(column) + ": " +
                                               why);
}

// ---- CSV ------------------------------------------------------------------------------------

/// Splits RFC 4180 records off a CSV file's bytes, one record a call.
class csv_scanner {
public:
  csv_scanner(const std::string& path, std::string_view bytes, char delimiter,
              std::size_t first_line = 1)
    : path_(path), s_(bytes), delimiter_(delimiter), line_(first_line), record_line_(first_line) {
    if (s_.starts_with("\xEF\xBB\xBF")) s_.remove_prefix(3);  // a UTF-8 byte-order mark
  }

  /// The next record's fields into `fields`; false after the last record.
  expected<bool> next(std::vector<std::string>& fields) {
    while (pos_ < s_.size() && (s_[pos_] == '\n' || s_.substr(pos_, 2) == "\r\n")) {
      pos_ += s_[pos_] == '\n' ? 1 : 2;  // an empty line
      ++line_;
    }
    if (pos_ == s_.size()) return false;
    record_line_ = line_;
    fields.clear();
    for (;;) {
      std::string field;
      bool end_of_record = false;
      if (s_[pos_] == '"') {
        if (auto ok = quoted_field(field); !ok) return ok.error();
        if (pos_ == s_.size()) {
          end_of_record = true;
        } else if (s_[pos_] == delimiter_) {
          ++pos_;
        } else if (s_[pos_] == '\n' || s_.substr(pos_, 2) == "\r\n") {
          pos_ += s_[pos_] == '\n' ? 1 : 2;
          ++line_;
          end_of_record = true;
        } else {
          return error(error_code::invalid_argument,
                       path_ + " line " + std::to_string(line_) + " field " +
                         std::to_string(fields.size() + 1) +
                         ": a closing quote must be followed by the delimiter or the row's end");
        }
      } else {
        const char stops[] = {delimiter_, '\n'};
        const auto stop = s_.find_first_of(std::string_view(stops, 2), pos_);
        const auto end = stop == std::string_view::npos ? s_.size() : stop;
        auto text = s_.substr(pos_, end - pos_);
        pos_ = end;
        if (pos_ < s_.size() && s_[pos_] == delimiter_) {
          ++pos_;
        } else {
          if (text.ends_with('\r')) text.remove_suffix(1);  // CRLF
          if (pos_ < s_.size()) {
            ++pos_;
            ++line_;
          }
          end_of_record = true;
        }
        field = text;
      }
      fields.push_back(std::move(field));
      if (end_of_record) return true;
      // A delimiter at the very end of the input still ends in an (empty) last field.
      if (pos_ == s_.size()) {
        fields.emplace_back();
        return true;
      }
    }
  }

  /// The line (from 1) the record last returned by next() starts on.
  [[nodiscard]] std::size_t record_line() const noexcept { return record_line_; }

private:
  expected<void> quoted_field(std::string& field) {
    const std::size_t opened = line_;
    ++pos_;  // the opening quote
    for (;;) {
      const auto close = s_.find('"', pos_);
      if (close == std::string_view::npos) {
        return error(error_code::invalid_argument,
                     path_ + " line " + std::to_string(opened) +
                       ": a quoted field opened here never closes (the file ends inside it)");
      }
      const auto part = s_.substr(pos_, close - pos_);
      for (char c : part) line_ += c == '\n' ? 1 : 0;
      field.append(part);
      pos_ = close + 1;
      if (pos_ < s_.size() && s_[pos_] == '"') {  // a doubled quote: one quote
        field.push_back('"');
        ++pos_;
        continue;
      }
      return {};
    }
  }

  const std::string& path_;
  std::string_view s_;
  char delimiter_;
  std::size_t pos_ = 0;
  std::size_t line_;
  std::size_t record_line_;
};

/// Where each field the map names sits in a row; columns the map does not name are ignored.
struct column_plan {
  std::optional<std::size_t> key, label, category;
  std::vector<std::size_t> text, values;
};

expected<column_plan> plan_columns(const std::string& path, const std::vector<std::string>& header,
                                   const field_map& fields) {
  std::unordered_map<std::string_view, std::size_t> index;
  std::unordered_map<std::string_view, std::size_t> times;
  for (std::size_t i = 0; i < header.size(); ++i) {
    index.emplace(header[i], i);  // the first of equal names
    ++times[header[i]];
  }
  const auto find = [&](const std::string& name) -> expected<std::size_t> {
    const auto it = index.find(name);
    if (it == index.end()) {
      std::string names;
      for (const auto& h : header) names += (names.empty() ? "" : ", ") + in_quotes(h);
      return error(error_code::invalid_argument, path + " has no column " + in_quotes(name) +
                                                   " (its header names " + names + ")");
    }
    if (times[name] > 1) {
      return error(error_code::invalid_argument,
                   path + " names column " + in_quotes(name) + " " + std::to_string(times[name]) +
                     " times in its header; which one is meant is unclear");
    }
    return it->second;
  };
  column_plan plan;
  for (auto [name, slot] : {std::pair{&fields.key, &plan.key}, std::pair{&fields.label, &plan.label},
                            std::pair{&fields.category, &plan.category}}) {
    if (name->empty()) continue;
    auto at = find(*name);
    if (!at) return at.error();
    *slot = *at;
  }
  for (auto [names, slots] : {std::pair{&fields.text, &plan.text},
                              std::pair{&fields.values, &plan.values}}) {
    for (const auto& name : *names) {
      auto at = find(name);
      if (!at) return at.error();
      slots->push_back(*at);
    }
  }
  return plan;
}

} // namespace

expected<std::vector<item>> read_csv(const std::string& path, const field_map& fields,
                                     const csv_options& options) {
  auto bytes = read_maybe_gzip(path, "read_csv reads an existing CSV file (gzipped or plain)");
  if (!bytes) return bytes.error();
  return detail::parse_csv(path, *bytes, *bytes, /*first_row=*/0, /*first_line=*/0, fields, options);
}

namespace detail {

expected<std::vector<item>> parse_csv(const std::string& path, std::string_view header_bytes,
                                      std::string_view rows, std::uint64_t first_row,
                                      std::uint64_t first_line, const field_map& fields,
                                      const csv_options& options) {
  const char d = options.delimiter;
  if (d == '"' || d == '\n' || d == '\r' || d == '\0') {
    return error(error_code::invalid_argument,
                 "read_csv of " + path + ": a quote, line break or NUL cannot be the delimiter");
  }
  csv_scanner head(path, header_bytes, d);
  std::vector<std::string> header;
  auto got = head.next(header);
  if (!got) return got.error();
  if (!*got) {
    return error(error_code::invalid_argument,
                 path + " has no header row (read_csv needs one naming the columns)");
  }
  auto plan = plan_columns(path, header, fields);
  if (!plan) return plan.error();
  // The whole file (first_line 0): the rows follow the header in the same bytes.
  csv_scanner scan = first_line == 0 ? head : csv_scanner(path, rows, d, first_line);
  const std::string name = file_name(path);
  std::vector<item> items;
  std::vector<std::string> row;
  while (!reached(items.size(), options.limit)) {
    got = scan.next(row);
    if (!got) return got.error();
    if (!*got) break;
    const std::size_t line = scan.record_line();
    if (row.size() != header.size()) {
      return error(error_code::invalid_argument,
                   path + " line " + std::to_string(line) + " has " + std::to_string(row.size()) +
                     " fields; the header has " + std::to_string(header.size()));
    }
    item it;
    it.key = plan->key ? row[*plan->key] : row_key(name, first_row + items.size());
    if (plan->label) {
      if (auto why = parse_label(row[*plan->label], it.label)) {
        return bad_value(path, line, "column", fields.label, *why);
      }
    }
    if (plan->category) it.category = row[*plan->category];
    for (std::size_t i = 0; i < plan->text.size(); ++i) {
      if (i > 0) it.text.push_back(' ');
      it.text += row[plan->text[i]];
    }
    it.values.resize(plan->values.size());
    for (std::size_t i = 0; i < plan->values.size(); ++i) {
      if (auto why = parse_float(row[plan->values[i]], it.values[i])) {
        return bad_value(path, line, "column", fields.values[i], *why);
      }
    }
    items.push_back(std::move(it));
  }
  return items;
}

} // namespace detail

// ---- JSON Lines -----------------------------------------------------------------------------

namespace {

/// A key, category or text field's value as text, or why it has none.
std::optional<std::string> json_text(const json& v, std::string& out) {
  if (v.is_string()) {
    out = v.get<std::string>();
  } else if (v.is_number() || v.is_boolean()) {
    out = v.dump();
  } else if (v.is_null()) {
    out.clear();
  } else {
    return std::string("an ") + (v.is_array() ? "array" : "object") + " is not text";
  }
  return std::nullopt;
}

std::optional<std::string> json_label(const json& v, std::int32_t& out) {
  if (v.is_null()) {
    out = -1;
    return std::nullopt;
  }
  if (v.is_string()) return parse_label(v.get_ref<const std::string&>(), out);
  if (v.is_number_unsigned() && v.get<std::uint64_t>() >
                                    static_cast<std::uint64_t>(std::numeric_limits<std::int32_t>::max())) {
    return v.dump() + " is out of an int32's range";
  }
  if (v.is_number_integer()) {
    const auto x = v.get<std::int64_t>();
    if (x < std::numeric_limits<std::int32_t>::min() || x > std::numeric_limits<std::int32_t>::max()) {
      return v.dump() + " is out of an int32's range";
    }
    out = static_cast<std::int32_t>(x);
    return std::nullopt;
  }
  return v.dump() + " is not an integer label";
}

std::optional<std::string> json_number(const json& v, std::vector<float>& out) {
  if (v.is_number()) {
    out.push_back(v.get<float>());
    return std::nullopt;
  }
  if (v.is_string()) {
    float x = 0;
    if (auto why = parse_float(v.get_ref<const std::string&>(), x)) return why;
    out.push_back(x);
    return std::nullopt;
  }
  return v.dump() + " is not a number or a numeric string";
}

std::optional<std::string> json_values(const json& v, std::vector<float>& out) {
  if (!v.is_array()) return json_number(v, out);
  for (const auto& x : v) {
    if (auto why = json_number(x, out)) return "in an array, " + *why;
  }
  return std::nullopt;
}

} // namespace

expected<std::vector<item>> read_jsonl(const std::string& path, const field_map& fields,
                                       std::size_t limit) {
  auto bytes = read_maybe_gzip(path, "read_jsonl reads an existing JSON Lines file");
  if (!bytes) return bytes.error();
  return detail::parse_jsonl(path, *bytes, /*first_row=*/0, /*first_line=*/1, fields, limit);
}

namespace detail {

expected<std::vector<item>> parse_jsonl(const std::string& path, std::string_view s,
                                        std::uint64_t first_row, std::uint64_t first_line,
                                        const field_map& fields, std::size_t limit) {
  const std::string name = file_name(path);
  std::vector<item> items;
  std::size_t line = first_line - 1;
  for (std::size_t pos = 0; pos < s.size() && !reached(items.size(), limit);) {
    const auto nl = s.find('\n', pos);
    const auto end = nl == std::string_view::npos ? s.size() : nl;
    const auto text = s.substr(pos, end - pos);
    pos = end + 1;
    ++line;
    if (blank(text)) continue;
    json j;
    try {
      j = json::parse(text);
    } catch (const json::exception& e) {
      return error(error_code::invalid_argument,
                   path + " line " + std::to_string(line) + " is not JSON: " + e.what());
    }
    if (!j.is_object()) {
      return error(error_code::invalid_argument, path + " line " + std::to_string(line) +
                                                   " is not a JSON object but " +
                                                   std::string(j.type_name()));
    }
    const auto field = [&](const std::string& f) -> expected<const json*> {
      const auto it = j.find(f);
      if (it == j.end()) {
        return error(error_code::invalid_argument,
                     path + " line " + std::to_string(line) + " has no field " + in_quotes(f));
      }
      return &*it;
    };
    item it;
    const auto take = [&](const std::string& f, auto parse) -> expected<void> {
      auto v = field(f);
      if (!v) return v.error();
      if (auto w = parse(**v)) return bad_value(path, line, "field", f, *w);
      return {};
    };
    if (!fields.key.empty()) {
      if (auto ok = take(fields.key, [&](const json& v) { return json_text(v, it.key); }); !ok)
        return ok.error();
    } else {
      it.key = row_key(name, first_row + items.size());
    }
    if (!fields.label.empty()) {
      if (auto ok = take(fields.label, [&](const json& v) { return json_label(v, it.label); }); !ok)
        return ok.error();
    }
    if (!fields.category.empty()) {
      if (auto ok = take(fields.category, [&](const json& v) { return json_text(v, it.category); });
          !ok)
        return ok.error();
    }
    for (std::size_t i = 0; i < fields.text.size(); ++i) {
      std::string part;
      if (auto ok = take(fields.text[i], [&](const json& v) { return json_text(v, part); }); !ok)
        return ok.error();
      if (i > 0) it.text.push_back(' ');
      it.text += part;
    }
    for (const auto& f : fields.values) {
      if (auto ok = take(f, [&](const json& v) { return json_values(v, it.values); }); !ok)
        return ok.error();
    }
    items.push_back(std::move(it));
  }
  return items;
}

} // namespace detail

// ---- text and IDX ---------------------------------------------------------------------------

expected<std::vector<item>> read_text(const std::string& path, std::size_t limit) {
  auto bytes = read_maybe_gzip(path, "read_text reads an existing text file");
  if (!bytes) return bytes.error();
  return detail::parse_text(path, *bytes, /*first_line=*/0, limit);
}

namespace detail {

expected<std::vector<item>> parse_text(const std::string& path, std::string_view s,
                                       std::uint64_t first_line, std::size_t limit) {
  const std::string name = file_name(path);
  std::vector<item> items;
  std::size_t line = first_line;
  for (std::size_t pos = 0; pos < s.size() && !reached(items.size(), limit); ++line) {
    const auto nl = s.find('\n', pos);
    const auto end = nl == std::string_view::npos ? s.size() : nl;
    auto text = s.substr(pos, end - pos);
    pos = end + 1;
    if (text.ends_with('\r')) text.remove_suffix(1);
    if (blank(text)) continue;
    item it;
    it.key = row_key(name, line);
    it.text = text;
    items.push_back(std::move(it));
  }
  return items;
}

} // namespace detail

expected<std::vector<item>> read_idx(const std::string& images_path,
                                     const std::string& labels_path, std::size_t limit) {
  const std::string whence = "read_idx reads IDX files (Fashion-MNIST comes with Debian's "
                             "dataset-fashion-mnist, in /usr/share/datasets/fashion-mnist)";
  auto images = read_maybe_gzip(images_path, whence);
  if (!images) return images.error();
  auto layout = actors::detail::idx_header(*images, images_path);
  if (!layout) return layout.error();
  if (layout->shape.size() != 3) {
    return error(error_code::invalid_argument,
                 images_path + " holds " + std::to_string(layout->shape.size()) +
                   "-dimensional IDX data; read_idx reads images, N × height × width");
  }
  const std::size_t n = layout->shape[0];
  const std::uint32_t height = layout->shape[1], width = layout->shape[2];
  std::string labels;
  std::size_t labels_start = 0;
  if (!labels_path.empty()) {
    auto got = read_maybe_gzip(labels_path, whence);
    if (!got) return got.error();
    labels = std::move(*got);
    auto l = actors::detail::idx_header(labels, labels_path);
    if (!l) return l.error();
    if (l->shape.size() != 1 || l->shape[0] != n) {
      return error(error_code::invalid_argument,
                   images_path + " and " + labels_path + " do not pair: " + std::to_string(n) +
                     " images need a 1-dimensional label file of " + std::to_string(n) +
                     " labels");
    }
    labels_start = l->start;
  }
  const std::string name = file_name(images_path);
  const std::size_t count = limit > 0 && limit < n ? limit : n;
  const std::size_t pixels = std::size_t{height} * width;
  std::vector<item> items(count);
  for (std::size_t i = 0; i < count; ++i) {
    auto& it = items[i];
    it.key = row_key(name, i);
    const auto* p = reinterpret_cast<const std::uint8_t*>(images->data()) + layout->start +
                    i * pixels;
    it.pixels.assign(p, p + pixels);
    it.height = height;
    it.width = width;
    it.channels = 1;
    it.label = labels_path.empty() ? -1 : static_cast<unsigned char>(labels[labels_start + i]);
  }
  return items;
}

} // namespace celer::preprocess
