#include <celer/store/shm_arena.hpp>

#include <cerrno>
#include <cstdint>
#include <algorithm>
#include <cstring>

#include <fcntl.h>
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

expected<shm_segment> shm_segment::create(std::size_t capacity) {
  if (capacity == 0) return error(error_code::invalid_argument, "an object store needs a capacity above zero");
  shm_segment s;
  // Close-on-exec: processes on the node open it by path, not by inheritance.
  s.fd_ = ::memfd_create("celer-object-store", MFD_CLOEXEC);
  if (s.fd_ < 0) return os_error("creating the object store's shared memory");
  if (::ftruncate(s.fd_, static_cast<off_t>(capacity)) != 0) {
    return os_error("sizing the object store's shared memory to " + std::to_string(capacity) + " bytes");
  }
  auto base = map(s.fd_, capacity);
  if (!base) return base.error();
  s.base_ = *base;
  s.capacity_ = capacity;
  s.path_ = "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(s.fd_);
  return s;
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
  if (read_only_) {
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
  return offset;
}

void block_allocator::release(std::size_t offset, std::size_t size) {
  // Only sizes allocate() accepted come back here, and those round up without overflow.
  size = *round_up(std::max<std::size_t>(size, 1));
  used_ -= size;
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
