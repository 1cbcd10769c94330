#include "manifest.hpp"

#include <celer/store/checksum.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <ctime>

namespace celer::checkpoint::detail {
namespace {

using json = nlohmann::ordered_json;

constexpr std::string_view trailer_tag = "xxh3_64 ";

std::string iso8601(std::int64_t unix_ms) {
  const std::time_t secs = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[32];
  const auto n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char ms[8];
  std::snprintf(ms, sizeof ms, ".%03dZ", static_cast<int>(unix_ms % 1000));
  return std::string(buf, n) + ms;
}

bool parse_hex64(std::string_view s, std::uint64_t& out) {
  if (s.size() != 16) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out, 16);
  return ec == std::errc() && end == s.data() + s.size();
}

bool is_key(std::string_view s) {
  return s.size() == 32 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

expected<value_type> type_of(const std::string& name) {
  for (auto t : {value_type::bytes, value_type::int64, value_type::float64, value_type::text}) {
    if (type_name(t) == name) return t;
  }
  return error(error_code::data_loss, "an entry has the unknown type \"" + name + "\"");
}

json entry_json(const manifest_entry& e) {
  json j;
  j["name"] = e.name;
  j["type"] = type_name(e.type);
  j["size"] = e.size;
  j["xxh3_64"] = hex64(e.checksum);
  if (!e.attributes.empty()) j["attributes"] = e.attributes;
  if (e.is_inline) {
    j["value"] = e.value;
  } else {
    json chunks = json::array();
    for (const auto& c : e.chunks) chunks.push_back(json::array({c.key, c.size}));
    j["chunks"] = std::move(chunks);
  }
  return j;
}

manifest_entry entry_of(const json& j) {
  manifest_entry e;
  e.name = j.at("name").get<std::string>();
  auto t = type_of(j.at("type").get<std::string>());
  if (!t) throw std::runtime_error(t.error().message());
  e.type = *t;
  e.size = j.at("size").get<std::uint64_t>();
  if (!parse_hex64(j.at("xxh3_64").get<std::string>(), e.checksum)) {
    throw std::runtime_error("entry " + e.name + " has a bad xxh3_64");
  }
  if (j.contains("attributes")) {
    e.attributes = j.at("attributes").get<std::map<std::string, std::string>>();
  }
  if (j.contains("value")) {
    e.is_inline = true;
    e.value = j.at("value").get<std::string>();
    if (e.value.size() != e.size) {
      throw std::runtime_error("entry " + e.name + "'s value is not " + std::to_string(e.size) +
                               " bytes");
    }
    return e;
  }
  std::uint64_t total = 0;
  for (const auto& c : j.at("chunks")) {
    chunk_ref r{c.at(0).get<std::string>(), c.at(1).get<std::uint64_t>()};
    if (!is_key(r.key)) throw std::runtime_error("entry " + e.name + " names a bad chunk key");
    total += r.size;
    e.chunks.push_back(std::move(r));
  }
  if (total != e.size) {
    throw std::runtime_error("entry " + e.name + "'s chunks hold " + std::to_string(total) +
                             " bytes, not " + std::to_string(e.size));
  }
  return e;
}

} // namespace

std::uint64_t manifest::logical_bytes() const noexcept {
  std::uint64_t n = 0;
  for (const auto& e : entries) n += e.size;
  return n;
}

std::string hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string type_name(value_type t) {
  switch (t) {
    case value_type::bytes: return "bytes";
    case value_type::int64: return "int64";
    case value_type::float64: return "float64";
    case value_type::text: return "text";
  }
  return "unknown";
}

std::string manifest_name(std::uint64_t id) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%020llu", static_cast<unsigned long long>(id));
  return buf;
}

