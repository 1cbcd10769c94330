#include "spill_file.hpp"

#include <celer/store/checksum.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace celer::store {

namespace {

/// A failed system call on a file: a full disk (or quota) is resource_exhausted and says
/// so; anything else is unavailable.
error file_error(int err, const std::string& what) {
  const bool full = err == ENOSPC || err == EDQUOT;
  return error(full ? error_code::resource_exhausted : error_code::unavailable,
               what + ": " + (full ? "the disk is full (" + std::string(std::strerror(err)) + ")"
                                   : std::string(std::strerror(err))));
}

/// Closes a descriptor when it goes out of scope (unless released first).
struct fd_guard {
  int fd = -1;
  ~fd_guard() {
    if (fd >= 0) (void)::close(fd);
  }
  int release() { return std::exchange(fd, -1); }
};

/// Reserves `size` bytes for the file, so that a full disk shows now rather than as a short
/// write later (or, on a file system that allocates at writeback, not at all). A file
/// system that cannot reserve (EOPNOTSUPP) leaves it to write(), which still reports a
/// full disk on the file systems the store runs on (ext4, xfs, tmpfs).
int reserve(int fd, std::size_t size) {
  if (size == 0) return 0;
  for (;;) {
    if (::fallocate(fd, 0, 0, static_cast<off_t>(size)) == 0) return 0;
    if (errno == EINTR) continue;
    if (errno == EOPNOTSUPP || errno == ENOSYS) return 0;
    return errno;
  }
}

/// Writes all `n` bytes (write() may write fewer, or be interrupted); 0 or the errno.
int write_all(int fd, const std::byte* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (w == 0) return EIO;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return 0;
}

} // namespace

expected<std::uint64_t> write_object_file(int dir_fd, const std::string& name,
                                          const std::byte* data, std::size_t size, bool sync) {
  fd_guard f{::openat(dir_fd, name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)};
  if (f.fd < 0) return file_error(errno, "creating file " + name);
  auto fail = [&](int err, const std::string& what) -> error {
    (void)::close(f.release());
    (void)::unlinkat(dir_fd, name.c_str(), 0);
    return file_error(err, what + " file " + name);
  };
  if (const int err = reserve(f.fd, size); err != 0) {
    return fail(err, "reserving " + std::to_string(size) + " bytes for");
  }
  running_checksum sum;
  for (std::size_t off = 0; off < size; off += file_piece_bytes) {
    const std::size_t n = std::min(file_piece_bytes, size - off);
    sum.update(data + off, n);  // then write() copies the piece from the cache
    if (const int err = write_all(f.fd, data + off, n); err != 0) return fail(err, "writing");
  }
  if (sync && ::fdatasync(f.fd) != 0) return fail(errno, "syncing");
  if (::close(f.release()) != 0) {
    const int err = errno;
    (void)::unlinkat(dir_fd, name.c_str(), 0);
    return file_error(err, "closing file " + name);
  }
  return sum.digest();
}

expected<void> read_object_file(int dir_fd, const std::string& name, std::byte* out,
                                std::size_t size, std::uint64_t checksum,
                                const std::string& what) {
  fd_guard f{::openat(dir_fd, name.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) {
    const int err = errno;
    return error(error_code::data_loss,
                 what + ": its file on disk (" + name + ") " +
                   (err == ENOENT ? std::string("is missing") : "cannot be opened (" +
                                                                  std::string(std::strerror(err)) + ")"));
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0 || static_cast<std::uint64_t>(st.st_size) != size) {
    return error(error_code::data_loss,
                 what + ": its file on disk (" + name + ") holds " + std::to_string(st.st_size) +
                   " bytes, not " + std::to_string(size) + " (torn or truncated)");
  }
  // The whole file is wanted, in order: read ahead of it all (a no-op for pages still in
  // the page cache, as a recent spill's are).
  (void)::posix_fadvise(f.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  (void)::posix_fadvise(f.fd, 0, 0, POSIX_FADV_WILLNEED);
  running_checksum sum;
  for (std::size_t off = 0; off < size;) {
    const std::size_t n = std::min(file_piece_bytes, size - off);
    const ssize_t r = ::read(f.fd, out + off, n);  // straight into the object's block
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      return error(error_code::data_loss,
                   what + ": its file on disk (" + name + ") " +
                     (r == 0 ? "ended after " + std::to_string(off) + " of " +
                                 std::to_string(size) + " bytes"
                             : "cannot be read (" + std::string(std::strerror(errno)) + ")"));
    }
    sum.update(out + off, static_cast<std::size_t>(r));  // while the piece is in the cache
    off += static_cast<std::size_t>(r);
  }
  if (sum.digest() != checksum) {
    return error(error_code::data_loss,
                 what + ": its copy on disk is corrupt (checksum mismatch)");
  }
  return {};
}

} // namespace celer::store
