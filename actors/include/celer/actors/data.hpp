#pragma once
/// Real data sets for the built-in actors and apps, read from files that ship offline: the
/// UCI digits in this repository (data/digits) and Fashion-MNIST from Debian's
/// `dataset-fashion-mnist` (/usr/share/datasets/fashion-mnist). No LibTorch: samples are
/// plain floats, so the tuning, training and preprocessing code can share them.
///
///   auto digits = celer::actors::load_digits();             // expected<dataset>
///   if (!digits) { std::cerr << digits.error().message(); return 1; }
///   auto [train, valid] = celer::actors::split(*digits, 0.2, /*seed=*/7);
///   // train.x: train.size() rows of train.features() floats; train.y: classes 0..9
///
/// Errors name the file and what is wrong with it (missing, not gzip, a bad IDX header, a
/// line with the wrong number of fields), and say where the data comes from.

#include <celer/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace celer::actors {

/// Samples of one shape with a class label each, row-major.
struct dataset {
  std::string name;
  /// One sample's shape: {64} for digits (8×8, flat), {1, 28, 28} for Fashion-MNIST.
  std::vector<std::int64_t> sample_shape;
  /// size() × features() values, scaled to [0, 1].
  std::vector<float> x;
  /// size() labels in [0, classes).
  std::vector<std::int64_t> y;
  int classes = 0;

  [[nodiscard]] std::size_t features() const noexcept {
    std::size_t n = 1;
    for (auto d : sample_shape) n *= static_cast<std::size_t>(d);
    return n;
  }
  [[nodiscard]] std::size_t size() const noexcept { return y.size(); }
};

/// Where the shipped data lives: $CELER_DATA_DIR if set, else the installed share/celer/data,
/// else this source tree's data/ (for binaries run from the build tree).
[[nodiscard]] std::string data_dir();

/// The 1,797 UCI digits (data/digits/digits.csv.gz; pixels 0..16 scaled to [0, 1]).
[[nodiscard]] expected<dataset> load_digits(const std::string& path = {});

/// An IDX image file and its label file (gzip or plain), as MNIST and Fashion-MNIST ship:
/// images of unsigned bytes scaled to [0, 1], labels of unsigned bytes.
[[nodiscard]] expected<dataset> load_idx(const std::string& images, const std::string& labels,
                                         std::string name = "idx");

/// Fashion-MNIST's 60,000 training or 10,000 test images (28×28, 10 classes), from `dir`
/// (Debian's dataset-fashion-mnist by default). `limit` > 0 keeps only the first `limit`.
[[nodiscard]] expected<dataset> load_fashion_mnist(bool train, std::size_t limit = 0,
                                                   const std::string& dir = {});

/// A shipped data set by the name the apps' configs use: "digits", or "fashion-mnist" (its
/// training images); `limit` > 0 keeps only the first `limit` samples. invalid_argument for
/// another name; the loaders' errors otherwise.
[[nodiscard]] expected<dataset> load_dataset(std::string_view name, std::size_t limit = 0);

/// Splits `all` into (train, validation) with `validation_fraction` of each class in the
/// validation part (stratified), the order shuffled by `seed`: the same seed, the same split.
[[nodiscard]] std::pair<dataset, dataset> split(const dataset& all, double validation_fraction,
                                                std::uint64_t seed);

} // namespace celer::actors