bool is_utf8(std::string_view s) noexcept {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    }
    if ((c & 0xe0) == 0xc0) {
      n = 1;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    for (std::size_t k = 1; k <= n; ++k) {
      if (i + k >= s.size()) return false;
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
    static constexpr std::uint32_t least[] = {0, 0x80, 0x800, 0x10000};
    if (cp < least[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += n + 1;
  }
  return true;
}

std::string encode(const manifest& m) {
  // Pretty at the top, one line per entry: a person can read it and grep it, and a JSON
  // reader takes it as it is (after the checksum line is cut off).
  auto field = [](const char* name, const json& v) {
    return std::string(" \"") + name + "\": " + v.dump() + ",\n";
  };
  std::string out = "{\n";
  out += field("format", std::string(format_name));
  out += field("id", m.id);
  out += field("step", m.step);
  out += field("created", iso8601(m.created_unix_ms));
  out += field("created_unix_ms", m.created_unix_ms);
  out += field("metadata", json(m.metadata));
  json chunking_j;
  chunking_j["algorithm"] = "fastcdc-gear";
  chunking_j["min_bytes"] = m.chunks.min_bytes;
  chunking_j["avg_bytes"] = m.chunks.avg_bytes;
  chunking_j["max_bytes"] = m.chunks.max_bytes;
  chunking_j["segment_bytes"] = m.segment_bytes;
  chunking_j["chunk_hash"] = "xxh3-128";
  out += field("chunking", chunking_j);
  out += field("logical_bytes", m.logical_bytes());
  out += " \"entries\": [";
  for (std::size_t i = 0; i < m.entries.size(); ++i) {
    out += i == 0 ? "\n  " : ",\n  ";
    out += entry_json(m.entries[i]).dump();
  }
  out += m.entries.empty() ? "]\n}\n" : "\n ]\n}\n";
  out += std::string(trailer_tag) + hex64(store::checksum(out.data(), out.size())) + "\n";
  return out;
}

expected<manifest> decode(std::string_view text) {
  // The checksum line: "xxh3_64 " + 16 hex digits + "\n", last.
  const std::size_t line = trailer_tag.size() + 16 + 1;
  const bool has_trailer = text.size() >= line && text.back() == '\n' &&
                           text.substr(text.size() - line, trailer_tag.size()) == trailer_tag &&
                           (text.size() == line || text[text.size() - line - 1] == '\n');
  if (!has_trailer) {
    return error(error_code::data_loss, "the manifest is truncated (" +
                                          std::to_string(text.size()) +
                                          " bytes, no checksum line at the end)");
  }
  const std::string_view body = text.substr(0, text.size() - line);
  std::uint64_t want = 0;
  if (!parse_hex64(text.substr(text.size() - 17, 16), want)) {
    return error(error_code::data_loss, "the manifest's checksum line is malformed");
  }
  if (store::checksum(body.data(), body.size()) != want) {
    return error(error_code::data_loss, "the manifest's checksum does not match its bytes");
  }
  try {
    const json j = json::parse(body);
    if (j.at("format").get<std::string>() != format_name) {
      return error(error_code::data_loss, "the manifest is of format " +
                                            j.at("format").get<std::string>() + ", not " +
                                            std::string(format_name));
    }
    manifest m;
    m.id = j.at("id").get<std::uint64_t>();
    m.step = j.at("step").get<std::int64_t>();
    m.created_unix_ms = j.at("created_unix_ms").get<std::int64_t>();
    m.metadata = j.at("metadata").get<std::map<std::string, std::string>>();
    const auto& c = j.at("chunking");
    m.chunks.min_bytes = c.at("min_bytes").get<std::size_t>();
    m.chunks.avg_bytes = c.at("avg_bytes").get<std::size_t>();
    m.chunks.max_bytes = c.at("max_bytes").get<std::size_t>();
    m.segment_bytes = c.at("segment_bytes").get<std::uint64_t>();
    for (const auto& e : j.at("entries")) m.entries.push_back(entry_of(e));
    return m;
  } catch (const std::exception& e) {
    return error(error_code::data_loss, std::string("the manifest does not parse: ") + e.what());
  }
}

std::vector<std::uint64_t> kept(const std::map<std::uint64_t, std::int64_t>& steps,
                                std::size_t keep_last, std::int64_t keep_every_steps) {
  std::vector<std::uint64_t> out;
  std::size_t newest = 0;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    const bool recent = newest++ < keep_last;
    const bool milestone = keep_every_steps > 0 && it->second % keep_every_steps == 0;
    if (recent || milestone) out.push_back(it->first);
  }
  std::reverse(out.begin(), out.end());
  return out;
}

} // namespace celer::checkpoint::detail
