#pragma once
/// Real data sets for the built-in actors and apps, read from files that ship offline: the
/// UCI digits in this repository (data/digits) and Fashion-MNIST from Debian's
/// `dataset-fashion-mnist` (/usr/share/datasets/fashion-mnist); and any output directory of
/// celer-preprocess (`load_records`, or the name "records:<dir>"). No LibTorch: samples are
/// plain floats, so the tuning, training and preprocessing code can share them.
///
///   auto digits = celer::actors::load_digits();             // expected<dataset>
///   if (!digits) { std::cerr << digits.error().message(); return 1; }
///   auto [train, valid] = celer::actors::split(*digits, 0.2, /*seed=*/7);
///   // train.x: train.size() rows of train.features() floats; train.y: classes 0..9
///   auto mine = celer::actors::load_dataset("records:out/digits");   // celer-preprocess's output
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
  /// size() × features() values: scaled to [0, 1] for images (the shipped sets, u8 records),
  /// as written for f32 records.
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

/// The records of a celer-preprocess output directory (<celer/actors/preprocess/manifest.hpp>):
/// the shards in the manifest's order, each read through record_reader's mmap in file order;
/// `limit` > 0 keeps only the first `limit`. An "f32:SHAPE" payload's floats are copied as
/// they are, a "u8:SHAPE" payload's bytes scaled to [0, 1]; labels are the records', classes
/// the manifest's, the shape the schema's, the name the directory's last component. Every
/// shard is opened and checked against the manifest first (open_shard); each record's CRC is
/// checked as it is read, and when all are read their key checksum. Errors: read_manifest's
/// and open_shard's (not_found, data_loss, ...); data_loss for a damaged record, naming the
/// file and offset; invalid_argument saying what to do for a schema the trainers cannot use
/// (u32:tokens, text), unlabelled records (classes 0), and, naming the shard file and the
/// record's index, a label outside [0, classes), a payload of the wrong size or a float
/// that is not finite.
[[nodiscard]] expected<dataset> load_records(const std::string& dir, std::size_t limit = 0);

/// A data set by the name the apps' configs use: "digits", "fashion-mnist" (its training
/// images), or "records:<dir>" (load_records of <dir>); `limit` > 0 keeps only the first
/// `limit` samples. invalid_argument for another name; the loaders' errors otherwise.
[[nodiscard]] expected<dataset> load_dataset(std::string_view name, std::size_t limit = 0);

/// Splits `all` into (train, validation) with `validation_fraction` of each class in the
/// validation part (stratified), the order shuffled by `seed`: the same seed, the same split.
[[nodiscard]] std::pair<dataset, dataset> split(const dataset& all, double validation_fraction,
                                                std::uint64_t seed);

} // namespace celer::actors
