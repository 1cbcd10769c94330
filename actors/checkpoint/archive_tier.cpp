// The archive tier: a directory, local or mounted.
//   FORMAT                         "celer-checkpoint/1"
//   LOCK                           flock()ed by the one writer
//   chunks/<k0k1>/<key>            a chunk's bytes, under the first two hex digits of its key
//   manifests/<id, 20 digits>.json a manifest
// Every file is written to "<name>.tmp", fsynced and renamed, so a name always holds a
// whole file; the folders are fsynced before the manifest that needs their chunks is
// renamed into place. A crash leaves at most *.tmp files, removed when a writer opens.
#include "tier.hpp"
#include "io_error.hpp"  // actors/common

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <system_error>
#include <filesystem>
#include <set>
#include <unordered_set>

#include "manifest.hpp"

namespace celer::checkpoint::detail {
namespace {

namespace fs = std::filesystem;

error io_error(int err, const std::string& what, const fs::path& path) {
  return actors::detail::io_error(err, what, path.string());
}

/// Closes a descriptor when it goes.
struct fd_guard {
  int fd = -1;
  explicit fd_guard(int f) : fd(f) {}
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
  fd_guard(const fd_guard&) = delete;
  fd_guard& operator=(const fd_guard&) = delete;
};

expected<void> fsync_dir(const fs::path& dir) {
  fd_guard fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.fd < 0 || ::fsync(fd.fd) != 0) return io_error(errno, "syncing the folder", dir);
  return {};
}

/// Writes `bytes` to `path` whole: to "<path>.tmp", synced, then renamed.
expected<void> write_whole(const fs::path& path, std::string_view bytes) {
  const fs::path tmp = path.string() + ".tmp";
  {
    fd_guard fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (fd.fd < 0) return io_error(errno, "creating", tmp);
    std::size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::write(fd.fd, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int err = n < 0 ? errno : ENOSPC;
        ::unlink(tmp.c_str());
        return io_error(err, "writing", tmp);
      }
      done += static_cast<std::size_t>(n);
    }
    if (::fdatasync(fd.fd) != 0) {
      const int err = errno;
      ::unlink(tmp.c_str());
      return io_error(err, "syncing", tmp);
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return io_error(err, "renaming into place", path);
  }
  return {};
}

expected<std::optional<std::string>> read_whole(const fs::path& path) {
  fd_guard fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.fd < 0) {
    if (errno == ENOENT) return std::optional<std::string>();
    return error(error_code::data_loss, "reading " + path.string() + ": " + std::error_code(errno, std::generic_category()).message());
  }
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) {
    return error(error_code::data_loss, "reading " + path.string() + ": " + std::error_code(errno, std::generic_category()).message());
  }
  // Read straight into a string of the file's size; a file that grows or shrinks meanwhile
  // is read as far as it goes (the hash check then judges it).
  std::string out(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::read(fd.fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return error(error_code::data_loss, "reading " + path.string() + ": " + std::error_code(errno, std::generic_category()).message());
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  out.resize(done);
  return std::optional<std::string>(std::move(out));
}

bool parse_id(std::string_view name, std::uint64_t& id) {
  if (name.size() != 25 || !name.ends_with(".json")) return false;
  auto [end, ec] = std::from_chars(name.data(), name.data() + 20, id);
  return ec == std::errc() && end == name.data() + 20;
}

class archive_tier final : public tier {
public:
  explicit archive_tier(fs::path root) : root_(std::move(root)), dir_(root_.string()) {}
  ~archive_tier() override {
    if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
  }
  archive_tier(const archive_tier&) = delete;
  archive_tier& operator=(const archive_tier&) = delete;

  /// For a writer: the folders, the lock, stale temporaries gone, the index of chunks.
  expected<void> prepare_for_writing() {
    std::error_code ec;
    for (const auto& d : {root_, root_ / "chunks", root_ / "manifests"}) {
      fs::create_directories(d, ec);
      if (ec) return io_error(ec.value(), "creating the archive folder", d);
    }
    lock_fd_ = ::open((root_ / "LOCK").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock_fd_ < 0) return io_error(errno, "opening", root_ / "LOCK");
    if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
      return error(error_code::unavailable,
                   "another checkpoint writer holds the archive " + dir_ + " (its LOCK file)");
    }
    if (!fs::exists(root_ / "FORMAT", ec)) {
      if (auto ok = write_whole(root_ / "FORMAT", std::string(format_name) + "\n"); !ok) return ok;
    }
    for (const auto& e : fs::recursive_directory_iterator(root_, ec)) {
      const auto name = e.path().filename().string();
      if (name.ends_with(".tmp")) {
        fs::remove(e.path(), ec);
      } else if (e.is_regular_file() && e.path().parent_path().parent_path() == root_ / "chunks") {
        index_.insert(name);
      }
    }
    if (ec) return io_error(ec.value(), "listing", root_);
    return {};
  }

  std::string_view kind() const noexcept override { return "archive"; }
  const std::string& dir() const noexcept override { return dir_; }

  bool has_chunk(const std::string& key) const override { return index_.contains(key); }

  expected<std::uint64_t> put_chunks(const std::vector<chunk_write>& chunks) override {
    std::uint64_t bytes = 0;
    for (const auto& c : chunks) {
      const fs::path folder = root_ / "chunks" / c.key.substr(0, 2);
      if (!made_.contains(folder.string())) {
        std::error_code ec;
        fs::create_directories(folder, ec);
        if (ec) return io_error(ec.value(), "creating the archive folder", folder);
        made_.insert(folder.string());
      }
      if (auto ok = write_whole(folder / c.key, c.bytes); !ok) return ok.error();
      touched_.insert(folder.string());
      index_.insert(c.key);
      bytes += c.bytes.size();
    }
    return bytes;
  }

  expected<void> put_manifest(std::uint64_t id, const std::string& text) override {
    // The new chunks' names first, then the manifest that refers to them.
    for (const auto& d : touched_) {
      if (auto ok = fsync_dir(d); !ok) return ok;
    }
    if (!touched_.empty()) {
      if (auto ok = fsync_dir(root_ / "chunks"); !ok) return ok;
    }
    touched_.clear();
    const fs::path path = root_ / "manifests" / (manifest_name(id) + ".json");
    if (auto ok = write_whole(path, text); !ok) return ok;
    return fsync_dir(root_ / "manifests");
  }

  expected<void> remove(const std::vector<std::uint64_t>& manifests,
                        const std::vector<std::string>& chunks) override {
    for (auto id : manifests) {
      const fs::path path = root_ / "manifests" / (manifest_name(id) + ".json");
      if (::unlink(path.c_str()) != 0 && errno != ENOENT) return io_error(errno, "removing", path);
    }
    // The manifests are gone for good before any chunk they named goes.
    if (!manifests.empty()) {
      if (auto ok = fsync_dir(root_ / "manifests"); !ok) return ok;
    }
    for (const auto& k : chunks) {
      const fs::path path = root_ / "chunks" / k.substr(0, 2) / k;
      if (::unlink(path.c_str()) != 0 && errno != ENOENT) return io_error(errno, "removing", path);
      index_.erase(k);
    }
    return {};
  }

  std::vector<std::string> chunk_keys() const override {
    return std::vector<std::string>(index_.begin(), index_.end());
  }

  expected<std::optional<std::string>> get_chunk(const std::string& key) const override {
    if (key.size() < 2) return std::optional<std::string>();
    return read_whole(root_ / "chunks" / key.substr(0, 2) / key);
  }

  expected<std::vector<std::uint64_t>> manifest_ids() const override {
    std::set<std::uint64_t> ids;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(root_ / "manifests", ec)) {
      std::uint64_t id = 0;
      if (parse_id(e.path().filename().string(), id)) ids.insert(id);
    }
    if (ec && ec != std::errc::no_such_file_or_directory) {
      return error(error_code::data_loss, "listing " + (root_ / "manifests").string() + ": " +
                                            ec.message());
    }
    return std::vector<std::uint64_t>(ids.begin(), ids.end());
  }

  expected<std::optional<std::string>> get_manifest(std::uint64_t id) const override {
    return read_whole(root_ / "manifests" / (manifest_name(id) + ".json"));
  }

private:
  fs::path root_;
  std::string dir_;
  int lock_fd_ = -1;
  std::unordered_set<std::string> index_;
  /// Chunk folders made by this handle, and those holding chunks not yet covered by a
  /// synced manifest.
  std::unordered_set<std::string> made_;
  std::set<std::string> touched_;
};

} // namespace

expected<std::unique_ptr<tier>> open_archive_tier(const std::string& dir, bool read_only) {
  auto t = std::make_unique<archive_tier>(fs::path(dir));
  if (read_only) {
    std::error_code ec;
    if (!fs::is_directory(fs::path(dir) / "manifests", ec)) {
      return error(error_code::not_found, "no checkpoint archive at " + dir);
    }
  } else if (auto ok = t->prepare_for_writing(); !ok) {
    return ok.error();
  }
  return std::unique_ptr<tier>(std::move(t));
}

} // namespace celer::checkpoint::detail
