#include "block_cache.hpp"

#include "io_error.hpp"  // actors/common

#include <celer/codec.hpp>

#include <zlib.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <unistd.h>

namespace celer::preprocess::detail {

namespace {

constexpr std::string_view magic = "CELERBC1";
constexpr std::size_t header_size = 24;

void put_le(std::string& out, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint64_t get_le(const char* p, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= std::uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}

std::uint32_t crc32_of(std::string_view data) {
  std::uint32_t c = 0;
  while (!data.empty()) {
    const auto n = static_cast<uInt>(std::min<std::size_t>(data.size(), 1u << 30));
    c = static_cast<std::uint32_t>(::crc32(c, reinterpret_cast<const Bytef*>(data.data()), n));
    data.remove_prefix(n);
  }
  return c;
}

} // namespace

std::string block_cache::path(std::uint64_t key, const char* kind) const {
  char name[32];
  std::snprintf(name, sizeof name, "%016llx.%s", static_cast<unsigned long long>(key), kind);
  return dir_ + "/" + name;
}

std::optional<std::string> block_cache::load(const std::string& file) const {
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const bool whole = all.size() >= header_size && std::string_view(all).substr(0, 8) == magic &&
                     get_le(all.data() + 8, 8) == all.size() - header_size &&
                     get_le(all.data() + 16, 4) ==
                       crc32_of(std::string_view(all).substr(header_size));
  if (!whole) {
    std::remove(file.c_str());  // damaged: a miss, and made again
    return std::nullopt;
  }
  return all.substr(header_size);
}

expected<void> block_cache::store(const std::string& file, std::string_view payload) const {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return actors::detail::io_error(ec.value(), "making the cache folder", dir_);
  static std::atomic<std::uint64_t> counter{0};
  const std::string part =
    file + "." + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".part";
  std::string header(magic);
  put_le(header, payload.size(), 8);
  put_le(header, crc32_of(payload), 4);
  put_le(header, 0, 4);
  const int fd = ::open(part.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return actors::detail::io_error(errno, "creating", part);
  auto write_all = [&](std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::write(fd, bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  };
  const bool ok = write_all(header) && write_all(payload) && ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok || ::rename(part.c_str(), file.c_str()) != 0) {
    const int e = ok ? errno : err;
    ::unlink(part.c_str());
    return actors::detail::io_error(e, "writing the cache entry", file);
  }
  return {};
}

std::optional<block_cache::entry<std::vector<item>>> block_cache::load_items(std::uint64_t key) const {
  if (!enabled()) return std::nullopt;
  auto payload = load(path(key, "items"));
  if (!payload || payload->size() < 8) return std::nullopt;
  try {
    return entry<std::vector<item>>{
      get_le(payload->data(), 8),
      celer::detail::unpack<std::vector<item>>(std::string_view(*payload).substr(8), "a cached block")};
  } catch (const std::exception&) {
    return std::nullopt;  // written by another version: a miss
  }
}

std::optional<block_cache::entry<std::string>> block_cache::load_records(std::uint64_t key) const {
  if (!enabled()) return std::nullopt;
  auto payload = load(path(key, "rec"));
  if (!payload || payload->size() < 8) return std::nullopt;
  return entry<std::string>{get_le(payload->data(), 8), payload->substr(8)};
}

expected<void> block_cache::store_items(std::uint64_t key, std::uint64_t items_read,
                                        const std::vector<item>& items) const {
  if (!enabled()) return {};
  std::string payload;
  put_le(payload, items_read, 8);
  payload += celer::detail::pack(items);
  return store(path(key, "items"), payload);
}

expected<void> block_cache::store_records(std::uint64_t key, std::uint64_t items_read,
                                          std::string_view bytes) const {
  if (!enabled()) return {};
  std::string payload;
  put_le(payload, items_read, 8);
  payload += bytes;
  return store(path(key, "rec"), payload);
}

} // namespace celer::preprocess::detail
