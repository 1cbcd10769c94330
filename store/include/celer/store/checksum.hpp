#pragma once
// Checksums of object bytes (XXH3, 64 bits), checked on restore from disk and after a
// transfer between nodes (the node agent checks each pulled chunk). xxhash stays in
// store/src/checksum.cpp, behind running_checksum's state.
//
//   std::uint64_t sum = checksum(bytes.data(), bytes.size());

#include <cstddef>
#include <cstdint>
#include <memory>

namespace celer::store {

/// The checksum of `size` bytes at `data`.
[[nodiscard]] std::uint64_t checksum(const void* data, std::size_t size) noexcept;

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
