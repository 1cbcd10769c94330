// The ids' definitions: hex spelling, parsing, random generation.
#include <celer/ids.hpp>

#include <chrono>
#include <cstdio>
#include <random>

namespace celer {

std::string unique_id::hex() const {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(hi),
                static_cast<unsigned long long>(lo));
  return buf;
}

std::optional<unique_id> unique_id::parse(std::string_view hex) {
  if (hex.size() != 32) return std::nullopt;
  unique_id id;
  for (std::size_t i = 0; i < 32; ++i) {
    const char c = hex[i];
    int v = 0;
    if (c >= '0' && c <= '9') {
      v = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      v = c - 'a' + 10;
    } else {
      return std::nullopt;
    }
    auto& half = i < 16 ? id.hi : id.lo;
    half = (half << 4) | static_cast<std::uint64_t>(v);
  }
  return id;
}

std::string unique_id::bytes() const {
  std::string out(16, '\0');
  for (std::size_t i = 0; i < 8; ++i) {
    out[i] = static_cast<char>(hi >> (56 - 8 * i));
    out[8 + i] = static_cast<char>(lo >> (56 - 8 * i));
  }
  return out;
}

std::optional<unique_id> unique_id::from_bytes(std::string_view b) {
  if (b.size() != 16) return std::nullopt;
  unique_id id;
  for (std::size_t i = 0; i < 8; ++i) {
    id.hi = (id.hi << 8) | static_cast<unsigned char>(b[i]);
    id.lo = (id.lo << 8) | static_cast<unsigned char>(b[8 + i]);
  }
  return id;
}

unique_id unique_id::random() {
  thread_local std::mt19937_64 gen{std::random_device{}() ^
                                   static_cast<std::uint64_t>(
                                     std::chrono::steady_clock::now().time_since_epoch().count())};
  unique_id id;
  do {
    id.hi = gen();
    id.lo = gen();
  } while (id.nil());
  return id;
}

} // namespace celer
