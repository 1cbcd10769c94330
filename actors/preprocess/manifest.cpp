// The output directory's manifest.json and its checks (manifest.hpp; the JSON is documented
// in actors/preprocess/README.md, "The output directory", which this file must match).
#include <celer/actors/preprocess/item.hpp>
#include <celer/actors/preprocess/manifest.hpp>

#include "io_error.hpp"  // actors/common

#include <nlohmann/json.hpp>

#include <cerrno>
#include <charconv>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <type_traits>
#include <unistd.h>

namespace celer::preprocess {
namespace fs = std::filesystem;
using json = nlohmann::json;
namespace {

constexpr std::string_view format_name = "CELERRC1";
/// Dimensions a schema's shape may have, and values one sample may hold (4 GiB of f32).
constexpr std::size_t max_dims = 8;
constexpr std::int64_t max_values = std::int64_t{1} << 30;
/// The smallest finished record file: a 32-byte header and the 32-byte trailer.
constexpr std::uint64_t min_shard_bytes = 64;

std::string manifest_path(const std::string& dir) {
  return (fs::path(dir) / std::string(manifest_file_name)).string();
}

error invalid(const std::string& where, const std::string& field, const std::string& what) {
  return error(error_code::invalid_argument, where + ": field '" + field + "' " + what);
}

bool is_hex16(const std::string& s) {
  if (s.size() != 16) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

/// A shard's name as the manifest may list it: relative, inside the directory, not empty.
bool is_inside(const std::string& file) {
  if (file.empty() || file.find('\0') != std::string::npos) return false;
  const fs::path p(file);
  if (p.is_absolute() || p.has_root_name()) return false;
  for (const auto& part : p) {
    if (part == "..") return false;
  }
  return p.has_filename();
}

/// Every check of a manifest that needs no file: what write_manifest refuses and
/// read_manifest reports after parsing. `where` starts each message.
expected<void> check(const manifest& m, const std::string& where) {
  auto shape = parse_schema_shape(m.schema);
  if (!shape) return invalid(where, "schema", "is \"" + m.schema + "\": " + shape.error().message());
  if (!m.sample_shape.empty() && m.sample_shape != *shape)
    return invalid(where, "sample_shape", "does not match the schema \"" + m.schema + "\"");
  if (m.classes < 0) return invalid(where, "classes", "is " + std::to_string(m.classes) + ": must be 0 or more");
  if (!m.label_names.empty() && m.label_names.size() != static_cast<std::size_t>(m.classes))
    return invalid(where, "label_names", "holds " + std::to_string(m.label_names.size()) + " names for " +
                                           std::to_string(m.classes) + " classes: give one per class, or none");
  if (!is_hex16(m.key_checksum))
    return invalid(where, "key_checksum", "is \"" + m.key_checksum + "\": must be 16 lower-case hex digits");
  if (!is_hex16(m.config_hash))
    return invalid(where, "config_hash", "is \"" + m.config_hash + "\": must be 16 lower-case hex digits");
  std::uint64_t total = 0;
  std::set<std::string> seen;
  for (std::size_t i = 0; i < m.shards.size(); ++i) {
    const auto& s = m.shards[i];
    const std::string field = "shards[" + std::to_string(i) + "]";
    if (!is_inside(s.file))
      return invalid(where, field + ".file", "is \"" + s.file + "\": must name a file inside the directory");
    if (!seen.insert(fs::path(s.file).lexically_normal().string()).second)
      return invalid(where, field + ".file", "is \"" + s.file + "\", listed twice");
    if (s.bytes < min_shard_bytes)
      return invalid(where, field + ".bytes", "is " + std::to_string(s.bytes) + ": a record file is at least " +
                                                std::to_string(min_shard_bytes) + " bytes");
    total += s.records;
  }
  if (total != m.items)
    return invalid(where, "items", "is " + std::to_string(m.items) + " but the shards' records add up to " +
                                     std::to_string(total));
  return {};
}

/// Reads manifest field `key` of `j` into `out`; invalid_argument naming it when it is missing or
/// of the wrong type.
template <class T>
expected<void> take(const json& j, const std::string& key, const std::string& field, T& out,
                    const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end()) return invalid(where, field, "is missing");
  const char* wanted = "a string";
  bool ok = false;
  if constexpr (std::is_same_v<T, std::string>) {
    ok = it->is_string();
  } else if constexpr (std::is_unsigned_v<T>) {
    wanted = "an integer of 0 or more";
    ok = it->is_number_unsigned();  // nlohmann-json reads every integer >= 0 as unsigned
  } else {
    wanted = "an integer";
    ok = it->is_number_integer() && it->template get<std::int64_t>() >= std::numeric_limits<int>::min() &&
         it->template get<std::int64_t>() <= std::numeric_limits<int>::max();
  }
  if (!ok) return invalid(where, field, "must be " + std::string(wanted) + ", not " + it->dump());
  out = it->template get<T>();
  return {};
}

expected<void> fsync_path(const std::string& path, int flags, const char* what) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return actors::detail::io_error(errno, what, path);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return actors::detail::io_error(err, what, path);
  return {};
}

} // namespace

