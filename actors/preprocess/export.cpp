// Record files as CSV and JSON Lines, for people (records.hpp). nlohmann-json writes the
// JSON, so escaping is never hand-rolled; CSV quoting follows RFC 4180.
#include <celer/actors/preprocess/records.hpp>

#include "io_error.hpp"  // actors/common

#include <nlohmann/json.hpp>

#include <cerrno>
#include <fstream>
#include <ostream>

namespace celer::preprocess {
namespace {

bool text_schema(std::string_view schema) {
  return schema == "text" || schema.starts_with("text:");
}

/// `field` as one CSV field: quoted when it holds a comma, a quote or a line break.
void put_csv_field(std::ostream& out, std::string_view field) {
  if (field.find_first_of(",\"\r\n") == std::string_view::npos) {
    out << field;
    return;
  }
  out << '"';
  for (char c : field) {
    if (c == '"') out << '"';
    out << c;
  }
  out << '"';
}

expected<void> stream_failed(const record_reader& reader, std::string_view what) {
  return error(error_code::unavailable,
               std::string(what) + " of " + reader.path() + ": the output stream failed");
}

/// Runs `write(out)` on a file at `path`, replacing it; errors as the disk reports them.
template <class Write>
expected<void> to_file(const std::string& path, Write write) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return actors::detail::io_error(errno, "creating", path);
  if (auto ok = write(out); !ok) return ok;
  out.close();
  if (!out) return actors::detail::io_error(errno, "writing", path);
  return {};
}

} // namespace

expected<void> write_csv(const record_reader& reader, std::ostream& out) {
  const bool text = text_schema(reader.schema());
  out << "key,label,payload_bytes" << (text ? ",payload" : "") << "\n";
  for (std::uint64_t i = 0; i < reader.count(); ++i) {
    auto r = reader.at(i);
    if (!r) return r.error();
    put_csv_field(out, r->key);
    out << ',' << r->label << ',' << r->payload.size();
    if (text) {
      out << ',';
      put_csv_field(out, r->payload);
    }
    out << '\n';
    if (!out) return stream_failed(reader, "the CSV");
  }
  out.flush();
  if (!out) return stream_failed(reader, "the CSV");
  return {};
}

expected<void> write_csv(const record_reader& reader, const std::string& path) {
  return to_file(path, [&](std::ostream& out) { return write_csv(reader, out); });
}

expected<void> write_jsonl(const record_reader& reader, std::ostream& out) {
  const bool text = text_schema(reader.schema());
  for (std::uint64_t i = 0; i < reader.count(); ++i) {
    auto r = reader.at(i);
    if (!r) return r.error();
    nlohmann::ordered_json row;
    row["key"] = std::string(r->key);
    row["label"] = r->label;
    row["payload_bytes"] = r->payload.size();
    if (text) row["payload"] = std::string(r->payload);
    // Keys and payloads are bytes: what is not UTF-8 becomes U+FFFD rather than an exception.
    out << row.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    if (!out) return stream_failed(reader, "the JSONL");
  }
  out.flush();
  if (!out) return stream_failed(reader, "the JSONL");
  return {};
}

expected<void> write_jsonl(const record_reader& reader, const std::string& path) {
  return to_file(path, [&](std::ostream& out) { return write_jsonl(reader, out); });
}

} // namespace celer::preprocess
