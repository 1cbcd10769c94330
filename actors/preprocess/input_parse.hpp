#pragma once
// The readers' parsers over a part of a file (readers.cpp), so that a worker reads only its
// split (pipeline.hpp's read_split); and a split's content hash for the stage cache
// (splits.cpp). Internal to actors/preprocess.
#include <celer/actors/preprocess/item.hpp>
#include <celer/actors/preprocess/pipeline.hpp>
#include <celer/actors/preprocess/readers.hpp>
#include <celer/error.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace celer::preprocess::detail {

/// JSON Lines `text` (whole lines of `path`), the first on line `first_line` (from 1) and the
/// first data row numbered `first_row` (default keys "<file name>:<row>").
[[nodiscard]] expected<std::vector<item>> parse_jsonl(const std::string& path, std::string_view text,
                                                      std::uint64_t first_row,
                                                      std::uint64_t first_line,
                                                      const field_map& fields, std::size_t limit = 0);

/// CSV rows `rows` (whole records of `path`) under its header row (the start of
/// `header_bytes`), the first on line `first_line` (from 1; 0: `rows` is the whole file,
/// header included).
[[nodiscard]] expected<std::vector<item>> parse_csv(const std::string& path,
                                                    std::string_view header_bytes,
                                                    std::string_view rows, std::uint64_t first_row,
                                                    std::uint64_t first_line,
                                                    const field_map& fields,
                                                    const csv_options& options);

/// Lines of text, the first being line `first_line` (from 0) of `path`: keys
/// "<file name>:<line>", blank lines skipped but counted.
[[nodiscard]] expected<std::vector<item>> parse_text(const std::string& path, std::string_view text,
                                                     std::uint64_t first_line, std::size_t limit = 0);

/// XXH64 of the split's bytes (for idx: of its images' and labels' bytes).
[[nodiscard]] expected<std::uint64_t> split_digest(const input_spec& input, const split& s);

} // namespace celer::preprocess::detail
