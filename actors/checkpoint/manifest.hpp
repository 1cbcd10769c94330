#pragma once
// A checkpoint's manifest: what it holds (entries, their chunks, sizes and checksums) as a
// JSON text a person can read, closed by a checksum line. The same text is stored in both
// tiers. actors/README.md ("On disk") documents the format.
#include <celer/actors/checkpoint.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace celer::checkpoint::detail {

/// The format's name and version, first field of every manifest.
inline constexpr std::string_view format_name = "celer-checkpoint/1";

struct chunk_ref {
  /// XXH3-128 of the chunk's bytes, 32 hex digits: its name in both tiers.
  std::string key;
  std::uint64_t size = 0;
};

struct manifest_entry {
  std::string name;
  value_type type = value_type::bytes;
  std::map<std::string, std::string> attributes;
  std::uint64_t size = 0;
  /// XXH3-64 of the entry's bytes.
  std::uint64_t checksum = 0;
  /// Small values are kept in the manifest itself (`value`); bytes are in chunks.
  bool is_inline = false;
  std::string value;
  std::vector<chunk_ref> chunks;
};

struct manifest {
  std::uint64_t id = 0;
  std::int64_t step = 0;
  std::int64_t created_unix_ms = 0;
  std::map<std::string, std::string> metadata;
  chunking chunks;
  std::uint64_t segment_bytes = 0;
  std::vector<manifest_entry> entries;

  [[nodiscard]] std::uint64_t logical_bytes() const noexcept;
};

/// The manifest as stored: JSON, a newline, then "xxh3_64 <16 hex digits>\n", the
/// checksum of every byte before that line.
[[nodiscard]] std::string encode(const manifest& m);
/// Reads a stored manifest; data_loss saying what is wrong (truncated, checksum mismatch,
/// not JSON, a field missing or of the wrong type, another format).
[[nodiscard]] expected<manifest> decode(std::string_view text);

/// Whether `s` is valid UTF-8 (a small value kept inline must be, to sit in JSON).
[[nodiscard]] bool is_utf8(std::string_view s) noexcept;

/// 16 lower-case hex digits / their value.
[[nodiscard]] std::string hex64(std::uint64_t v);
[[nodiscard]] std::string type_name(value_type t);

/// A manifest's name in both tiers: the id in 20 decimal digits, so names sort as ids.
[[nodiscard]] std::string manifest_name(std::uint64_t id);

/// Which of the checkpoints `steps` (id -> step) a tier keeps: the newest `keep_last` and,
/// when `keep_every_steps` > 0, each whose step is a multiple of it.
[[nodiscard]] std::vector<std::uint64_t> kept(const std::map<std::uint64_t, std::int64_t>& steps,
                                              std::size_t keep_last,
                                              std::int64_t keep_every_steps);

} // namespace celer::checkpoint::detail
