#pragma once
// One node's shared memory: a memfd the node agent creates and every process on the node
// maps (by /proc/<pid>/fd/<fd>), and the allocator that hands out its bytes. Objects live at
// offsets in it, so a reader on the node maps the writer's bytes without a copy.
//
// Pages of freed blocks stay mapped and resident: a block reused by the next object of its
// size is written at memory speed, with no page faults (the arena never grows past its
// capacity, so this costs at most the capacity).

#include <celer/error.hpp>

#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

namespace celer::store {

/// A shared memory segment mapped into this process.
class shm_segment {
public:
  shm_segment() = default;
  ~shm_segment();
  shm_segment(shm_segment&& other) noexcept;
  shm_segment& operator=(shm_segment&& other) noexcept;
  shm_segment(const shm_segment&) = delete;
  shm_segment& operator=(const shm_segment&) = delete;

  /// A new segment of `capacity` bytes (pages are allocated when first written).
  [[nodiscard]] static expected<shm_segment> create(std::size_t capacity);
  /// Maps the segment another process created, by the path it published.
  [[nodiscard]] static expected<shm_segment> open(const std::string& path, std::size_t capacity);

  [[nodiscard]] std::byte* base() const noexcept { return base_; }
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  /// Where other processes on this machine open it ("/proc/<pid>/fd/<fd>").
  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  [[nodiscard]] bool valid() const noexcept { return base_ != nullptr; }

private:
  int fd_ = -1;
  std::byte* base_ = nullptr;
  std::size_t capacity_ = 0;
  std::string path_;
};

/// Best-fit allocation of [0, capacity) in blocks aligned to `alignment`, with free blocks
/// merged with their neighbours. Not thread-safe: its owner serialises calls.
class block_allocator {
public:
  static constexpr std::size_t alignment = 64;
  explicit block_allocator(std::size_t capacity);

  /// The offset of a free block of at least `size` bytes, or nothing when none is large
  /// enough. `size` is rounded up to the alignment.
  [[nodiscard]] std::optional<std::size_t> allocate(std::size_t size);
  /// Returns the block allocate() gave for `size` at `offset`.
  void release(std::size_t offset, std::size_t size);

  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  [[nodiscard]] std::size_t used() const noexcept { return used_; }
  [[nodiscard]] std::size_t largest_free() const noexcept;
  [[nodiscard]] static std::size_t round_up(std::size_t n) noexcept {
    return (n + alignment - 1) / alignment * alignment;
  }

private:
  void insert_free(std::size_t offset, std::size_t size);
  void erase_free(std::map<std::size_t, std::size_t>::iterator it);

  std::size_t capacity_;
  std::size_t used_ = 0;
  /// Free blocks by offset (for merging) and by (size, offset) (for best fit).
  std::map<std::size_t, std::size_t> by_offset_;
  std::set<std::pair<std::size_t, std::size_t>> by_size_;
};

} // namespace celer::store
