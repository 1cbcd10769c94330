#pragma once
// The frame of the vocabulary and BPE files (text.hpp; format in actors/preprocess/README.md):
// plain text lines, the first naming the kind and version, the last "end <crc32>" holding
// zlib's CRC-32 of every byte before it, so a damaged, cut or hand-edited file is refused.
// Internal to celer::actors.
#include <celer/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace celer::preprocess::detail {

/// Writes `body` (whole lines, each ending in '\n') and then "end <crc32 of body, 8
/// lower-case hex digits>\n" to `path + ".part"`, and renames it to `path`. I/O errors as
/// the disk reports them.
[[nodiscard]] expected<void> write_checked_text(const std::string& path, const std::string& body);

/// Reads a file write_checked_text wrote and gives back its lines before the end line,
/// without their '\n'. not_found for a missing file; invalid_argument when the first line
/// does not start with `magic` and a space (not a file of this kind, which `kind` names);
/// data_loss when the end line is missing or malformed (a cut file) or the CRC differs.
[[nodiscard]] expected<std::vector<std::string>> read_checked_text(const std::string& path,
                                                                  std::string_view magic,
                                                                  std::string_view kind);

/// "<path> line <n>: <what>" as data_loss: a line of a checked file that does not fit.
[[nodiscard]] error damaged_line(const std::string& path, std::size_t line, const std::string& what);

/// The whole decimal `s` as a uint64; false for anything else (signs, spaces, overflow).
[[nodiscard]] bool parse_decimal(std::string_view s, std::uint64_t& out) noexcept;

/// A header line's "name=<decimal>" as `out`; false for anything else.
[[nodiscard]] bool header_field(std::string_view field, std::string_view name,
                                std::uint64_t& out) noexcept;

} // namespace celer::preprocess::detail
