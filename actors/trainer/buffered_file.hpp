#pragma once
// A file that metrics writers append to through a memory buffer, written out under a
// flush_policy (metrics_log.hpp). Internal to celer::actors.

#include <celer/actors/trainer/metrics_log.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace celer::trainer::detail {

/// An I/O failure as the disk reports it: permission_denied, resource_exhausted for a full
/// disk, otherwise unavailable; the message names what was done and the path.
error io_error(int err, std::string_view what, const std::string& path);

/// The current time of `clock`, or of the system clock when it is empty.
std::chrono::system_clock::time_point now(const wall_clock& clock);

/// invalid_argument unless `policy` flushes after at least one record and a duration >= 0.
expected<void> check_policy(const flush_policy& policy, std::string_view who);

/// invalid_argument unless `tag` is a non-empty, valid UTF-8 string.
expected<void> check_tag(std::string_view tag);

/// One open file, its buffer and its flush policy. Owned by one writer (one thread).
class buffered_file {
public:
  buffered_file(flush_policy policy, wall_clock clock)
    : policy_(policy), clock_(std::move(clock)) {}
  buffered_file(const buffered_file&) = delete;
  buffered_file& operator=(const buffered_file&) = delete;
  ~buffered_file();

  /// Opens `path` with open(2)'s `flags` (O_WRONLY | O_CLOEXEC are added). The errno of a
  /// failure is returned in `err` as well, so a caller can try another name on EEXIST.
  expected<void> open(const std::string& path, int flags, int& err);
  /// Buffers `bytes` (one record) and writes the buffer out if the policy says so.
  expected<void> append(std::string_view bytes);
  expected<void> flush();
  /// Flushes and closes; closing a closed file is fine.
  expected<void> close();

  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  [[nodiscard]] std::chrono::system_clock::time_point now() const { return detail::now(clock_); }

private:
  /// failed_precondition when closed or broken by an earlier error.
  expected<void> usable() const;
  flush_policy policy_;
  wall_clock clock_;
  std::string path_;
  int fd_ = -1;
  bool closed_ = false;
  std::string buffer_;
  std::size_t buffered_records_ = 0;
  std::chrono::system_clock::time_point last_write_;
  /// The first write error; every later call reports it.
  std::optional<error> broken_;
};

} // namespace celer::trainer::detail
