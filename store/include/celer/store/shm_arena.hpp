#pragma once
// Part of the store's public face: the runtime's core worker maps the segment a node's store
// publishes, and the node agent reads and writes objects in it.
//
// Shared memory on one node: a memfd (one job's arena of the object store, or a peer lane's
// ring) and the allocator that hands out its bytes. Objects live at offsets in it, so a
// reader on the node maps the writer's bytes without a copy.
//
// Pages of freed blocks stay mapped and resident: a block reused by the next object of its
// size is written at memory speed, with no page faults. block_allocator keeps count of those
// resident free bytes, so that the object store can punch them out (punch()) when the
// arenas of several jobs together would hold more than the node's capacity.
//
// Who may write: the node agent creates an arena and maps it read-write. A process of the
// arena's job receives its fd (node/arena_handout.hpp, SCM_RIGHTS) and adopts it with its
// base mapping read-only (a stray write through it faults), and maps a writable_view of just
// the object it is writing, dropped when it seals. docs/objects.md says what this protects.
//
//   auto seg = shm_segment::adopt(fd, reply.capacity, shm_access::read_only);
//   auto out = seg->map_writable(reply.offset, reply.size);   // the writer, until it seals
//   std::memcpy(out->data(), value, reply.size);
//   const std::byte* in = seg->base() + reply.offset;          // every reader: PROT_READ

#include <celer/error.hpp>

#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace celer::store {

/// How a process other than the segment's creator maps it.
enum class shm_access {
  /// The fd and the whole mapping read-only: readers of sealed objects.
  read_only,
  /// The whole mapping read-write (what every process did before read-only views).
  read_write,
};

/// A writable mapping of one object's pages, for its writer until it seals: unmapped when
/// destroyed. Covers whole pages, so the first and last bytes of neighbouring objects that
/// share a page with it are writable through it too.
class writable_view {
public:
  writable_view() = default;
  ~writable_view();
  writable_view(writable_view&& other) noexcept;
  writable_view& operator=(writable_view&& other) noexcept;
  writable_view(const writable_view&) = delete;
  writable_view& operator=(const writable_view&) = delete;

  /// The object's first byte (null for an empty object).
  [[nodiscard]] std::byte* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }

private:
  friend class shm_segment;
  void* map_ = nullptr;
  std::size_t map_size_ = 0;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

/// A shared memory segment mapped into this process.
class shm_segment {
public:
  shm_segment() = default;
  ~shm_segment();
  shm_segment(shm_segment&& other) noexcept;
  shm_segment& operator=(shm_segment&& other) noexcept;
  shm_segment(const shm_segment&) = delete;
  shm_segment& operator=(const shm_segment&) = delete;

  /// A new segment of `capacity` bytes (pages are allocated when first written); `name`
  /// shows in /proc/<pid>/maps and fd links.
  [[nodiscard]] static expected<shm_segment> create(std::size_t capacity,
                                                    const char* name = "celer-object-store");
  /// Maps the segment behind `fd` (received from its creator), taking the fd: closed with
  /// the segment, or here on failure. `access` is the base mapping's: read_only maps
  /// PROT_READ even when the fd is read-write, and map_writable() then maps from the fd
  /// itself. invalid_argument when `capacity` is zero or more than the segment holds.
  [[nodiscard]] static expected<shm_segment> adopt(int fd, std::size_t capacity,
                                                   shm_access access = shm_access::read_only);
  /// Maps the segment another process created, by the path it published. invalid_argument
  /// when `capacity` is zero or more than the segment holds (bytes past its end would fault
  /// on first touch). Readers should ask for read_only; read_write is the default only
  /// while callers still write through base().
  [[nodiscard]] static expected<shm_segment> open(const std::string& path, std::size_t capacity,
                                                  shm_access access = shm_access::read_write);
  /// A writable mapping of `size` bytes at `offset` (the pages around them): from the fd
  /// when it is read-write, else opened anew read-write by path. invalid_argument when the range is
  /// not inside the segment.
  [[nodiscard]] expected<writable_view> map_writable(std::size_t offset, std::size_t size) const;
  [[nodiscard]] bool read_only() const noexcept { return read_only_; }

