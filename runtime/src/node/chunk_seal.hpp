#pragma once
// Sealing the chunks of a pull that travel outside CURVE (transport/bulk_lane.hpp):
// AES-256-GCM (OpenSSL; hardware AES) under a key the puller makes for that one pull and
// sends to the node holding the object with its store_pull, over their CURVE connection.
//
//   const std::string key = chunk_seal::new_key();                       // puller, per pull
//   chunk_seal::seal(key, where, plain, n, out);                           // holder: n + tag_bytes
//   if (!chunk_seal::open(key, where, out, n + tag_bytes, block)) drop();  // puller, into the block
//
// The nonce is the chunk's offset: a key seals each offset of one immutable object, so a
// nonce repeats only for the same bytes (a chunk asked for twice), which GCM allows. The
// pull's request id, the object id, the offset and the length are authenticated with the
// bytes, so a sealed chunk cannot be moved to another pull, object or place.

#include <celer/ids.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace celer::chunk_seal {

inline constexpr std::size_t key_bytes = 32;
inline constexpr std::size_t tag_bytes = 16;

/// What a sealed chunk is bound to.
struct place {
  std::uint64_t request_id = 0;
  object_id id;
  std::uint64_t offset = 0;
};

/// A fresh key from the kernel's random source (key_bytes bytes).
[[nodiscard]] std::string new_key();
/// Writes `n` bytes of `plain`, sealed, and the tag: `n + tag_bytes` bytes at `out`. False
/// (out unspecified) for a key of another size, or when OpenSSL fails.
[[nodiscard]] bool seal(const std::string& key, const place& at, const char* plain, std::size_t n,
                        char* out);
/// Opens `sealed_n` bytes at `sealed` (its bytes, then the tag) into `sealed_n - tag_bytes`
/// bytes at `out`, checking them as it goes. False when they do not authenticate (another
/// key or place, or damaged): `out` then holds garbage, which the caller must not use.
[[nodiscard]] bool open(const std::string& key, const place& at, const char* sealed,
                        std::size_t sealed_n, char* out);

} // namespace celer::chunk_seal
