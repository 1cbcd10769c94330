// A job's working directory as one archive (package.hpp).
#include "jobs/package.hpp"

#include <sodium.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <set>
#include <unordered_map>
#include <utility>

namespace celer::jobs {
namespace {

namespace fs = std::filesystem;

enum class entry_kind : std::uint8_t { end = 0, file = 1, folder = 2, link = 3 };

constexpr std::size_t checksum_bytes = 32;
constexpr std::size_t digest_bytes = 16;
/// The smallest package: the magic, the end entry and the checksum.
constexpr std::size_t smallest_package = package_magic.size() + 1 + checksum_bytes;
/// The bytes of a file's entry besides its path and contents: kind, mode, path length, size.
constexpr std::size_t entry_overhead = 1 + 4 + 2 + 8;
/// What the archive ends with after the last entry: the end entry and the checksum.
constexpr std::size_t trailer_bytes = 1 + checksum_bytes;
constexpr std::size_t max_path_bytes = 0xffff;
/// PATH_MAX less its NUL: the kernel follows no longer link target.
constexpr std::size_t max_link_target = 4095;
/// Random bytes in the name of the folder unpacked into before its rename.
constexpr std::size_t scratch_suffix_bytes = 8;

void init_sodium() {
  static std::once_flag once;
  std::call_once(once, [] {
    // A broken invariant, not an error to handle: the runtime cannot run without libsodium
    // (its credentials need it first).
    if (sodium_init() < 0) {
      std::fputs("celer: libsodium cannot initialise\n", stderr);
      std::abort();
    }
  });
}

std::array<unsigned char, checksum_bytes> checksum_of(std::string_view bytes) {
  std::array<unsigned char, checksum_bytes> sum{};
  crypto_generichash(sum.data(), sum.size(), reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(),
                     nullptr, 0);
  return sum;
}

void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void patch_le(std::string& out, std::size_t at, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out[at + static_cast<std::size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
}

/// A path or link target from the archive or the disk, fit for a message: quoted, bytes that
/// are not printable ASCII as \xNN, cut after 200 bytes.
std::string in_quotes(std::string_view s) {
  std::string out = "'";
  for (std::size_t i = 0; i < s.size() && i < 200; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  if (s.size() > 200) out += "...";
  return out + "'";
}

/// "104857600 bytes (100.0 MiB)".
std::string describe_size(std::uint64_t bytes) {
  char mib[32];
  std::snprintf(mib, sizeof mib, "%.1f", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return std::to_string(bytes) + " bytes (" + mib + " MiB)";
}

/// The code for a failed system call's errno; the message says what failed and where.
/// (`what` is a plain string so that building the arguments cannot touch errno first.)
error filesystem_error(const char* what, const fs::path& p, int err) {
  auto code = error_code::internal;
  if (err == EACCES || err == EPERM || err == EROFS) code = error_code::permission_denied;
  if (err == ENOSPC || err == EDQUOT || err == EFBIG) code = error_code::resource_exhausted;
  if (err == ENOENT) code = error_code::not_found;
  return error(code, std::string(what) + " " + in_quotes(p.native()) + ": " + std::strerror(err));
}

/// Closes its file descriptor when it goes.
class unique_fd {
public:
  explicit unique_fd(int fd) : fd_(fd) {}
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  [[nodiscard]] int get() const noexcept { return fd_; }
  /// Closes it now: close's result (0, or -1 with errno), which for a written file is the
  /// last word on whether the write reached the filesystem.
  int close() { return ::close(std::exchange(fd_, -1)); }

private:
  int fd_;
};

/// The folder part of a relative path ("" for one at the top).
std::string_view parent_of(std::string_view path) {
  const auto slash = path.rfind('/');
  return slash == std::string_view::npos ? std::string_view{} : path.substr(0, slash);
}

/// How many folders deep `folder` is: 0 for the top ("").
std::size_t depth_of(std::string_view folder) {
  return folder.empty() ? 0 : 1 + static_cast<std::size_t>(std::count(folder.begin(), folder.end(), '/'));
}

/// Why `path` cannot name an entry, or nullptr when it can: relative, '/'-separated, each
/// component neither empty nor "." nor "..", no NUL, at most 65535 bytes.
const char* bad_path(std::string_view path) {
  if (path.empty()) return "the path is empty";
  if (path.size() > max_path_bytes) return "the path is longer than 65535 bytes";
  if (path.front() == '/') return "the path is absolute";
  if (path.find('\0') != std::string_view::npos) return "the path holds a NUL byte";
  for (std::string_view rest = path;;) {
    const auto slash = rest.find('/');
    const auto part = rest.substr(0, slash);
    if (part.empty()) return "the path has an empty component (a doubled or trailing '/')";
    if (part == "." || part == "..") return "the path has a '.' or '..' component";
    if (slash == std::string_view::npos) return nullptr;
    rest.remove_prefix(slash + 1);
  }
}

/// Why the link at `link` may not point at `target`, or nullptr when it may.
///
/// A target is relative; it may climb ("..") only at its start, and no higher than the top
/// of the tree, then only descend. Checking a target lexically is not enough by itself:
/// "x" -> "a/up/.." leaves the tree when "a/up" -> "..", because the kernel climbs from
/// where a link leads, not from the link. This rule is sound without following other links:
/// a link's folder is a real folder (every entry's folder is a folder entry), so its leading
/// ".." climb through real folders, and from there the target only descends, through
/// folders or through links that, checked the same way, lead inside the tree.
const char* bad_link_target(std::string_view link, std::string_view target) {
  if (target.empty()) return "the target is empty";
  if (target.size() > max_link_target) return "the target is longer than 4095 bytes";
  if (target.find('\0') != std::string_view::npos) return "the target holds a NUL byte";
  if (target.front() == '/') return "the target is absolute";
  const auto room = depth_of(parent_of(link));
  std::size_t climbed = 0;
  bool descended = false;
  for (std::string_view rest = target;;) {
    const auto slash = rest.find('/');
    const auto part = rest.substr(0, slash);
    if (part == "..") {
      if (descended) return "the target climbs ('..') after descending: only a leading '..' is allowed";
      if (++climbed > room) return "the target leads outside the tree";
    } else if (!part.empty() && part != ".") {
      descended = true;
    }
    if (slash == std::string_view::npos) return nullptr;
    rest.remove_prefix(slash + 1);
  }
}

struct entry {
  entry_kind kind = entry_kind::end;
  std::uint32_t mode = 0;
  std::string_view path;
  /// A file's contents or a link's target: bytes of the archive.
  std::string_view data;
};

struct decoded {
  std::vector<entry> entries;
  package_summary summary;
};

/// Reads the archive front to back; each read checks the bytes left first.
class reader {
public:
  explicit reader(std::string_view bytes) : rest_(bytes) {}
  [[nodiscard]] std::size_t left() const noexcept { return rest_.size(); }
  /// The next `n` bytes, or false (and nothing read) when fewer are left.
  bool bytes(std::uint64_t n, std::string_view& out) {
    if (n > rest_.size()) return false;
    out = rest_.substr(0, static_cast<std::size_t>(n));
    rest_.remove_prefix(static_cast<std::size_t>(n));
    return true;
  }
  /// A little-endian integer of `width` bytes, or false when fewer are left.
  bool integer(int width, std::uint64_t& out) {
    std::string_view b;
    if (!bytes(static_cast<std::uint64_t>(width), b)) return false;
    out = 0;
    for (int i = width - 1; i >= 0; --i) out = (out << 8) | static_cast<unsigned char>(b[static_cast<std::size_t>(i)]);
    return true;
  }

private:
  std::string_view rest_;
};

error malformed(std::size_t index, std::string_view path, const std::string& what) {
  return error(error_code::invalid_argument,
               "malformed package: entry " + std::to_string(index) +
                 (path.empty() ? std::string() : " (" + in_quotes(path) + ")") + ": " + what);
}

/// Checks all of the archive (magic, checksum, every entry) and gives its entries.
expected<decoded> decode(std::string_view archive) {
  init_sodium();
  // The magic's "CELERPK" names the format, its last byte the version.
  const auto family = package_magic.substr(0, package_magic.size() - 1);
  const auto head = std::min(archive.size(), family.size());
  if (archive.substr(0, head) != family.substr(0, head)) {
    return error(error_code::invalid_argument, "not a celer package: it does not start with \"CELERPK\"");
  }
  if (archive.size() >= package_magic.size() && archive[family.size()] != package_magic.back()) {
    return error(error_code::invalid_argument, "package format version " + in_quotes(archive.substr(family.size(), 1)) +
                                                 ": this build reads version '1'");
  }
  if (archive.size() < smallest_package) {
    return error(error_code::data_loss, "the package is truncated: " + std::to_string(archive.size()) +
                                          " bytes, and the smallest has " + std::to_string(smallest_package));
  }
  const auto body_end = archive.size() - checksum_bytes;
  const auto sum = checksum_of(archive.substr(0, body_end));
  if (sodium_memcmp(sum.data(), archive.data() + body_end, checksum_bytes) != 0) {
    return error(error_code::data_loss, "the package's checksum does not match: it is damaged or truncated (" +
                                          std::to_string(archive.size()) + " bytes)");
  }

  // The checksum holds, so what follows is what the packer wrote: a mistake from here on is
  // a package built wrongly (or by hand), not damage.
  decoded out;
  std::unordered_map<std::string_view, entry_kind> seen;
  reader r(archive.substr(package_magic.size(), body_end - package_magic.size()));
  for (std::size_t index = 0;; ++index) {
    std::uint64_t kind = 0, mode = 0, path_size = 0, size = 0;
    if (!r.integer(1, kind)) return malformed(index, {}, "the entries run into the checksum: there is no end entry");
    if (kind == static_cast<std::uint64_t>(entry_kind::end)) {
      if (r.left() != 0) return malformed(index, {}, std::to_string(r.left()) + " bytes follow the end entry");
      break;
    }
    if (kind > static_cast<std::uint64_t>(entry_kind::link)) {
      return malformed(index, {}, "unknown kind " + std::to_string(kind) + " (1 file, 2 folder, 3 link)");
    }
    std::string_view path, data;
    if (!r.integer(4, mode) || !r.integer(2, path_size)) return malformed(index, {}, "the entry is cut short");
    if (!r.bytes(path_size, path)) {
      return malformed(index, {}, "a path of " + std::to_string(path_size) + " bytes, but only " +
                                    std::to_string(r.left()) + " remain");
    }
    if (!r.integer(8, size)) return malformed(index, path, "the entry is cut short");
    if (!r.bytes(size, data)) {
      return malformed(index, path, "a size of " + std::to_string(size) + " bytes, but only " +
                                      std::to_string(r.left()) + " remain");
    }
    if (const char* why = bad_path(path)) return malformed(index, path, why);
    if ((mode & ~std::uint64_t{0777}) != 0) {
      char octal[24];
      std::snprintf(octal, sizeof octal, "%llo", static_cast<unsigned long long>(mode));
      return malformed(index, path, std::string("mode 0") + octal + " has bits beyond 0777");
    }
    if (seen.contains(path)) return malformed(index, path, "the path appears twice");
    const auto folder = parent_of(path);
    if (!folder.empty()) {
      const auto it = seen.find(folder);
      if (it == seen.end()) {
        return malformed(index, path, "its folder " + in_quotes(folder) + " has no earlier folder entry");
      }
      if (it->second != entry_kind::folder) {
        return malformed(index, path, "it lies under " + in_quotes(folder) + ", which is not a folder but a " +
                                        (it->second == entry_kind::link ? "link" : "file"));
      }
    }
    const auto k = static_cast<entry_kind>(kind);
    switch (k) {
      case entry_kind::file:
        ++out.summary.files;
        out.summary.bytes += size;
        break;
      case entry_kind::folder:
        if (size != 0) return malformed(index, path, "a folder with a size of " + std::to_string(size));
        ++out.summary.folders;
        break;
      case entry_kind::link:
        if (const char* why = bad_link_target(path, data)) {
          return malformed(index, path, "a link to " + in_quotes(data) + ": " + why);
        }
        ++out.summary.links;
        break;
      case entry_kind::end:
        break;
    }
    seen.emplace(path, k);
    out.entries.push_back({k, static_cast<std::uint32_t>(mode), path, data});
  }
  return out;
}

/// A folder of the tree being packed, or something in one.
struct item {
  std::string path;
  entry_kind kind = entry_kind::file;
  std::uint32_t mode = 0;
  std::string target;
  /// A file's size when it was listed (it is read later).
  std::uint64_t size = 0;
};

std::string_view type_name(mode_t m) {
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISFIFO(m)) return "a fifo";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  return "neither a file, a folder nor a link";
}

/// The tree under `root`, less `excluded`, in the archive's order: siblings sorted by name
/// (bytewise), each folder followed by what it holds. Links are checked here.
expected<std::vector<item>> list_tree(const fs::path& root, const std::set<std::string, std::less<>>& excluded) {
  std::vector<item> items;
  std::vector<std::string> unlisted;  // paths still to list, the next one last
  const auto add_children = [&](const std::string& folder) -> expected<void> {
    std::vector<std::string> names;
    std::error_code ec;
    for (fs::directory_iterator it(root / folder, ec), end; !ec && it != end; it.increment(ec)) {
      names.push_back(it->path().filename().native());
    }
    if (ec) return filesystem_error("cannot list", root / folder, ec.value());
    std::sort(names.begin(), names.end(), std::greater<>());
    for (auto& n : names) unlisted.push_back(folder.empty() ? std::move(n) : folder + "/" + n);
    return {};
  };
  if (auto r = add_children(""); !r) return r.error();

  while (!unlisted.empty()) {
    item it;
    it.path = std::move(unlisted.back());
    unlisted.pop_back();
    if (excluded.contains(it.path)) continue;
    const auto where = root / it.path;
    if (it.path.size() > max_path_bytes) {
      return error(error_code::invalid_argument,
                   in_quotes(it.path) + " is longer than 65535 bytes, the most a package holds");
    }
    struct stat st{};
    if (::lstat(where.c_str(), &st) != 0) return filesystem_error("cannot read", where, errno);
    it.mode = static_cast<std::uint32_t>(st.st_mode & 0777);
    if (S_ISREG(st.st_mode)) {
      it.kind = entry_kind::file;
      it.size = static_cast<std::uint64_t>(st.st_size);
    } else if (S_ISDIR(st.st_mode)) {
      it.kind = entry_kind::folder;
      if (auto r = add_children(it.path); !r) return r.error();
    } else if (S_ISLNK(st.st_mode)) {
      it.kind = entry_kind::link;
      it.mode = 0777;
      std::error_code ec;
      it.target = fs::read_symlink(where, ec).native();
      if (ec) return filesystem_error("cannot read the link", where, ec.value());
      if (const char* why = bad_link_target(it.path, it.target)) {
        return error(error_code::invalid_argument, in_quotes(it.path) + " is a symbolic link to " + in_quotes(it.target) +
                                                     ", which cannot be packed: " + why +
                                                     " (leave it out with --exclude)");
      }
    } else {
      return error(error_code::invalid_argument, in_quotes(it.path) + " is " + std::string(type_name(st.st_mode)) +
                                                   ": only files, folders and symbolic links can be packed "
                                                   "(leave it out with --exclude)");
    }
    items.push_back(std::move(it));
  }
  return items;
}

/// Appends the contents of the file at `p` to `out`, at most `room` + 1 bytes (one more than
/// fits, so that the caller sees it does not): how many were appended.
expected<std::uint64_t> append_file(std::string& out, const fs::path& p, std::uint64_t room) {
  // O_NONBLOCK: should the file have become a fifo since it was listed, open must not wait.
  unique_fd fd(::open(p.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) {
    if (errno == ELOOP) return error(error_code::invalid_argument, in_quotes(p.native()) + " changed while being packed");
    return filesystem_error("cannot read", p, errno);
  }
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0) return filesystem_error("cannot read", p, errno);
  if (!S_ISREG(st.st_mode)) {
    return error(error_code::invalid_argument, in_quotes(p.native()) + " changed while being packed");
  }
  std::uint64_t got = 0;
  while (got <= room) {
    const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(1 << 16, room + 1 - got));
    const auto at = out.size();
    out.resize(at + want);
    const auto n = ::read(fd.get(), out.data() + at, want);
    const int err = errno;
    out.resize(at + static_cast<std::size_t>(std::max<ssize_t>(n, 0)));
    if (n < 0 && err == EINTR) continue;
    if (n < 0) return filesystem_error("cannot read", p, err);
    if (n == 0) break;
    got += static_cast<std::uint64_t>(n);
  }
  return got;
}

/// A folder made to unpack into, removed with all it holds unless kept.
class scratch_folder {
public:
  explicit scratch_folder(fs::path p) : path_(std::move(p)) {}
  scratch_folder(const scratch_folder&) = delete;
  scratch_folder& operator=(const scratch_folder&) = delete;
  ~scratch_folder() {
    if (!kept_) {
      std::error_code ignored;  // best effort: there is no one left to tell
      fs::remove_all(path_, ignored);
    }
  }
  [[nodiscard]] const fs::path& path() const noexcept { return path_; }
  void keep() noexcept { kept_ = true; }

private:
  fs::path path_;
  bool kept_ = false;
};

expected<void> write_file(const fs::path& p, std::string_view contents, std::uint32_t mode) {
  unique_fd fd(::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, static_cast<mode_t>(mode)));
  if (fd.get() < 0) return filesystem_error("cannot create", p, errno);
  while (!contents.empty()) {
    const auto n = ::write(fd.get(), contents.data(), contents.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return filesystem_error("cannot write", p, errno);
    contents.remove_prefix(static_cast<std::size_t>(n));
  }
  if (fd.close() != 0) return filesystem_error("cannot write", p, errno);
  return {};
}

/// Renames the folder `from` to `to`, which must not exist (not even as an empty folder,
/// which a plain rename would replace).
expected<void> rename_new(const fs::path& from, const fs::path& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return {};
  const int err = errno;
  if (err == EEXIST) return error(error_code::already_exists, in_quotes(to.native()) + " appeared while unpacking");
  if (err != EINVAL && err != ENOSYS) return filesystem_error("cannot rename the unpacked folder to", to, err);
  // A filesystem without RENAME_NOREPLACE: check, then rename (a race left open there).
  struct stat st{};
  if (::lstat(to.c_str(), &st) == 0) {
    return error(error_code::already_exists, in_quotes(to.native()) + " appeared while unpacking");
  }
  if (::rename(from.c_str(), to.c_str()) != 0) return filesystem_error("cannot rename the unpacked folder to", to, errno);
  return {};
}

} // namespace

expected<std::string> pack_directory(const fs::path& dir, const pack_options& o) {
  init_sodium();
  struct stat st{};
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return error(error_code::not_found, "no folder " + in_quotes(dir.native()));
    return filesystem_error("cannot read", dir, errno);
  }
  if (!S_ISDIR(st.st_mode)) return error(error_code::invalid_argument, in_quotes(dir.native()) + " is not a folder");

