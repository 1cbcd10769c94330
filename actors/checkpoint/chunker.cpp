// FastCDC (Xia et al., USENIX ATC 2016): content-defined chunking with a gear rolling hash
// and normalised chunking. Why this and not fixed-size blocks: a checkpoint's bytes are
// mostly tensors laid end to end, and an entry whose size changes (a resized layer, a
// different optimiser state) shifts every byte after it; fixed blocks would then all
// differ, while content-defined cuts move only near the edit. Why FastCDC among the
// content-defined choices (Rabin, buzhash): the gear hash is one shift and one add per byte,
// it skips the first min_bytes of each chunk outright, and normalised chunking (a harder
// mask before avg_bytes, an easier one after) keeps sizes close to the average.
//
// The cut after byte i depends only on the 64 bytes up to i (each step shifts the hash left
// by one, so older bytes fall off the top) and on where the chunk began (min/avg/max). The
// masks test the hash's top bits, which see all 64 of those bytes.
//
// The gear table is part of the on-disk format: changing it changes every cut, so every
// chunk is written again once (old checkpoints still restore; their manifests list their
// own chunks). It is splitmix64 seeded with 0x63656c6572 ("celer"), entry i the (i+1)-th
// output.
#include <celer/actors/checkpoint.hpp>

#include <array>
#include <bit>

namespace celer::checkpoint {
namespace {

constexpr std::array<std::uint64_t, 256> make_gear() {
  std::array<std::uint64_t, 256> g{};
  std::uint64_t x = 0x63656c6572ULL;
  for (auto& v : g) {
    x += 0x9e3779b97f4a7c15ULL;
    std::uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    v = z ^ (z >> 31);
  }
  return g;
}
constexpr std::array<std::uint64_t, 256> gear = make_gear();

/// A mask of the top `bits` bits.
constexpr std::uint64_t top_bits(int bits) { return bits <= 0 ? 0 : ~std::uint64_t{0} << (64 - bits); }

/// The length of the chunk starting at `p` (at most `n` bytes remain).
std::size_t next_cut(const std::uint8_t* p, std::size_t n, const chunking& c,
                     std::uint64_t mask_small, std::uint64_t mask_large) {
  if (n <= c.min_bytes) return n;
  if (n > c.max_bytes) n = c.max_bytes;
  const std::size_t normal = std::min(n, c.avg_bytes);
  std::uint64_t h = 0;
  std::size_t i = c.min_bytes;
  for (; i < normal; ++i) {
    h = (h << 1) + gear[p[i]];
    if ((h & mask_small) == 0) return i + 1;
  }
  for (; i < n; ++i) {
    h = (h << 1) + gear[p[i]];
    if ((h & mask_large) == 0) return i + 1;
  }
  return n;
}

} // namespace

std::vector<std::size_t> cut(const void* data, std::size_t size, const chunking& parameters) {
  chunking c = parameters;
  // Keep the parameters sane rather than fail: a cut is always between 1 and max bytes.
  if (c.max_bytes == 0) c.max_bytes = 1;
  if (c.min_bytes > c.max_bytes) c.min_bytes = c.max_bytes;
  if (c.avg_bytes < c.min_bytes) c.avg_bytes = c.min_bytes;
  // Normalised chunking, level 2: two bits harder than the average before it, two easier
  // after. avg_bytes is taken as a power of two (the nearest below).
  const int avg_bits = c.avg_bytes == 0 ? 0 : std::bit_width(c.avg_bytes) - 1;
  const std::uint64_t mask_small = top_bits(avg_bits + 2);
  const std::uint64_t mask_large = top_bits(avg_bits - 2);
  std::vector<std::size_t> out;
  const auto* p = static_cast<const std::uint8_t*>(data);
  std::size_t at = 0;
  while (at < size) {
    const std::size_t n = next_cut(p + at, size - at, c, mask_small, mask_large);
    out.push_back(n);
    at += n;
  }
  return out;
}

} // namespace celer::checkpoint
