#pragma once
// Whole files that may be gzipped, and the header of an IDX file (the format MNIST and
// Fashion-MNIST ship in): what the shipped data sets (data/data.cpp) and the preprocessing
// readers (preprocess/readers.cpp) both read. Internal to celer::actors.
#include <celer/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace celer::actors::detail {

/// The whole content of `path`, gunzipped when it is gzip (zlib reads plain files as they
/// are). not_found for a missing file, its message ending in `whence` (where the data comes
/// from); unavailable when it cannot be opened; data_loss for a damaged gzip stream.
[[nodiscard]] expected<std::string> read_maybe_gzip(const std::string& path,
                                                    const std::string& whence);

/// An IDX file of unsigned bytes (type 0x08): its dimensions and where its values start.
struct idx_layout {
  std::vector<std::uint32_t> shape;
  std::size_t start = 0;
};

/// Reads the header of the IDX bytes `s` (the content of `path`, named in messages) and
/// checks that exactly the values it announces follow. invalid_argument otherwise: bad
/// magic, another value type, a truncated header, too few or too many values.
[[nodiscard]] expected<idx_layout> idx_header(const std::string& s, const std::string& path);

} // namespace celer::actors::detail
