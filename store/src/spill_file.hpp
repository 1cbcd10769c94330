#pragma once
// One object's bytes in a plain file of the disk tier (spill_db keeps the index in RocksDB):
// written sequentially from the object's block in shared memory, read back straight into
// it, checksummed piece by piece as the bytes pass, so that no buffer sits between the
// file and the memory and each piece is hashed while it is still in the cache.
//
//   auto sum = write_object_file(dir_fd, name, data, size, /*sync=*/true);
//   auto ok = read_object_file(dir_fd, name, out, size, *sum, "object " + name);

#include <celer/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace celer::store {

/// Bytes per write or read call and per checksum update: small enough that a piece is
/// still in the cache when the checksum (write) or the copy (read) passes over it again,
/// large enough that the calls themselves cost nothing next to the copy.
inline constexpr std::size_t file_piece_bytes = std::size_t{1} << 20;

/// Writes `size` bytes at `data` to the file `name` in the directory `dir_fd` (replacing
/// one of that name) and returns their checksum. The file's space is reserved first, so a
/// full disk is resource_exhausted ("the disk is full") before anything is written; with
/// `sync` the file's data is on disk (fdatasync) when it returns. On failure the file is
/// removed.
[[nodiscard]] expected<std::uint64_t> write_object_file(int dir_fd, const std::string& name,
                                                        const std::byte* data, std::size_t size,
                                                        bool sync);

/// Reads the file `name` in `dir_fd`, which must hold exactly `size` bytes, into `out` and
/// checks them against `checksum`. data_loss (naming `what`) when the file is missing, of
/// another size, cannot be read, or does not match.
[[nodiscard]] expected<void> read_object_file(int dir_fd, const std::string& name,
                                              std::byte* out, std::size_t size,
                                              std::uint64_t checksum, const std::string& what);

} // namespace celer::store
