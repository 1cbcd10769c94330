// Gzipped or plain whole files through zlib, and IDX headers (idx_file.hpp).
#include "idx_file.hpp"

#include "io_error.hpp"

#include <zlib.h>

#include <array>
#include <cerrno>
#include <filesystem>
#include <memory>

namespace celer::actors::detail {
namespace {

std::uint32_t big_endian32(const std::string& s, std::size_t at) {
  return (std::uint32_t{static_cast<unsigned char>(s[at])} << 24) |
         (std::uint32_t{static_cast<unsigned char>(s[at + 1])} << 16) |
         (std::uint32_t{static_cast<unsigned char>(s[at + 2])} << 8) |
         std::uint32_t{static_cast<unsigned char>(s[at + 3])};
}

} // namespace

expected<std::string> read_maybe_gzip(const std::string& path, const std::string& whence) {
  if (!std::filesystem::exists(path)) {
    return error(error_code::not_found, path + " does not exist; " + whence);
  }
  errno = 0;
  std::unique_ptr<gzFile_s, decltype(&gzclose)> f(gzopen(path.c_str(), "rb"), &gzclose);
  if (!f) return errno != 0 ? io_error(errno, "cannot open", path) : error(error_code::unavailable, "cannot open " + path);
  std::string out;
  std::array<char, 1 << 16> buf{};
  for (;;) {
    const int n = gzread(f.get(), buf.data(), static_cast<unsigned>(buf.size()));
    if (n < 0) {
      int code = 0;
      return error(error_code::data_loss,
                   path + " is not readable gzip: " + gzerror(f.get(), &code));
    }
    if (n == 0) break;
    out.append(buf.data(), static_cast<std::size_t>(n));
  }
  return out;
}

expected<idx_layout> idx_header(const std::string& s, const std::string& path) {
  if (s.size() < 4 || s[0] != 0 || s[1] != 0) {
    return error(error_code::invalid_argument, path + " is not an IDX file (bad magic)");
  }
  if (static_cast<unsigned char>(s[2]) != 0x08) {
    return error(error_code::invalid_argument,
                 path + " holds IDX type " + std::to_string(static_cast<unsigned char>(s[2])) +
                   "; only unsigned bytes (0x08) are read");
  }
  const std::size_t dims = static_cast<unsigned char>(s[3]);
  if (dims == 0 || s.size() < 4 + 4 * dims) {
    return error(error_code::invalid_argument, path + " has a truncated IDX header");
  }
  idx_layout layout;
  std::size_t count = 1;
  for (std::size_t d = 0; d < dims; ++d) {
    layout.shape.push_back(big_endian32(s, 4 + 4 * d));
    count *= layout.shape.back();
  }
  layout.start = 4 + 4 * dims;
  if (s.size() - layout.start != count) {
    return error(error_code::invalid_argument,
                 path + " should hold " + std::to_string(count) +
                   " values after its header, holds " + std::to_string(s.size() - layout.start));
  }
  return layout;
}

} // namespace celer::actors::detail
