// The checksummed text files of the vocabulary and the BPE model (checked_text_file.hpp).
#include "checked_text_file.hpp"

#include "io_error.hpp"  // actors/common

#include <zlib.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace celer::preprocess::detail {
namespace {

std::string crc_hex(std::string_view bytes) {
  const auto crc = ::crc32(0, reinterpret_cast<const Bytef*>(bytes.data()),
                           static_cast<uInt>(bytes.size()));
  char out[9];
  std::snprintf(out, sizeof out, "%08lx", static_cast<unsigned long>(crc));
  return out;
}

} // namespace

expected<void> write_checked_text(const std::string& path, const std::string& body) {
  const std::string part = path + ".part";
  {
    std::ofstream out(part, std::ios::binary | std::ios::trunc);
    if (!out) return actors::detail::io_error(errno, "creating", part);
    out << body << "end " << crc_hex(body) << "\n";
    out.close();
    if (!out) return actors::detail::io_error(errno, "writing", part);
  }
  std::error_code ec;
  std::filesystem::rename(part, path, ec);
  if (ec) return actors::detail::io_error(ec.value(), "renaming " + part + " to", path);
  return {};
}

expected<std::vector<std::string>> read_checked_text(const std::string& path,
                                                     std::string_view magic,
                                                     std::string_view kind) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (!std::filesystem::exists(path)) {
      return error(error_code::not_found, std::string(kind) + " file " + path + " does not exist");
    }
    return actors::detail::io_error(errno, "opening", path);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return actors::detail::io_error(errno, "reading", path);
  const std::string bytes = ss.str();
  const std::string prefix = std::string(magic) + " ";
  if (!bytes.starts_with(prefix)) {
    return error(error_code::invalid_argument,
                 path + " is not a " + std::string(kind) + " file (it does not start with \"" +
                   prefix + "\")");
  }
  // The end line: "end " and 8 hex digits, then '\n', the file's last 13 bytes.
  constexpr std::size_t end_size = 13;
  const std::string_view all = bytes;
  if (all.size() < prefix.size() + end_size || !all.ends_with('\n') ||
      !all.substr(all.size() - end_size).starts_with("end ") ||
      all[all.size() - end_size - 1] != '\n') {
    return error(error_code::data_loss,
                 path + ": truncated or damaged: it does not end in the line \"end <crc32>\"");
  }
  const auto body = all.substr(0, all.size() - end_size);
  const auto stored = all.substr(all.size() - end_size + 4, 8);
  const auto computed = crc_hex(body);
  if (stored != computed) {
    return error(error_code::data_loss, path + ": checksum mismatch (stored " +
                                          std::string(stored) + ", computed " + computed +
                                          "): the file is damaged or was edited");
  }
  std::vector<std::string> lines;
  for (std::size_t pos = 0; pos < body.size();) {
    const auto nl = body.find('\n', pos);  // the body ends in '\n' (checked above)
    lines.emplace_back(body.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return lines;
}

error damaged_line(const std::string& path, std::size_t line, const std::string& what) {
  return error(error_code::data_loss, path + " line " + std::to_string(line) + ": " + what);
}

bool parse_decimal(std::string_view s, std::uint64_t& out) noexcept {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && end == s.data() + s.size();
}

bool header_field(std::string_view field, std::string_view name, std::uint64_t& out) noexcept {
  if (!field.starts_with(name) || field.size() <= name.size() || field[name.size()] != '=') {
    return false;
  }
  return parse_decimal(field.substr(name.size() + 1), out);
}

} // namespace celer::preprocess::detail
