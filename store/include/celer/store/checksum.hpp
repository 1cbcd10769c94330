#pragma once
// Checksums of object bytes (XXH3, 64 bits), checked on restore from disk and after a
// transfer between nodes (the node agent checks each pulled chunk), and content hashes
// (XXH3, 128 bits) that name bytes by what they hold (the checkpoint writers' chunks).
// xxhash stays in store/src/checksum.cpp, behind running_checksum's state.
//
//   std::uint64_t sum = checksum(bytes.data(), bytes.size());
//   std::string key = content_hash(bytes.data(), bytes.size()).hex();   // 32 hex digits

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace celer::store {

/// The checksum of `size` bytes at `data`.
[[nodiscard]] std::uint64_t checksum(const void* data, std::size_t size) noexcept;

/// A 128-bit content hash (XXH3-128). Not cryptographic: it tells bytes apart (a collision
/// between two different chunks is about 2^-64 likely among 2^32 chunks), it does not
/// resist someone who crafts collisions.
struct hash128 {
  std::uint64_t high = 0;
  std::uint64_t low = 0;
  friend bool operator==(const hash128&, const hash128&) = default;
  /// 32 lower-case hex digits, high half first (XXH3's canonical order).
  [[nodiscard]] std::string hex() const;
};

/// The content hash of `size` bytes at `data`.
[[nodiscard]] hash128 content_hash(const void* data, std::size_t size) noexcept;

/// A checksum computed over bytes that arrive in pieces (in order).
class running_checksum {
public:
  running_checksum();
  ~running_checksum();
  running_checksum(const running_checksum&) = delete;
  running_checksum& operator=(const running_checksum&) = delete;
  void update(const void* data, std::size_t size) noexcept;
  [[nodiscard]] std::uint64_t digest() const noexcept;

private:
  struct state;
  std::unique_ptr<state> state_;
};

} // namespace celer::store