expected<std::vector<std::int64_t>> parse_schema_shape(std::string_view schema) {
  const std::string forms = "use f32:SHAPE, u8:SHAPE (SHAPE like 64 or 1x28x28), u32:tokens or text";
  if (schema == "u32:tokens" || schema == "text") return std::vector<std::int64_t>{};
  std::string_view dims;
  if (schema.starts_with("f32:")) dims = schema.substr(4);
  else if (schema.starts_with("u8:")) dims = schema.substr(3);
  else return error(error_code::invalid_argument, "an unknown schema: " + forms);
  std::vector<std::int64_t> shape;
  std::int64_t values = 1;
  while (true) {
    const auto cut = dims.find('x');
    const auto part = dims.substr(0, cut);
    std::int64_t d = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), d);
    if (part.empty() || ec != std::errc() || end != part.data() + part.size() || d < 1)
      return error(error_code::invalid_argument,
                   "the dimension \"" + std::string(part) + "\" is not a positive integer: " + forms);
    if (d > max_values || values * d > max_values)
      return error(error_code::invalid_argument, "a sample of over 2^30 values");
    values *= d;
    shape.push_back(d);
    if (shape.size() > max_dims) return error(error_code::invalid_argument, "more than 8 dimensions");
    if (cut == std::string_view::npos) break;
    dims.remove_prefix(cut + 1);
  }
  return shape;
}

expected<std::uint64_t> schema_payload_bytes(std::string_view schema) {
  auto shape = parse_schema_shape(schema);
  if (!shape) return shape.error();
  if (shape->empty()) return std::uint64_t{0};
  std::uint64_t n = schema.starts_with("f32:") ? 4 : 1;
  for (auto d : *shape) n *= static_cast<std::uint64_t>(d);
  return n;
}

expected<void> write_manifest(const std::string& dir, const manifest& m) {
  const std::string path = manifest_path(dir);
  if (auto ok = check(m, path); !ok) return ok;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return actors::detail::io_error(ec.value(), "making the folder", dir);
  nlohmann::ordered_json j;
  j["format"] = format_name;
  j["version"] = manifest_version;
  j["schema"] = m.schema;
  j["sample_shape"] = *parse_schema_shape(m.schema);  // check() parsed it
  j["classes"] = m.classes;
  j["label_names"] = m.label_names;
  j["items"] = m.items;
  j["key_checksum"] = m.key_checksum;
  j["config_hash"] = m.config_hash;
  j["shards"] = nlohmann::ordered_json::array();
  for (const auto& s : m.shards)
    j["shards"].push_back({{"file", s.file}, {"records", s.records}, {"bytes", s.bytes}});
  const std::string text = j.dump(2) + "\n";

  const std::string part = path + ".part";
  {
    std::ofstream out(part, std::ios::binary | std::ios::trunc);
    if (!out) return actors::detail::io_error(errno, "creating", part);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.flush();
    if (!out) return actors::detail::io_error(errno, "writing", part);
  }
  if (auto ok = fsync_path(part, O_RDONLY, "syncing"); !ok) return ok;
  if (::rename(part.c_str(), path.c_str()) != 0)
    return actors::detail::io_error(errno, "renaming " + part + " to", path);
  return fsync_path(dir, O_RDONLY | O_DIRECTORY, "syncing the folder");
}

