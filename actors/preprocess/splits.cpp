// Cutting the input into splits, and reading one split (pipeline.hpp).
#include <celer/actors/preprocess/pipeline.hpp>
#include <celer/actors/preprocess/sharding.hpp>

#include "input_parse.hpp"
#include "io_error.hpp"  // actors/common

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace celer::preprocess {

namespace {

/// A read-only mapping of a whole file.
class mapped_file {
public:
  static expected<mapped_file> open(const std::string& path) {
    mapped_file m;
    m.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (m.fd_ < 0)
      return errno == ENOENT ? error(error_code::not_found, path + ": " + std::strerror(errno))
                             : actors::detail::io_error(errno, "cannot open", path);
    struct stat st {};
    if (::fstat(m.fd_, &st) != 0) return error(error_code::unavailable, path + ": " + std::strerror(errno));
    m.size_ = static_cast<std::size_t>(st.st_size);
    if (m.size_ > 0) {
      void* p = ::mmap(nullptr, m.size_, PROT_READ, MAP_PRIVATE, m.fd_, 0);
      if (p == MAP_FAILED) return error(error_code::unavailable, path + ": " + std::strerror(errno));
      m.data_ = static_cast<const char*>(p);
      ::madvise(p, m.size_, MADV_SEQUENTIAL);
    }
    return m;
  }
  mapped_file() = default;
  mapped_file(mapped_file&& o) noexcept
      : fd_(std::exchange(o.fd_, -1)), data_(std::exchange(o.data_, nullptr)), size_(o.size_) {}
  mapped_file& operator=(mapped_file&&) = delete;
  ~mapped_file() {
    if (data_ != nullptr) ::munmap(const_cast<char*>(data_), size_);
    if (fd_ >= 0) ::close(fd_);
  }
  [[nodiscard]] std::string_view bytes() const noexcept { return {data_, size_}; }

private:
  int fd_ = -1;
  const char* data_ = nullptr;
  std::size_t size_ = 0;
};

/// The end of the row that starts at `at` (one past its '\n', or the end): for CSV, line
/// breaks inside quotes do not end a row.
std::size_t row_end(std::string_view text, std::size_t at, bool csv) {
  if (!csv) {
    auto nl = text.find('\n', at);
    return nl == std::string_view::npos ? text.size() : nl + 1;
  }
  bool quoted = false;
  for (std::size_t i = at; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') quoted = !quoted;
    else if (c == '\n' && !quoted) return i + 1;
  }
  return text.size();
}

bool blank(std::string_view row) {
  for (char c : row)
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') return false;
  return true;
}

struct idx_header {
  std::uint32_t count = 0, height = 0, width = 0;
  std::uint64_t data_offset = 0;  // where the first item starts (in the uncompressed bytes)
};

/// Reads an IDX header (images: magic 0x803, labels: 0x801) through zlib, which reads plain
/// files as they are.
expected<idx_header> read_idx_header(const std::string& path, bool images) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return error(error_code::not_found, path + ": cannot open");
  unsigned char h[16] = {};
  const int want = images ? 16 : 8;
  const int got = gzread(f, h, static_cast<unsigned>(want));
  gzclose(f);
  auto be = [&](int at) {
    return (std::uint32_t{h[at]} << 24) | (std::uint32_t{h[at + 1]} << 16) |
           (std::uint32_t{h[at + 2]} << 8) | std::uint32_t{h[at + 3]};
  };
  if (got != want || be(0) != (images ? 0x803u : 0x801u))
    return error(error_code::invalid_argument,
                 path + ": not an IDX " + (images ? "image" : "label") + " file (bad header)");
  idx_header out;
  out.count = be(4);
  if (images) out.height = be(8), out.width = be(12);
  out.data_offset = static_cast<std::uint64_t>(want);
  return out;
}

/// Reads `n` bytes at uncompressed offset `at` of a (possibly gzipped) file.
expected<std::string> read_gz_range(const std::string& path, std::uint64_t at, std::uint64_t n) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return error(error_code::not_found, path + ": cannot open");
  gzbuffer(f, 1 << 20);
  std::string out(n, '\0');
  bool ok = gzseek(f, static_cast<z_off_t>(at), SEEK_SET) == static_cast<z_off_t>(at);
  std::uint64_t done = 0;
  while (ok && done < n) {
    const auto chunk = static_cast<unsigned>(std::min<std::uint64_t>(n - done, 1u << 30));
    const int got = gzread(f, out.data() + done, chunk);
    if (got <= 0) ok = false;
    else done += static_cast<std::uint64_t>(got);
  }
  gzclose(f);
  if (!ok)
    return error(error_code::data_loss, path + ": ends before byte " + std::to_string(at + n) +
                                            " (truncated?)");
  return out;
}

/// The split still lies inside the file (a file that shrank since plan_splits is refused).
expected<void> still_planned(const std::string& path, std::string_view text, const split& s) {
  if (s.end > text.size() || s.begin > s.end)
    return error(error_code::failed_precondition,
                 path + " changed since the run was planned (it is now " +
                   std::to_string(text.size()) + " bytes)");
  return {};
}

std::string base_name(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

} // namespace