  std::set<std::string, std::less<>> excluded;
  for (std::string e : o.excludes) {
    while (e.size() > 1 && e.back() == '/') e.pop_back();
    while (e.starts_with("./")) e.erase(0, 2);
    if (const char* why = bad_path(e)) {
      return error(error_code::invalid_argument,
                   "cannot exclude " + in_quotes(e) + ": " + why +
                     "; an exclude is a path inside the folder, like \"build\" or \"data/raw\"");
    }
    excluded.insert(std::move(e));
  }

  auto items = list_tree(dir, excluded);
  if (!items) return items.error();

  std::string out(package_magic);
  const auto too_big = [&](std::uint64_t reached, const std::string& at) {
    return error(error_code::resource_exhausted,
                 "packing " + in_quotes(dir.native()) + " reaches " + describe_size(reached) +
                   (at.empty() ? std::string() : " at " + in_quotes(at)) + ", past the limit of " +
                   describe_size(o.limit_bytes) + ": leave large files out with --exclude, or raise --working-dir-limit");
  };
  for (const auto& it : *items) {
    // What the archive holds once this entry and the trailer are added, as far as known now.
    const std::uint64_t planned = out.size() + entry_overhead + it.path.size() +
                                  (it.kind == entry_kind::file ? it.size : it.target.size()) + trailer_bytes;
    if (planned > o.limit_bytes) return too_big(planned, it.path);
    put_le(out, static_cast<std::uint64_t>(it.kind), 1);
    put_le(out, it.mode, 4);
    put_le(out, it.path.size(), 2);
    out += it.path;
    const auto size_at = out.size();
    put_le(out, 0, 8);
    if (it.kind == entry_kind::file) {
      // The file may have grown since it was listed: read no more than still fits.
      const std::uint64_t room = o.limit_bytes - (out.size() + trailer_bytes);
      auto n = append_file(out, dir / it.path, room);
      if (!n) return n.error();
      if (*n > room) return too_big(out.size() + trailer_bytes, it.path);
      patch_le(out, size_at, *n, 8);
    } else if (it.kind == entry_kind::link) {
      patch_le(out, size_at, it.target.size(), 8);
      out += it.target;
    }
  }
  // Only a limit smaller than an empty package's 41 bytes is passed here.
  if (out.size() + trailer_bytes > o.limit_bytes) return too_big(out.size() + trailer_bytes, {});
  put_le(out, static_cast<std::uint64_t>(entry_kind::end), 1);
  const auto sum = checksum_of(out);
  out.append(reinterpret_cast<const char*>(sum.data()), sum.size());
  return out;
}

expected<void> unpack(std::string_view archive, const fs::path& into, std::uint64_t limit_bytes) {
  // "out/pkg/" names the folder "out/pkg" too.
  const fs::path target = into.has_filename() ? into : into.parent_path();
  struct stat st{};
  if (::lstat(target.c_str(), &st) == 0) {
    return error(error_code::already_exists, in_quotes(target.native()) + " already exists");
  }
  if (errno != ENOENT) return filesystem_error("cannot check", target, errno);
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  if (::stat(parent.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return error(error_code::not_found, "cannot unpack into " + in_quotes(target.native()) + ": there is no folder " +
                                          in_quotes(parent.native()) + " to hold it");
  }

  auto d = decode(archive);
  if (!d) return d.error();
  if (d->summary.bytes > limit_bytes) {
    return error(error_code::resource_exhausted, "the package unpacks to " + describe_size(d->summary.bytes) +
                                                   " of files, past the limit of " + describe_size(limit_bytes));
  }

  // A sibling, so that the final rename stays on one filesystem; hidden, and named after
  // `into` so that a leftover (after a crash) says what it was.
  std::array<unsigned char, scratch_suffix_bytes> random{};
  randombytes_buf(random.data(), random.size());
  char hex[2 * scratch_suffix_bytes + 1];
  sodium_bin2hex(hex, sizeof hex, random.data(), random.size());
  const auto scratch_path = parent / ("." + target.filename().native() + ".unpacking-" + hex);
  if (::mkdir(scratch_path.c_str(), 0755) != 0) return filesystem_error("cannot create", scratch_path, errno);
  scratch_folder scratch(scratch_path);

  for (const auto& e : d->entries) {
    const auto p = scratch.path() / e.path;
    switch (e.kind) {
      case entry_kind::file:
        if (auto r = write_file(p, e.data, e.mode); !r) return r;
        break;
      case entry_kind::folder:
        // The owner keeps rwx: this unpacking writes into it, and whoever removes the tree
        // later must be able to.
        if (::mkdir(p.c_str(), static_cast<mode_t>((e.mode & 0755) | 0700)) != 0) {
          return filesystem_error("cannot create", p, errno);
        }
        break;
      case entry_kind::link: {
        std::error_code ec;
        fs::create_symlink(fs::path(std::string(e.data)), p, ec);
        if (ec) return filesystem_error("cannot create the link", p, ec.value());
        break;
      }
      case entry_kind::end:
        break;
    }
  }
  if (auto r = rename_new(scratch.path(), target); !r) return r;
  scratch.keep();
  return {};
}

std::string package_digest(std::string_view archive) {
  init_sodium();
  std::array<unsigned char, digest_bytes> digest{};
  crypto_generichash(digest.data(), digest.size(), reinterpret_cast<const unsigned char*>(archive.data()),
                     archive.size(), nullptr, 0);
  char hex[2 * digest_bytes + 1];
  sodium_bin2hex(hex, sizeof hex, digest.data(), digest.size());
  return std::string(hex, 2 * digest_bytes);
}

bool is_package_digest(std::string_view s) noexcept {
  return s.size() == 32 && std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool package_cache::ready(std::string_view digest) const {
  std::error_code ec;
  return is_package_digest(digest) && std::filesystem::is_directory(path(digest), ec);
}

expected<void> package_cache::install(std::string_view digest, std::string_view archive, std::uint64_t limit_bytes) {
  if (!is_package_digest(digest)) return error(error_code::invalid_argument, "not a package digest: '" + std::string(digest) + "'");
  if (ready(digest)) return {};
  if (package_digest(archive) != digest)
    return error(error_code::data_loss, "the bytes received for package " + std::string(digest) + " do not match its digest");
  std::error_code ec;
  std::filesystem::create_directories(root_, ec);
  if (ec) return error(error_code::permission_denied, "cannot make " + root_.string() + ": " + ec.message());
  auto ok = unpack(archive, path(digest), limit_bytes);
  if (!ok && ok.error().code() == error_code::already_exists) return {};  // another process of this machine won
  return ok;
}

expected<package_summary> inspect(std::string_view archive) {
  auto d = decode(archive);
  if (!d) return d.error();
  return d->summary;
}

} // namespace celer::jobs
