#pragma once
// A job's working directory as one archive (a "package"): packed once by the driver, stored
// under its digest, unpacked by each node that runs the job's workers. The same tree always
// packs to the same bytes (entries in sorted order, no times, no owners), so the digest is a
// content address. Decoding never trusts the archive: every length is checked against the
// bytes left before it is read, and unpacking writes nothing outside its own new folder.
//
// The format, all integers little-endian:
//
//   8 bytes   magic "CELERPK1" ("CELERPK" and the format version, '1')
//   entries, each:
//     u8      kind: 1 file, 2 folder, 3 symbolic link
//     u32     mode: permission bits only (at most 0777); a link's is 0777
//     u16     path length, then that many path bytes: relative, '/'-separated, no empty,
//             "." or ".." component, no trailing '/', no NUL (the filesystem's bytes; UTF-8
//             in practice). A folder's entry comes before anything under it.
//     u64     size, then that many bytes: a file's contents, a link's target (relative,
//             staying inside the tree), nothing for a folder (size 0)
//   1 byte    0: the end (no bytes may follow it but the checksum)
//   32 bytes  BLAKE2b-256 (libsodium crypto_generichash, no key) of everything before it
//
// Entries are in path order, component by component, each folder followed by what it holds:
// "a", "a/b", "a-c" ("a/b" sorts before "a-c" because it is under "a").
//
//   auto archive = jobs::pack_directory(".", {.excludes = {".git", "build"}});
//   if (!archive) return archive.error();
//   auto unpacked = jobs::unpack(*archive, node_dir / jobs::package_digest(*archive));

#include <celer/error.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace celer::jobs {

/// The format's first 8 bytes.
inline constexpr std::string_view package_magic = "CELERPK1";

struct pack_options {
  /// The archive's size (all of it, checksum included) past which packing fails: 100 MiB,
  /// enough for code and small data; large data belongs in the object store, not here.
  std::uint64_t limit_bytes = 100ull << 20;
  /// Paths relative to the folder that are left out, each a file or a whole folder
  /// (".git", "build", "data/raw"); a trailing '/' is allowed.
  std::vector<std::string> excludes;
};

/// Packs `dir` (regular files, folders, and symbolic links whose relative target stays
/// inside `dir`) into one archive. Files keep their permission bits, folders theirs.
/// Errors: not_found (no such folder), invalid_argument (not a folder; an absolute exclude;
/// a link that is absolute, leads outside, or climbs ("..") after descending; a socket,
/// fifo or device; a path longer than 65535 bytes: the message names the path), permission_denied (something cannot be read),
/// resource_exhausted (the archive would pass limit_bytes: the message gives the size
/// reached, the limit, and what to do).
[[nodiscard]] expected<std::string> pack_directory(const std::filesystem::path& dir, const pack_options& o = {});

/// Unpacks `archive` into the folder `into`, which must not exist yet (its parent must).
/// Everything is written into a new sibling folder, renamed to `into` at the end: on any
/// error nothing is left behind. Files are created with their stored mode (less the umask),
/// folders with 0755 masked by theirs, the owner always keeping rwx on folders so that the
/// tree can be removed. Errors: data_loss (checksum mismatch, truncated), invalid_argument
/// (bad magic or version, an absolute path, a "." or ".." component, an empty or duplicate
/// path, an entry whose folder has no earlier folder entry (e.g. a file under a link), a link
/// leading outside the tree, a size past what remains, ...), already_exists (`into` exists),
/// not_found (its parent does not), resource_exhausted (the files hold more than
/// `limit_bytes`, or the disk is full), permission_denied or internal (the filesystem).
[[nodiscard]] expected<void> unpack(std::string_view archive, const std::filesystem::path& into,
                                    std::uint64_t limit_bytes = 1ull << 30);

/// BLAKE2b-128 (libsodium crypto_generichash, 16 bytes) of the whole archive, as 32
/// lowercase hex digits: its content address.
[[nodiscard]] std::string package_digest(std::string_view archive);
/// True for what package_digest returns: 32 lowercase hex digits (safe as a file name).
[[nodiscard]] bool is_package_digest(std::string_view s) noexcept;

/// A machine's copies of packages, each unpacked once into `root`/<digest>/ (a node's
/// folder for its jobs' working directories, task_spec::package). Not thread-safe.
class package_cache {
public:
  explicit package_cache(std::filesystem::path root) : root_(std::move(root)) {}
  /// Where package `digest` is (or would be) unpacked.
  [[nodiscard]] std::filesystem::path path(std::string_view digest) const { return root_ / digest; }
  /// Whether it is unpacked here.
  [[nodiscard]] bool ready(std::string_view digest) const;
  /// Unpacks `archive` as package `digest` (nothing to do when it is there already).
  /// invalid_argument (not a digest), data_loss (the bytes do not match the digest), and
  /// unpack's errors (`limit_bytes` bounds what its files hold).
  [[nodiscard]] expected<void> install(std::string_view digest, std::string_view archive,
                                       std::uint64_t limit_bytes = 1ull << 30);

private:
  std::filesystem::path root_;
};

/// What an archive holds.
struct package_summary {
  std::size_t files = 0;
  std::size_t folders = 0;
  std::size_t links = 0;
  /// The files' bytes together (what unpacking writes; link targets not counted).
  std::uint64_t bytes = 0;
};

/// The archive's counts, without unpacking; checks it as unpack does (same errors, less
/// those of the filesystem and the limit).
[[nodiscard]] expected<package_summary> inspect(std::string_view archive);

} // namespace celer::jobs