expected<manifest> read_manifest(const std::string& dir) {
  const std::string path = manifest_path(dir);
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return error(error_code::not_found, "the output directory " + dir + " does not exist" +
                                          (fs::exists(dir, ec) ? " (it is a file)" : ""));
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return error(error_code::not_found,
                 path + " does not exist: " + dir +
                   " is not a celer-preprocess output directory, or its run has not finished (the manifest "
                   "is written last)");
  std::stringstream text;
  text << in.rdbuf();
  json j;
  try {
    j = json::parse(text.str());
  } catch (const json::parse_error& e) {
    return error(error_code::data_loss, path + " is not valid JSON: " + e.what());
  }
  if (!j.is_object()) return error(error_code::invalid_argument, path + ": a manifest is a JSON object");

  manifest m;
  std::string format;
  if (auto ok = take(j, "format", "format", format, path); !ok) return ok.error();
  if (format != format_name)
    return invalid(path, "format", "is \"" + format + "\": this reader knows \"" + std::string(format_name) + "\"");
  int version = 0;
  if (auto ok = take(j, "version", "version", version, path); !ok) return ok.error();
  if (version != manifest_version)
    return error(error_code::failed_precondition, path + ": field 'version' is " + std::to_string(version) +
                                                    "; this build reads version " + std::to_string(manifest_version));
  if (auto ok = take(j, "schema", "schema", m.schema, path); !ok) return ok.error();
  if (auto ok = take(j, "classes", "classes", m.classes, path); !ok) return ok.error();
  if (auto ok = take(j, "items", "items", m.items, path); !ok) return ok.error();
  if (auto ok = take(j, "key_checksum", "key_checksum", m.key_checksum, path); !ok) return ok.error();
  if (auto ok = take(j, "config_hash", "config_hash", m.config_hash, path); !ok) return ok.error();
  if (auto it = j.find("sample_shape"); it != j.end()) {
    if (!it->is_array()) return invalid(path, "sample_shape", "must be a list of dimensions, not " + it->dump());
    for (const auto& d : *it) {
      if (!d.is_number_integer()) return invalid(path, "sample_shape", "must be a list of integers, not " + it->dump());
      m.sample_shape.push_back(d.get<std::int64_t>());
    }
  }
  if (auto it = j.find("label_names"); it != j.end()) {
    if (!it->is_array()) return invalid(path, "label_names", "must be a list of names, not " + it->dump());
    for (const auto& n : *it) {
      if (!n.is_string()) return invalid(path, "label_names", "must be a list of strings, not " + it->dump());
      m.label_names.push_back(n.get<std::string>());
    }
  }
  const auto shards = j.find("shards");
  if (shards == j.end()) return invalid(path, "shards", "is missing");
  if (!shards->is_array()) return invalid(path, "shards", "must be a list of shard entries, not " + shards->dump());
  for (std::size_t i = 0; i < shards->size(); ++i) {
    const auto& s = (*shards)[i];
    const std::string field = "shards[" + std::to_string(i) + "]";
    if (!s.is_object())
      return invalid(path, field, "must be an object {\"file\", \"records\", \"bytes\"}, not " + s.dump());
    shard_entry e;
    if (auto ok = take(s, "file", field + ".file", e.file, path); !ok) return ok.error();
    if (auto ok = take(s, "records", field + ".records", e.records, path); !ok) return ok.error();
    if (auto ok = take(s, "bytes", field + ".bytes", e.bytes, path); !ok) return ok.error();
    m.shards.push_back(std::move(e));
  }
  if (auto ok = check(m, path); !ok) return ok.error();
  m.sample_shape = *parse_schema_shape(m.schema);
  return m;
}

expected<record_reader> open_shard(const std::string& dir, const manifest& m, std::size_t i) {
  if (i >= m.shards.size())
    return error(error_code::invalid_argument, dir + ": shard " + std::to_string(i) + " asked for; the manifest lists " +
                                                 std::to_string(m.shards.size()));
  const auto& entry = m.shards[i];
  const std::string path = (fs::path(dir) / entry.file).string();
  auto r = record_reader::open(path);
  if (!r) {
    if (r.error().code() == error_code::not_found)
      return error(error_code::not_found, dir + ": shard " + entry.file + " (shards[" + std::to_string(i) +
                                            "] of its manifest) is missing: " + r.error().message());
    return r.error();
  }
  const auto differs = [&](const std::string& what, const std::string& file, const std::string& listed) {
    return error(error_code::data_loss, path + ": the file's " + what + " is " + file + ", its manifest says " +
                                          listed + " (the directory's files are not the ones its manifest lists)");
  };
  if (r->schema() != m.schema) return differs("schema", "\"" + std::string(r->schema()) + "\"", "\"" + m.schema + "\"");
  if (r->count() != entry.records)
    return differs("record count", std::to_string(r->count()), std::to_string(entry.records));
  if (r->size() != entry.bytes) return differs("size", std::to_string(r->size()) + " bytes", std::to_string(entry.bytes));
  return r;
}

expected<void> verify_output(const std::string& dir) {
  auto m = read_manifest(dir);
  if (!m) return m.error();
  const auto payload = schema_payload_bytes(m->schema);
  if (!payload) return payload.error();  // read_manifest checked the schema
  key_digest keys;
  for (std::size_t i = 0; i < m->shards.size(); ++i) {
    auto r = open_shard(dir, *m, i);
    if (!r) return r.error();
    if (auto ok = r->verify(); !ok) return ok;
    for (std::uint64_t k = 0; k < r->count(); ++k) {
      auto rec = r->at(k);
      if (!rec) return rec.error();
      const auto size = rec->payload.size();
      const bool size_ok = *payload > 0 ? size == *payload : m->schema != "u32:tokens" || size % 4 == 0;
      if (!size_ok)
        return error(error_code::invalid_argument,
                     r->path() + ": record " + std::to_string(k) + " has a payload of " + std::to_string(size) +
                       " bytes; the schema \"" + m->schema + "\" needs " +
                       (*payload > 0 ? std::to_string(*payload) : std::string("a multiple of 4")));
      if (m->classes > 0 && (rec->label < 0 || rec->label >= m->classes))
        return error(error_code::invalid_argument,
                     r->path() + ": record " + std::to_string(k) + " has label " + std::to_string(rec->label) +
                       ", outside [0, " + std::to_string(m->classes) + ") (the manifest's classes)");
      keys.add(rec->key);
    }
  }
  if (keys.hex() != m->key_checksum)
    return error(error_code::data_loss, manifest_path(dir) + ": the key checksum recomputed over the " +
                                          std::to_string(keys.count) + " records is " + keys.hex() +
                                          ", the manifest says " + m->key_checksum +
                                          " (records were lost, added twice or changed)");
  return {};
}

} // namespace celer::preprocess
