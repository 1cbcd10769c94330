#include <celer/store/shm_arena.hpp>

#include <cerrno>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <iterator>

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace celer::store {

namespace {

error os_error(const std::string& what) {
  return error(errno == ENOMEM || errno == ENOSPC ? error_code::resource_exhausted
                                                  : error_code::unavailable,
               what + ": " + std::strerror(errno));
}

expected<std::byte*> map(int fd, std::size_t capacity, bool writable = true) {
  void* p = ::mmap(nullptr, capacity, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return os_error("mapping " + std::to_string(capacity) + " bytes of shared memory");
  return static_cast<std::byte*>(p);
}

} // namespace

shm_segment::~shm_segment() {
  if (base_ != nullptr) ::munmap(base_, capacity_);
  if (fd_ >= 0) ::close(fd_);
}

shm_segment::shm_segment(shm_segment&& other) noexcept { *this = std::move(other); }

shm_segment& shm_segment::operator=(shm_segment&& other) noexcept {
  if (this != &other) {
    if (base_ != nullptr) ::munmap(base_, capacity_);
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    base_ = std::exchange(other.base_, nullptr);
    capacity_ = std::exchange(other.capacity_, 0);
    path_ = std::move(other.path_);
    read_only_ = std::exchange(other.read_only_, false);
    writable_fd_ = std::exchange(other.writable_fd_, false);
  }
  return *this;
}

writable_view::~writable_view() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
}

writable_view::writable_view(writable_view&& other) noexcept { *this = std::move(other); }

writable_view& writable_view::operator=(writable_view&& other) noexcept {
  if (this != &other) {
    if (map_ != nullptr) ::munmap(map_, map_size_);
    map_ = std::exchange(other.map_, nullptr);
    map_size_ = std::exchange(other.map_size_, 0);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

expected<shm_segment> shm_segment::create(std::size_t capacity, const char* name) {
  if (capacity == 0) return error(error_code::invalid_argument, "an object store needs a capacity above zero");
  shm_segment s;
  // Close-on-exec: processes on the node get it handed over, not by inheritance.
  s.fd_ = ::memfd_create(name, MFD_CLOEXEC);
  if (s.fd_ < 0) return os_error("creating the object store's shared memory");
  if (::ftruncate(s.fd_, static_cast<off_t>(capacity)) != 0) {
    return os_error("sizing the object store's shared memory to " + std::to_string(capacity) + " bytes");
  }
  auto base = map(s.fd_, capacity);
  if (!base) return base.error();
  s.base_ = *base;
  s.capacity_ = capacity;
  s.path_ = "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(s.fd_);
  s.writable_fd_ = true;
  return s;
}

expected<shm_segment> shm_segment::adopt(int fd, std::size_t capacity, shm_access access) {
  shm_segment s;
  s.fd_ = fd;  // closed by `s` on every return below
  if (fd < 0) return error(error_code::invalid_argument, "no shared memory fd to map");
  if (capacity == 0) {
    return error(error_code::invalid_argument, "the shared memory handed over has no capacity");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) return os_error("reading the size of the shared memory handed over");
  if (st.st_size < 0 || static_cast<std::uint64_t>(st.st_size) < capacity) {
    return error(error_code::invalid_argument,
                 "the shared memory handed over holds " + std::to_string(st.st_size) +
                   " bytes, not the " + std::to_string(capacity) + " it was announced with");
  }
  const int flags = ::fcntl(fd, F_GETFL);
  s.writable_fd_ = flags >= 0 && (flags & O_ACCMODE) == O_RDWR;
  s.read_only_ = access == shm_access::read_only;
  if (!s.read_only_ && !s.writable_fd_) {
    return error(error_code::permission_denied,
                 "the shared memory handed over is read-only; it cannot be mapped to write");
  }
  auto base = map(fd, capacity, !s.read_only_);
  if (!base) return base.error();
  s.base_ = *base;
  s.capacity_ = capacity;
  return s;
}

void shm_segment::punch(std::size_t offset, std::size_t size) const noexcept {
  if (fd_ < 0 || offset >= capacity_) return;
  size = std::min(size, capacity_ - offset);
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t first = (offset + page - 1) / page * page;
  const std::size_t end = (offset + size) / page * page;
  if (end <= first) return;
  // Whole pages only: a partial page may hold the first or last bytes of a live object.
  // A failure (a kernel without hole punching on memfds) leaves the pages resident.
  (void)::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(first),
                    static_cast<off_t>(end - first));
}

std::size_t shm_segment::resident_bytes() const noexcept {
  struct stat st {};
  if (fd_ < 0 || ::fstat(fd_, &st) != 0) return 0;
  return static_cast<std::size_t>(st.st_blocks) * 512;
}

expected<shm_segment> shm_segment::open(const std::string& path, std::size_t capacity,
                                       shm_access access) {
  if (capacity == 0) {
    return error(error_code::invalid_argument, "the object store at " + path + " has no capacity");
  }
  shm_segment s;
  s.read_only_ = access == shm_access::read_only;
  // A read-only fd too: a mapping of it can never be made writable (mprotect says EACCES).
  s.fd_ = ::open(path.c_str(), (s.read_only_ ? O_RDONLY : O_RDWR) | O_CLOEXEC);
  if (s.fd_ < 0) return os_error("opening the node's object store at " + path);
  struct stat st {};
  if (::fstat(s.fd_, &st) != 0) return os_error("reading the size of the object store at " + path);
  if (st.st_size < 0 || static_cast<std::uint64_t>(st.st_size) < capacity) {
    return error(error_code::invalid_argument,
                 "the object store at " + path + " holds " + std::to_string(st.st_size) +
                   " bytes, not the " + std::to_string(capacity) + " it was announced with");
  }
  auto base = map(s.fd_, capacity, !s.read_only_);
  if (!base) return base.error();
  s.base_ = *base;
  s.capacity_ = capacity;
  s.path_ = path;
  return s;
}

expected<writable_view> shm_segment::map_writable(std::size_t offset, std::size_t size) const {
  if (base_ == nullptr || offset > capacity_ || size > capacity_ - offset) {  // cannot wrap
    return error(error_code::invalid_argument,
                 std::to_string(size) + " bytes at " + std::to_string(offset) +
                   " are not inside the object store's " + std::to_string(capacity_) + " bytes");
  }
  writable_view v;
  if (size == 0) return v;
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t first = offset / page * page;
  // Rounding up cannot wrap: offset + size <= capacity, itself a size mmap accepted.
  const std::size_t end = std::min((offset + size + page - 1) / page * page, capacity_);
  int fd = fd_;
  if (read_only_ && !writable_fd_) {
    // This process's own fd is read-only; the writer opens the segment again to write.
    fd = ::open(path_.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return os_error("opening the node's object store at " + path_ + " to write");
  }
  void* p = ::mmap(nullptr, end - first, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                   static_cast<off_t>(first));
  const int saved = errno;
  if (fd != fd_) ::close(fd);  // the mapping keeps the memory; the fd is not needed
  if (p == MAP_FAILED) {
    errno = saved;
    return os_error("mapping " + std::to_string(size) + " bytes of the object store to write");
  }
  v.map_ = p;
  v.map_size_ = end - first;
  v.data_ = static_cast<std::byte*>(p) + (offset - first);
  v.size_ = size;
  return v;
}

block_allocator::block_allocator(std::size_t capacity) : capacity_(capacity / alignment * alignment) {
  if (capacity_ > 0) insert_free(0, capacity_);
}

void block_allocator::insert_free(std::size_t offset, std::size_t size) {
  by_offset_.emplace(offset, size);
  by_size_.emplace(size, offset);
}

void block_allocator::erase_free(std::map<std::size_t, std::size_t>::iterator it) {
  by_size_.erase({it->second, it->first});
  by_offset_.erase(it);
}

std::optional<std::size_t> block_allocator::allocate(std::size_t size) {
  const auto rounded = round_up(std::max<std::size_t>(size, 1));
  if (!rounded || *rounded > capacity_) return std::nullopt;
  size = *rounded;
  auto fit = by_size_.lower_bound({size, 0});
  if (fit == by_size_.end()) return std::nullopt;
  const auto [block, offset] = *fit;
  erase_free(by_offset_.find(offset));
  if (block > size) insert_free(offset + size, block - size);
  used_ += size;
  forget_resident(offset, size);
  return offset;
}

void block_allocator::forget_resident(std::size_t offset, std::size_t size) {
  if (resident_.empty()) return;
  const std::size_t end = offset + size;
  auto it = resident_.upper_bound(offset);
  if (it != resident_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second > offset) it = prev;
  }
  while (it != resident_.end() && it->first < end) {
    const std::size_t from = it->first, to = it->first + it->second;
    it = resident_.erase(it);
    resident_free_bytes_ -= to - from;
    if (from < offset) {
      resident_.emplace(from, offset - from);
      resident_free_bytes_ += offset - from;
    }
    if (to > end) {
      it = resident_.emplace(end, to - end).first;
      resident_free_bytes_ += to - end;
      break;
    }
  }
}

void block_allocator::add_resident(std::size_t offset, std::size_t size) {
  // The block was allocated, so no resident free range overlaps it; merged with its
  // neighbours.
  resident_free_bytes_ += size;
  auto next = resident_.lower_bound(offset);
  if (next != resident_.end() && next->first == offset + size) {
    size += next->second;
    next = resident_.erase(next);
  }
  if (next != resident_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += size;
      return;
    }
  }
  resident_.emplace(offset, size);
}

std::vector<std::pair<std::size_t, std::size_t>> block_allocator::take_resident_free() {
  std::vector<std::pair<std::size_t, std::size_t>> out(resident_.begin(), resident_.end());
  resident_.clear();
  resident_free_bytes_ = 0;
  return out;
}

void block_allocator::release(std::size_t offset, std::size_t size) {
  // Only sizes allocate() accepted come back here, and those round up without overflow.
  size = *round_up(std::max<std::size_t>(size, 1));
  used_ -= size;
  add_resident(offset, size);
  auto next = by_offset_.lower_bound(offset);
  if (next != by_offset_.end() && offset + size == next->first) {
    size += next->second;
    erase_free(next);
  }
  auto prev = by_offset_.lower_bound(offset);
  if (prev != by_offset_.begin()) {
    --prev;
    if (prev->first + prev->second == offset) {
      offset = prev->first;
      size += prev->second;
      erase_free(prev);
    }
  }
  insert_free(offset, size);
}

std::size_t block_allocator::largest_free() const noexcept {
  return by_size_.empty() ? 0 : by_size_.rbegin()->first;
}

} // namespace celer::store
