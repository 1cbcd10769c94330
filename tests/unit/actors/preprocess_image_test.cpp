// celer::preprocess's image augmentation: known flips, crops that keep the size and only
// shift, noise clamped to 0–255, and the same bytes for the same key and seed whatever the
// order or worker; plus the generator under it (prng.hpp) against reference values.
#include <celer/actors/preprocess/image.hpp>
#include <celer/actors/preprocess/item.hpp>
#include <celer/actors/preprocess/sharding.hpp>

#include "prng.hpp"  // actors/preprocess

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <numbers>
#include <string>
#include <vector>

using namespace celer::preprocess;

namespace {

item image(std::string key, std::uint32_t height, std::uint32_t width, std::uint32_t channels,
           std::vector<std::uint8_t> pixels) {
  item it;
  it.key = std::move(key);
  it.height = height;
  it.width = width;
  it.channels = channels;
  it.pixels = std::move(pixels);
  return it;
}

/// A 16 × 12 RGB image of nonzero bytes that differ from pixel to pixel.
item test_image(std::string key) {
  std::vector<std::uint8_t> px(16 * 12 * 3);
  for (std::size_t i = 0; i < px.size(); ++i) px[i] = static_cast<std::uint8_t>(1 + i % 251);
  return image(std::move(key), 16, 12, 3, std::move(px));
}

std::string_view bytes_of(const item& it) {
  return {reinterpret_cast<const char*>(it.pixels.data()), it.pixels.size()};
}

} // namespace

TEST_CASE("the generator is splitmix64 and xoshiro256**, bit for bit", "[preprocess]") {
  // From an independent implementation of the reference algorithms (Vigna's C code).
  std::uint64_t state = 0;
  CHECK(detail::splitmix64(state) == 0xe220a8397b1dcdafull);
  detail::xoshiro256ss zero(0);
  CHECK(zero.next() == 0x99ec5f36cb75f2b4ull);
  CHECK(zero.next() == 0xbf6e1f784956452aull);
  CHECK(zero.next() == 0x1a5f849d4933e6e0ull);
  detail::xoshiro256ss answer(42);
  CHECK(answer.next() == 0x15780b2e0c2ec716ull);
}

TEST_CASE("the generator's log and exp agree with the C library's to a few ulps", "[preprocess]") {
  detail::xoshiro256ss rng(1);
  for (int i = 0; i < 20'000; ++i) {
    const double x = std::ldexp(0.5 + rng.uniform(), static_cast<int>(rng.below(200)) - 100);
    CHECK(detail::det_log(x) == Approx(std::log(x)).epsilon(1e-15).margin(1e-300));
    const double y = 1400 * rng.uniform() - 700;
    CHECK(detail::det_exp(y) == Approx(std::exp(y)).epsilon(1e-14));
  }
  CHECK(detail::det_log(1.0) == 0.0);
  CHECK(detail::det_exp(0.0) == 1.0);
}

TEST_CASE("the generator's draws have the right moments", "[preprocess]") {
  detail::xoshiro256ss rng(9);
  double sum = 0, sum2 = 0;
  std::vector<int> counts(7, 0);
  constexpr int n = 200'000;
  for (int i = 0; i < n; ++i) {
    const double z = rng.normal();
    sum += z;
    sum2 += z * z;
    ++counts[rng.below(7)];
  }
  CHECK(std::abs(sum / n) < 0.01);
  CHECK(sum2 / n == Approx(1.0).epsilon(0.01));
  for (int c : counts) CHECK(std::abs(c - n / 7.0) < 5 * std::sqrt(n / 7.0));
}

TEST_CASE("a horizontal flip mirrors a known 3 by 2 image, pixels not bytes", "[preprocess]") {
  // 2 rows of 3 pixels, 2 channels each: pixel (r, c) holds (10r + c, 100 + 10r + c).
  item it = image("img/known.png", 2, 3, 2, {0, 100, 1, 101, 2, 102, 10, 110, 11, 111, 12, 112});
  REQUIRE(augment(it, {.hflip = 1.0}));
  CHECK(it.pixels == std::vector<std::uint8_t>{2, 102, 1, 101, 0, 100, 12, 112, 11, 111, 10, 110});
  CHECK(it.height == 2);
  CHECK(it.width == 3);

  item up = image("img/known.png", 2, 3, 1, {1, 2, 3, 4, 5, 6});
  REQUIRE(augment(up, {.hflip = 0.0, .vflip = 1.0}));
  CHECK(up.pixels == std::vector<std::uint8_t>{4, 5, 6, 1, 2, 3});

  item same = image("img/known.png", 2, 3, 1, {1, 2, 3, 4, 5, 6});
  REQUIRE(augment(same, {.hflip = 0.0}));
  CHECK(same.pixels == std::vector<std::uint8_t>{1, 2, 3, 4, 5, 6});
}

TEST_CASE("the same key and seed give the same bytes, another seed other bytes", "[preprocess]") {
  const augment_options opts{.hflip = 0.5, .vflip = 0.5, .crop_padding = 3, .noise_std = 4, .seed = 7};
  item a = test_image("img/000001.png"), b = test_image("img/000001.png");
  REQUIRE(augment(a, opts));
  REQUIRE(augment(b, opts));
  CHECK(a.pixels == b.pixels);
  CHECK(a.pixels != test_image("x").pixels);

  auto other = opts;
  other.seed = 8;
  item c = test_image("img/000001.png");
  REQUIRE(augment(c, other));
  CHECK(c.pixels != a.pixels);
  item d = test_image("img/000002.png");  // another key, same seed
  REQUIRE(augment(d, opts));
  CHECK(d.pixels != a.pixels);

  // Pinned: these bytes on every machine (a change here changes every augmented data set).
  CHECK(stable_hash64(bytes_of(a)) == 0x90f77b417df7383dull);
}

