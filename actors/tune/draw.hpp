#pragma once
// Random draws for the tuning code, from a caller-seeded std::mt19937_64. The standard
// distributions are not used: their algorithms differ between standard libraries, and a
// resumed experiment must draw the same numbers wherever it runs.
#include <celer/actors/tune/space.hpp>

#include <cstddef>
#include <cstdint>
#include <random>

namespace celer::tune::detail {

using rng_type = std::mt19937_64;

/// A real in [0, 1) from the top 53 bits of one draw.
inline double unit(rng_type& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

/// An index in [0, n), n > 0 (modulo; the bias is below n / 2^64).
inline std::size_t below(rng_type& rng, std::size_t n) {
  return static_cast<std::size_t>(rng() % static_cast<std::uint64_t>(n));
}

/// One value of `p` (a validated parameter): reals uniform in [low, high] (in log space for
/// log ones), integers each equally likely (log ones uniform in log space over
/// [low - 0.5, high + 0.5], then rounded, as Optuna draws them), choices each equally likely.
value draw(const parameter& p, rng_type& rng);

/// One point of a validated space.
params draw(const search_space& space, rng_type& rng);

/// `v` as a number (a real or an integer); 0 for a string.
double as_number(const value& v);

} // namespace celer::tune::detail
