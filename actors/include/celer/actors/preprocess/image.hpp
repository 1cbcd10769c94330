#pragma once
/// Image augmentation on an item's pixels (row-major height × width × channels, u8): random
/// horizontal and vertical flips, a random crop after zero padding (same size out), and
/// gaussian noise, each item's draws seeded by its key, so the result is the same bytes
/// whichever worker augments it, in whatever order, on whatever machine.
///
///   namespace pp = celer::preprocess;
///   pp::augment_options opts{.hflip = 0.5, .crop_padding = 4, .noise_std = 2.0, .seed = epoch};
///   for (auto& img : images)
///     if (auto ok = pp::augment(img, opts); !ok) return fail(ok.error());
///
/// Each item draws from xoshiro256** seeded with stable_hash64(key, seed) (sharding.hpp), in
/// this order: the horizontal flip (uniform u < hflip), the vertical flip (u < vflip), the
/// crop's row shift and column shift (each uniform in −padding … +padding), then one normal
/// per byte when noise_std > 0. All four come first whatever the options, so changing one
/// probability does not reshuffle the others' draws. Give each epoch its own seed for fresh
/// augmentations; the same seed repeats them exactly.
#include <celer/error.hpp>

#include <cstdint>

namespace celer::preprocess {

struct item;

struct augment_options {
  /// Probability of mirroring left to right (0 never, 1 always).
  double hflip = 0.5;
  /// Probability of mirroring top to bottom.
  double vflip = 0;
  /// Pads every side with this many zero pixels and crops a window of the original size at
  /// a random place: the image shifts by up to this many pixels each way, zeros coming in.
  /// 0: no crop.
  std::uint32_t crop_padding = 0;
  /// Standard deviation of gaussian noise added to every byte, in pixel units (0–255);
  /// the sum is rounded to the nearest integer (halves up) and clamped to 0–255. 0: none.
  double noise_std = 0;
  /// Seeds every item's draws together with its key.
  std::uint64_t seed = 0;
};

/// Flips, then crops, then adds noise to `it.pixels` in place; height, width and channels
/// stay. Channels move together (a flip moves pixels, not bytes).
/// invalid_argument, naming the key, for an item without pixels, with a zero dimension or
/// with pixels.size() != height × width × channels; and for options out of range
/// (probabilities outside [0, 1], negative or non-finite noise_std). The item is unchanged
/// on error.
[[nodiscard]] expected<void> augment(item& it, const augment_options& options);

} // namespace celer::preprocess
