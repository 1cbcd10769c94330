// Image augmentation (image.hpp): flips, a padded random crop and gaussian noise, drawn from
// each item's own xoshiro256** (prng.hpp), so the bytes out depend on the key, the options
// and the bytes in alone.
#include <celer/actors/preprocess/image.hpp>
#include <celer/actors/preprocess/item.hpp>
#include <celer/actors/preprocess/sharding.hpp>

#include "prng.hpp"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace celer::preprocess {
namespace {

error refuse(const item& it, const std::string& why) {
  return error(error_code::invalid_argument, "cannot augment item \"" + it.key + "\": " + why);
}

bool probability(double p) { return p >= 0 && p <= 1; }  // false for NaN

} // namespace

expected<void> augment(item& it, const augment_options& options) {
  if (!probability(options.hflip) || !probability(options.vflip)) {
    return refuse(it, "hflip and vflip must be probabilities in [0, 1], got " +
                        std::to_string(options.hflip) + " and " + std::to_string(options.vflip));
  }
  if (!(options.noise_std >= 0) || !std::isfinite(options.noise_std)) {
    return refuse(it, "noise_std must be finite and >= 0, got " + std::to_string(options.noise_std));
  }
  if (it.pixels.empty()) return refuse(it, "it has no pixels");
  const std::uint64_t h = it.height, w = it.width, c = it.channels;
  if (h == 0 || w == 0 || c == 0) {
    return refuse(it, "a zero dimension (" + std::to_string(h) + " x " + std::to_string(w) +
                        " x " + std::to_string(c) + ")");
  }
  // h × w fits 64 bits (both are 32-bit); × c is checked before it is made.
  const std::uint64_t hw = h * w;
  if (hw > std::numeric_limits<std::uint64_t>::max() / c || hw * c != it.pixels.size()) {
    return refuse(it, std::to_string(h) + " x " + std::to_string(w) + " x " + std::to_string(c) +
                        " does not match its " + std::to_string(it.pixels.size()) + " pixel bytes");
  }

  detail::xoshiro256ss rng(stable_hash64(it.key, options.seed));
  const bool mirror_x = rng.uniform() < options.hflip;
  const bool mirror_y = rng.uniform() < options.vflip;
  const std::int64_t pad = options.crop_padding;
  const auto shifts = static_cast<std::uint64_t>(2 * pad + 1);
  const std::int64_t dy = static_cast<std::int64_t>(rng.below(shifts)) - pad;
  const std::int64_t dx = static_cast<std::int64_t>(rng.below(shifts)) - pad;

  // Output pixel (y, x) is the flipped image's (y + dy, x + dx), or zero outside it.
  const auto rows = static_cast<std::int64_t>(h), cols = static_cast<std::int64_t>(w);
  std::vector<std::uint8_t> out(it.pixels.size(), 0);
  for (std::int64_t y = 0; y < rows; ++y) {
    const std::int64_t sy = y + dy;
    if (sy < 0 || sy >= rows) continue;
    const std::int64_t from_row = mirror_y ? rows - 1 - sy : sy;
    for (std::int64_t x = 0; x < cols; ++x) {
      const std::int64_t sx = x + dx;
      if (sx < 0 || sx >= cols) continue;
      const std::int64_t from_col = mirror_x ? cols - 1 - sx : sx;
      const auto from = static_cast<std::size_t>(from_row * cols + from_col) * c;
      const auto to = static_cast<std::size_t>(y * cols + x) * c;
      for (std::uint64_t k = 0; k < c; ++k) out[to + k] = it.pixels[from + k];
    }
  }

  if (options.noise_std > 0) {
    for (auto& byte : out) {
      const double v = std::floor(static_cast<double>(byte) + options.noise_std * rng.normal() + 0.5);
      byte = static_cast<std::uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
    }
  }
  it.pixels = std::move(out);
  return {};
}

} // namespace celer::preprocess
