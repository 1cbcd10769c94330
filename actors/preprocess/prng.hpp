#pragma once
// The random numbers of celer::preprocess (internal): splitmix64 and xoshiro256** (Blackman
// and Vigna, https://prng.di.unimi.it), and every draw made from them, written here so that
// the same seed gives the same bits on every machine, compiler and standard library
// (std::uniform_real_distribution and std::normal_distribution are specified by what they
// return, not how, and libstdc++, libc++ and MSVC differ). The logarithm and the
// exponential are computed here too, from + − × ÷ and exact scalings only: the C library's
// are accurate to an ulp or so, but not the same bits everywhere.
//
// The files that draw (image.cpp, sampling.cpp, catalog.cpp) are compiled with
// -ffp-contract=off (CMakeLists.txt), so a compiler may not fuse a × b + c into one FMA on
// one machine and not on another: with IEEE-754 doubles and that, every result is fixed.
//
// Per-item draws are seeded with stable_hash64(item.key, seed): an item's draws depend on its
// key and the seed alone, never on which worker processes it or in which order.
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace celer::preprocess::detail {

/// One step of splitmix64 (Steele, Lea and Flood): advances `state`, returns the output.
inline std::uint64_t splitmix64(std::uint64_t& state) noexcept {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// ln(x) for a finite x > 0, to within a few ulps, the same bits everywhere: x = m·2^e with
/// m in [√½, √2), and ln m = 2·atanh(t), t = (m − 1)/(m + 1) (|t| ≤ 0.172), by its series
/// to t^41 (the next term is below 2^-60 of the sum).
inline double det_log(double x) noexcept {
  int e = 0;
  double m = std::frexp(x, &e);  // exact: m in [0.5, 1)
  if (m < 0.70710678118654752440) {
    m *= 2;
    --e;
  }
  const double t = (m - 1) / (m + 1);  // m − 1 is exact (Sterbenz)
  const double t2 = t * t;
  double p = 1.0 / 41;
  for (int k = 39; k >= 1; k -= 2) p = p * t2 + 1.0 / k;
  constexpr double ln2_hi = 0x1.62e42fee00000p-1, ln2_lo = 0x1.a39ef35793c76p-33;
  const double de = e;
  return de * ln2_hi + (2 * t * p + de * ln2_lo);
}

/// e^x for |x| < 700, to within a few ulps, the same bits everywhere: x = n·ln 2 + r with
/// |r| ≤ ½ ln 2 (Cody and Waite's two-part ln 2), e^r by Taylor's series to r^22, times 2^n.
inline double det_exp(double x) noexcept {
  constexpr double ln2_hi = 0x1.62e42fee00000p-1, ln2_lo = 0x1.a39ef35793c76p-33;
  const double n = std::floor(x * 1.44269504088896340736 + 0.5);
  const double r = (x - n * ln2_hi) - n * ln2_lo;
  double p = 1;
  for (int k = 22; k >= 1; --k) p = 1 + p * r / k;
  return std::ldexp(p, static_cast<int>(n));  // exact
}

/// xoshiro256** seeded through splitmix64, with the draws celer::preprocess uses.
class xoshiro256ss {
public:
  /// The four state words are four splitmix64 outputs from `seed` (the authors' advice).
  explicit xoshiro256ss(std::uint64_t seed) noexcept {
    for (auto& word : s_) word = splitmix64(seed);
  }

  std::uint64_t next() noexcept {
    const std::uint64_t result = std::rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = std::rotl(s_[3], 45);
    return result;
  }

  /// Uniform in [0, 1): the top 53 bits of one output, times 2^-53 (exact).
  double uniform() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  /// Uniform in [0, n) for n > 0, unbiased: outputs below 2^64 mod n are drawn again, so
  /// the rest fall on whole multiples of n.
  std::uint64_t below(std::uint64_t n) noexcept {
    const std::uint64_t reject_under = (0 - n) % n;  // 2^64 mod n
    std::uint64_t x = next();
    while (x < reject_under) x = next();
    return x % n;
  }

  /// Standard normal, by Marsaglia's polar method: (u, v) uniform in the unit disc (drawn
  /// again outside it), s = u² + v², and u·√(−2 ln s / s), v·√(−2 ln s / s) are two
  /// independent normals; the second is kept for the next call. √ is exact in IEEE-754 and
  /// ln is det_log, so the bits are fixed.
  double normal() noexcept {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u = 0, v = 0, s = 0;
    do {
      u = 2 * uniform() - 1;
      v = 2 * uniform() - 1;
      s = u * u + v * v;
    } while (s >= 1 || s == 0);
    const double f = std::sqrt(-2 * det_log(s) / s);
    spare_ = v * f;
    has_spare_ = true;
    return u * f;
  }

  /// Fisher and Yates's shuffle of [first, last), stopped after the first `k` positions:
  /// position i (from 0) swaps with a uniform pick of positions i … n − 1. Afterwards
  /// [first, first + k) is a uniform draw without replacement from the whole range, in
  /// random order; k >= n − 1 shuffles it all.
  template <class It>
  void shuffle(It first, It last, std::uint64_t k) noexcept {
    const auto n = static_cast<std::uint64_t>(last - first);
    if (k > n) k = n;
    for (std::uint64_t i = 0; i < k && i + 1 < n; ++i) {
      const std::uint64_t j = i + below(n - i);
      using std::swap;
      swap(first[static_cast<std::ptrdiff_t>(i)], first[static_cast<std::ptrdiff_t>(j)]);
    }
  }

private:
  std::uint64_t s_[4] = {};
  double spare_ = 0;
  bool has_spare_ = false;
};

} // namespace celer::preprocess::detail
