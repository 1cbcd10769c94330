#pragma once
// Random draws for the data readers and the loader, from a caller-seeded std::mt19937_64.
// The standard distributions and std::shuffle are not used: their algorithms differ between
// standard libraries, and the same seed must give the same split, windows and batch order
// wherever a run (or its resume) happens.
#include <cstddef>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace celer::actors::detail {

/// An index in [0, n), n > 0 (modulo; the bias is below n / 2^64).
inline std::uint64_t below(std::mt19937_64& rng, std::uint64_t n) { return rng() % n; }

/// Fisher-Yates, drawing with below().
template <class T>
void shuffle(std::vector<T>& v, std::mt19937_64& rng) {
  for (std::size_t i = v.size(); i > 1; --i) {
    std::swap(v[i - 1], v[static_cast<std::size_t>(below(rng, i))]);
  }
}

} // namespace celer::actors::detail