TEST_CASE("augmenting does not depend on the order or the worker", "[preprocess]") {
  const augment_options opts{.hflip = 0.5, .crop_padding = 2, .noise_std = 3, .seed = 1};
  std::vector<item> batch;
  for (int i = 0; i < 40; ++i) batch.push_back(test_image("img/" + std::to_string(i) + ".png"));

  std::map<std::string, std::vector<std::uint8_t>> forward;
  for (auto it : batch) {
    REQUIRE(augment(it, opts));
    forward[it.key] = it.pixels;
  }
  // Two "workers" take every other item, each in reverse order.
  for (int worker = 0; worker < 2; ++worker) {
    for (int i = 39 - worker; i >= 0; i -= 2) {
      item it = batch[static_cast<std::size_t>(i)];
      REQUIRE(augment(it, opts));
      CHECK(it.pixels == forward[it.key]);
    }
  }
  // And the options drew differently for different items: some flipped, some not.
  std::size_t distinct = 0;
  for (auto& [key, px] : forward) distinct += px != forward.begin()->second;
  CHECK(distinct > 30);
}

TEST_CASE("a random crop keeps the size and only shifts the image in", "[preprocess]") {
  constexpr std::int64_t pad = 4;
  const item original = test_image("any");
  std::size_t shifted = 0;
  for (int i = 0; i < 50; ++i) {
    item it = test_image("img/" + std::to_string(i));
    REQUIRE(augment(it, {.hflip = 0, .crop_padding = pad}));
    REQUIRE(it.pixels.size() == original.pixels.size());
    CHECK(it.height == 16);
    CHECK(it.width == 12);
    // Exactly one shift (dy, dx) in −pad … pad explains every byte: the original's, or zero
    // where the window is past the edge.
    int explained = 0;
    for (std::int64_t dy = -pad; dy <= pad; ++dy) {
      for (std::int64_t dx = -pad; dx <= pad; ++dx) {
        bool all = true;
        for (std::int64_t y = 0; y < 16 && all; ++y) {
          for (std::int64_t x = 0; x < 12 && all; ++x) {
            const bool inside = y + dy >= 0 && y + dy < 16 && x + dx >= 0 && x + dx < 12;
            for (std::int64_t k = 0; k < 3; ++k) {
              const auto got = it.pixels[static_cast<std::size_t>((y * 12 + x) * 3 + k)];
              const auto want =
                inside ? original.pixels[static_cast<std::size_t>(((y + dy) * 12 + x + dx) * 3 + k)] : 0;
              all = all && got == want;
            }
          }
        }
        if (all) {
          ++explained;
          shifted += dy != 0 || dx != 0;
        }
      }
    }
    CHECK(explained == 1);
  }
  CHECK(shifted > 40);  // 1 in 81 shifts is none
}

TEST_CASE("noise is clamped to 0 to 255, not wrapped", "[preprocess]") {
  std::vector<std::uint8_t> black(64 * 64, 0), white(64 * 64, 255);
  item dark = image("img/black", 64, 64, 1, black), light = image("img/white", 64, 64, 1, white);
  const augment_options opts{.hflip = 0, .noise_std = 50, .seed = 3};
  REQUIRE(augment(dark, opts));
  REQUIRE(augment(light, opts));
  const auto n = static_cast<double>(black.size());
  const auto zeros = static_cast<double>(std::count(dark.pixels.begin(), dark.pixels.end(), 0));
  const auto full = static_cast<double>(std::count(light.pixels.begin(), light.pixels.end(), 255));
  // Half the noise is negative (clamped to 0); wrapped, it would land near 255.
  CHECK(zeros / n == Approx(0.5).margin(0.03));
  CHECK(full / n == Approx(0.5).margin(0.03));
  double mean = 0;
  for (auto p : dark.pixels) mean += p;
  mean /= n;
  CHECK(mean == Approx(50 / std::sqrt(2 * std::numbers::pi)).epsilon(0.1));  // E[max(0, 50 z)] ≈ 19.9
  CHECK(*std::max_element(dark.pixels.begin(), dark.pixels.end()) < 255);
}

TEST_CASE("augment refuses an item without pixels, of the wrong size or bad options", "[preprocess]") {
  item none = image("img/none", 2, 2, 1, {});
  auto r = augment(none, {});
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == celer::error_code::invalid_argument);
  CHECK_THAT(r.error().message(), Catch::Contains("img/none") && Catch::Contains("no pixels"));

  item wrong = image("img/wrong", 2, 3, 1, {1, 2, 3, 4, 5});
  r = augment(wrong, {.hflip = 1});
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message(), Catch::Contains("img/wrong") && Catch::Contains("5 pixel bytes"));
  CHECK(wrong.pixels == std::vector<std::uint8_t>{1, 2, 3, 4, 5});

  item zero = image("img/zero", 0, 3, 1, {1, 2, 3});
  CHECK_FALSE(augment(zero, {}));
  item ok = test_image("img/ok");
  CHECK_FALSE(augment(ok, {.hflip = 1.5}));
  CHECK_FALSE(augment(ok, {.vflip = std::nan("")}));
  CHECK_FALSE(augment(ok, {.noise_std = -1}));
  CHECK(ok.pixels == test_image("x").pixels);
}