  [[nodiscard]] std::byte* base() const noexcept { return base_; }
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  /// Where other processes on this machine open it ("/proc/<pid>/fd/<fd>"); only
  /// processes that may read this one's fds can (none when it is not dumpable). Peer lanes
  /// use it; the object store hands its arenas' fds over a socket instead.
  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  /// The segment's fd (owned by it; dup it to keep it past the segment).
  [[nodiscard]] int fd() const noexcept { return fd_; }
  /// Gives the memory of the whole pages inside [offset, offset + size) back to the system
  /// (they read as zeros after). Partial pages at either end stay.
  void punch(std::size_t offset, std::size_t size) const noexcept;
  /// The bytes of memory the segment holds now (its pages in memory or swap).
  [[nodiscard]] std::size_t resident_bytes() const noexcept;
  [[nodiscard]] bool valid() const noexcept { return base_ != nullptr; }

private:
  int fd_ = -1;
  std::byte* base_ = nullptr;
  std::size_t capacity_ = 0;
  std::string path_;
  bool read_only_ = false;
  /// The fd itself is read-write (a read-only base mapping's writable views map from it).
  bool writable_fd_ = false;
};

/// Best-fit allocation of [0, capacity) in blocks aligned to `alignment`, with free blocks
/// merged with their neighbours. Not thread-safe: its owner serialises calls.
class block_allocator {
public:
  static constexpr std::size_t alignment = 64;
  explicit block_allocator(std::size_t capacity);

  /// The offset of a free block of at least `size` bytes, or nothing when none is large
  /// enough (a size past the capacity, up to SIZE_MAX, is simply too large). `size` is
  /// rounded up to the alignment.
  [[nodiscard]] std::optional<std::size_t> allocate(std::size_t size);
  /// Returns the block allocate() gave for `size` at `offset`.
  void release(std::size_t offset, std::size_t size);

  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  [[nodiscard]] std::size_t used() const noexcept { return used_; }
  [[nodiscard]] std::size_t largest_free() const noexcept;
  /// Bytes of free blocks whose pages may still be resident (blocks allocated once and
  /// released since, not yet taken by take_resident_free()).
  [[nodiscard]] std::size_t resident_free() const noexcept { return resident_free_bytes_; }
  /// The free ranges counted in resident_free(), as (offset, size), counted no more: the
  /// caller punches them out of the segment.
  [[nodiscard]] std::vector<std::pair<std::size_t, std::size_t>> take_resident_free();
  /// `n` rounded up to the alignment; nothing when that does not fit in a size_t.
  [[nodiscard]] static std::optional<std::size_t> round_up(std::size_t n) noexcept {
    std::size_t padded = 0;
    if (__builtin_add_overflow(n, alignment - 1, &padded)) return std::nullopt;
    return padded / alignment * alignment;
  }

private:
  void insert_free(std::size_t offset, std::size_t size);
  void erase_free(std::map<std::size_t, std::size_t>::iterator it);
  /// [offset, offset + size) is in use (again): no longer counted as resident free.
  void forget_resident(std::size_t offset, std::size_t size);
  /// A released block: its pages are resident and free.
  void add_resident(std::size_t offset, std::size_t size);

  std::size_t capacity_;
  std::size_t used_ = 0;
  /// Free blocks by offset (for merging) and by (size, offset) (for best fit).
  std::map<std::size_t, std::size_t> by_offset_;
  std::set<std::pair<std::size_t, std::size_t>> by_size_;
  /// Free ranges that were allocated before (resident), by offset, merged; a subset of the
  /// free blocks.
  std::map<std::size_t, std::size_t> resident_;
  std::size_t resident_free_bytes_ = 0;
};

} // namespace celer::store