expected<std::vector<split>> plan_splits(const input_spec& input) {
  std::vector<split> out;
  const std::uint64_t per_block = input.block_items;
  if (input.format == input_format::idx) {
    auto images = read_idx_header(input.paths.front(), /*images=*/true);
    if (!images) return images.error();
    auto labels = read_idx_header(input.labels, /*images=*/false);
    if (!labels) return labels.error();
    if (labels->count != images->count)
      return error(error_code::invalid_argument,
                   input.labels + " holds " + std::to_string(labels->count) + " labels but " +
                     input.paths.front() + " " + std::to_string(images->count) + " images");
    std::uint64_t n = images->count;
    if (input.limit > 0) n = std::min<std::uint64_t>(n, input.limit);
    for (std::uint64_t first = 0; first < n; first += per_block)
      out.push_back({.file = 0, .begin = first, .end = std::min(n, first + per_block),
                     .first_row = first});
    return out;
  }
  const bool csv = input.format == input_format::csv;
  for (std::uint32_t f = 0; f < input.paths.size(); ++f) {
    auto file = mapped_file::open(input.paths[f]);
    if (!file) return file.error();
    const auto text = file->bytes();
    if (text.starts_with("\x1f\x8b")) {  // gzip: read whole, by one worker
      out.push_back({.file = f, .begin = 0, .end = text.size(), .first_row = 0, .first_line = 0});
      continue;
    }
    std::size_t at = 0;
    std::uint64_t line = 0;
    auto count_lines = [&](std::size_t from, std::size_t to) {
      for (auto i = from; i < to; ++i) line += text[i] == '\n' ? 1 : 0;
    };
    if (csv) {  // the header row
      at = row_end(text, 0, true);
      count_lines(0, at);
    }
    std::uint64_t row = 0, in_block = 0;
    split current{.file = f, .begin = at, .end = at, .first_row = 0, .first_line = line};
    while (at < text.size() && (input.limit == 0 || row < input.limit)) {
      const auto end = row_end(text, at, csv);
      if (!blank(text.substr(at, end - at))) {
        ++row;
        ++in_block;
      }
      count_lines(at, end);
      at = end;
      if (in_block == per_block) {
        current.end = at;
        out.push_back(current);
        current = split{.file = f, .begin = at, .end = at, .first_row = row, .first_line = line};
        in_block = 0;
      }
    }
    if (in_block > 0) {
      current.end = at;
      out.push_back(current);
    }
  }
  return out;
}

expected<std::vector<item>> read_split(const input_spec& input, const split& s) {
  if (s.file >= input.paths.size())
    return error(error_code::invalid_argument, "split names file " + std::to_string(s.file) +
                                                   " of " + std::to_string(input.paths.size()));
  const auto& path = input.paths[s.file];
  if (input.format == input_format::idx) {
    auto h = read_idx_header(path, /*images=*/true);
    if (!h) return h.error();
    const std::uint64_t pixels = std::uint64_t{h->height} * h->width;
    const std::uint64_t n = s.end - s.begin;
    auto images = read_gz_range(path, h->data_offset + s.begin * pixels, n * pixels);
    if (!images) return images.error();
    auto labels = read_gz_range(input.labels, 8 + s.begin, n);
    if (!labels) return labels.error();
    std::vector<item> out(n);
    const auto name = base_name(path);
    for (std::uint64_t i = 0; i < n; ++i) {
      auto& it = out[i];
      it.key = name + ":" + std::to_string(s.begin + i);
      it.label = static_cast<unsigned char>((*labels)[i]);
      it.height = h->height;
      it.width = h->width;
      it.channels = 1;
      const auto* p = reinterpret_cast<const std::uint8_t*>(images->data() + i * pixels);
      it.pixels.assign(p, p + pixels);
    }
    return out;
  }
  auto file = mapped_file::open(path);
  if (!file) return file.error();
  const auto text = file->bytes();
  if (auto ok = still_planned(path, text, s); !ok) return ok.error();
  const std::size_t limit = input.limit;
  if (text.starts_with("\x1f\x8b")) {  // gzip: the whole file (plan_splits made one split)
    switch (input.format) {
    case input_format::text: return read_text(path, limit);
    case input_format::jsonl: return read_jsonl(path, input.fields, limit);
    case input_format::csv: return read_csv(path, input.fields, {.delimiter = input.delimiter, .limit = limit});
    case input_format::idx: break;
    }
  }
  const auto range = text.substr(s.begin, s.end - s.begin);
  // A split never holds more than its share of the limit: plan_splits stopped there.
  switch (input.format) {
  case input_format::text: return detail::parse_text(path, range, s.first_line);
  case input_format::jsonl:
    return detail::parse_jsonl(path, range, s.first_row, s.first_line + 1, input.fields);
  case input_format::csv:
    return detail::parse_csv(path, text, range, s.first_row, s.first_line + 1, input.fields,
                             {.delimiter = input.delimiter});
  case input_format::idx: break;
  }
  return error(error_code::internal, "unreachable input format");
}

namespace detail {

expected<std::uint64_t> split_digest(const input_spec& input, const split& s) {
  if (s.file >= input.paths.size())
    return error(error_code::invalid_argument, "split names file " + std::to_string(s.file));
  const auto& path = input.paths[s.file];
  if (input.format == input_format::idx) {
    auto h = read_idx_header(path, /*images=*/true);
    if (!h) return h.error();
    const std::uint64_t pixels = std::uint64_t{h->height} * h->width;
    auto images = read_gz_range(path, h->data_offset + s.begin * pixels, (s.end - s.begin) * pixels);
    if (!images) return images.error();
    auto labels = read_gz_range(input.labels, 8 + s.begin, s.end - s.begin);
    if (!labels) return labels.error();
    return stable_hash64(*labels, stable_hash64(*images, stable_hash64(base_name(path), s.begin)));
  }
  auto file = mapped_file::open(path);
  if (!file) return file.error();
  const auto text = file->bytes();
  if (auto ok = still_planned(path, text, s); !ok) return ok.error();
  // The file's name and the split's place too: items' default keys are made from them.
  return stable_hash64(text.substr(s.begin, s.end - s.begin),
                       stable_hash64(base_name(path), s.first_row * 1000003 + s.first_line));
}

} // namespace detail

} // namespace celer::preprocess
