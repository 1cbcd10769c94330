// The buffered, append-only file under the metrics writers (buffered_file.hpp).
#include "buffered_file.hpp"

#include "io_error.hpp"  // actors/common

#include <cerrno>
#include <fcntl.h>
#include <system_error>
#include <unistd.h>

namespace celer::trainer::detail {

error io_error(int err, std::string_view what, const std::string& path) {
  return actors::detail::io_error(err, what, path);
}

std::chrono::system_clock::time_point now(const wall_clock& clock) {
  return clock ? clock() : std::chrono::system_clock::now();
}

expected<void> check_policy(const flush_policy& policy, std::string_view who) {
  if (policy.every_records == 0) {
    return error(error_code::invalid_argument,
                 std::string(who) + ": flush.every_records must be at least 1");
  }
  if (policy.every.count() < 0) {
    return error(error_code::invalid_argument, std::string(who) + ": flush.every is negative");
  }
  return {};
}

expected<void> check_tag(std::string_view tag) {
  if (tag.empty()) return error(error_code::invalid_argument, "a metric's tag is empty");
  // UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing past U+10FFFF.
  const auto bad = [&] {
    return error(error_code::invalid_argument, "the tag \"" + std::string(tag) +
                                                 "\" is not valid UTF-8");
  };
  for (std::size_t i = 0; i < tag.size();) {
    const auto c = static_cast<unsigned char>(tag[i]);
    std::size_t len = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return bad();
    }
    if (i + len > tag.size()) return bad();
    for (std::size_t j = 1; j < len; ++j) {
      const auto cc = static_cast<unsigned char>(tag[i + j]);
      if ((cc & 0xC0) != 0x80) return bad();
      cp = (cp << 6) | (cc & 0x3F);
    }
    const std::uint32_t min_cp = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
    if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return bad();
    i += len;
  }
  return {};
}

buffered_file::~buffered_file() {
  if (fd_ >= 0) ::close(fd_);
}

expected<void> buffered_file::open(const std::string& path, int flags, int& err) {
  path_ = path;
  fd_ = ::open(path.c_str(), flags | O_WRONLY | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    err = errno;
    return io_error(err, "opening", path);
  }
  err = 0;
  last_write_ = now();
  return {};
}

expected<void> buffered_file::usable() const {
  if (broken_) {
    return error(error_code::failed_precondition,
                 path_ + " failed earlier and takes no more records: " + broken_->message());
  }
  if (closed_ || fd_ < 0) return error(error_code::failed_precondition, path_ + " is closed");
  return {};
}

expected<void> buffered_file::append(std::string_view bytes) {
  if (auto ok = usable(); !ok) return ok;
  buffer_.append(bytes);
  ++buffered_records_;
  const auto t = now();
  // A clock that went back (a wall clock reset) flushes too, rather than wait for it.
  if (buffered_records_ >= policy_.every_records || t - last_write_ >= policy_.every ||
      t < last_write_) {
    return flush();
  }
  return {};
}

expected<void> buffered_file::flush() {
  if (auto ok = usable(); !ok) return ok;
  std::size_t done = 0;
  while (done < buffer_.size()) {
    const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // What was written stays (a reader sees a truncated last record, which it skips);
      // what was not is dropped with the writer.
      broken_ = io_error(n < 0 ? errno : ENOSPC, "writing", path_);
      buffer_.clear();
      return *broken_;
    }
    done += static_cast<std::size_t>(n);
  }
  buffer_.clear();
  buffered_records_ = 0;
  last_write_ = now();
  return {};
}

expected<void> buffered_file::close() {
  if (closed_ || fd_ < 0) return {};
  expected<void> flushed = broken_ ? expected<void>(*broken_) : flush();
  closed_ = true;
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0 && flushed) return io_error(errno, "closing", path_);
  return flushed;
}

} // namespace celer::trainer::detail
