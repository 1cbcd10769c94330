// Readers of the shipped data sets: the digits CSV and IDX files, gzipped or not
// (common/idx_file.hpp reads them).
#include <celer/actors/data.hpp>

#include "idx_file.hpp"  // actors/common: read_maybe_gzip, idx_header

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <sstream>

namespace celer::actors {
namespace {

namespace fs = std::filesystem;
using detail::idx_header;
using detail::read_maybe_gzip;

} // namespace

std::string data_dir() {
  if (const char* env = std::getenv("CELER_DATA_DIR"); env != nullptr && *env != '\0') return env;
  if (fs::exists(CELER_INSTALLED_DATA_DIR "/digits")) return CELER_INSTALLED_DATA_DIR;
  return CELER_SOURCE_DATA_DIR;
}

expected<dataset> load_digits(const std::string& path_in) {
  const std::string path = path_in.empty() ? data_dir() + "/digits/digits.csv.gz" : path_in;
  auto text = read_maybe_gzip(
    path, "the UCI digits ship in the repository's data/digits (set CELER_DATA_DIR to the "
          "folder holding digits/)");
  if (!text) return text.error();
  dataset d;
  d.name = "digits";
  d.sample_shape = {64};
  d.classes = 10;
  std::istringstream in(*text);
  std::string line;
  std::size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    std::array<int, 65> v{};
    std::size_t fields = 0;
    const char* p = line.c_str();
    while (*p != '\0') {
      char* end = nullptr;
      const long x = std::strtol(p, &end, 10);
      if (end == p || fields == v.size()) {
        fields = v.size() + 1;  // malformed, or too many fields
        break;
      }
      v[fields++] = static_cast<int>(x);
      p = *end == ',' ? end + 1 : end;
    }
    if (fields != v.size() || v[64] < 0 || v[64] > 9) {
      return error(error_code::invalid_argument,
                   path + " line " + std::to_string(number) +
                     ": expected 64 pixels 0..16 and a class 0..9, comma-separated");
    }
    for (int i = 0; i < 64; ++i) d.x.push_back(static_cast<float>(v[i]) / 16.0f);
    d.y.push_back(v[64]);
  }
  if (d.y.empty()) return error(error_code::invalid_argument, path + " holds no samples");
  return d;
}

expected<dataset> load_idx(const std::string& images, const std::string& labels, std::string name) {
  const std::string whence = "Fashion-MNIST comes with Debian's dataset-fashion-mnist "
                             "(scripts/install-deps.sh installs it)";
  auto img = read_maybe_gzip(images, whence);
  if (!img) return img.error();
  auto lab = read_maybe_gzip(labels, whence);
  if (!lab) return lab.error();
  auto ih = idx_header(*img, images);
  if (!ih) return ih.error();
  auto lh = idx_header(*lab, labels);
  if (!lh) return lh.error();
  const auto& [ishape, istart] = *ih;  // idx_layout: shape, start
  const auto& [lshape, lstart] = *lh;
  if (lshape.size() != 1 || ishape.size() < 2 || ishape[0] != lshape[0]) {
    return error(error_code::invalid_argument,
                 images + " and " + labels + " do not pair: images need N×… and labels N");
  }
  dataset d;
  d.name = std::move(name);
  if (ishape.size() == 3) d.sample_shape = {1};  // one channel of H×W
  for (std::size_t i = 1; i < ishape.size(); ++i) d.sample_shape.push_back(ishape[i]);
  d.x.resize(img->size() - istart);
  for (std::size_t i = 0; i < d.x.size(); ++i) {
    d.x[i] = static_cast<float>(static_cast<unsigned char>((*img)[istart + i])) / 255.0f;
  }
  int top = 0;
  d.y.resize(lshape[0]);
  for (std::size_t i = 0; i < d.y.size(); ++i) {
    d.y[i] = static_cast<unsigned char>((*lab)[lstart + i]);
    top = std::max(top, static_cast<int>(d.y[i]));
  }
  d.classes = top + 1;
  return d;
}

expected<dataset> load_fashion_mnist(bool train, std::size_t limit, const std::string& dir_in) {
  const std::string dir = dir_in.empty() ? "/usr/share/datasets/fashion-mnist" : dir_in;
  const std::string part = train ? "train" : "t10k";
  auto d = load_idx(dir + "/" + part + "-images-idx3-ubyte.gz",
                    dir + "/" + part + "-labels-idx1-ubyte.gz", "fashion-mnist-" + part);
  if (!d) return d;
  if (limit > 0 && limit < d->size()) {
    d->x.resize(limit * d->features());
    d->y.resize(limit);
  }
  return d;
}

std::pair<dataset, dataset> split(const dataset& all, double validation_fraction,
                                  std::uint64_t seed) {
  std::map<std::int64_t, std::vector<std::size_t>> by_class;
  for (std::size_t i = 0; i < all.size(); ++i) by_class[all.y[i]].push_back(i);
  std::mt19937_64 rng(seed);
  std::vector<std::size_t> train_rows;
  std::vector<std::size_t> valid_rows;
  for (auto& [label, rows] : by_class) {
    std::shuffle(rows.begin(), rows.end(), rng);
    const auto n_valid = static_cast<std::size_t>(validation_fraction * static_cast<double>(rows.size()) + 0.5);
    valid_rows.insert(valid_rows.end(), rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(n_valid));
    train_rows.insert(train_rows.end(), rows.begin() + static_cast<std::ptrdiff_t>(n_valid), rows.end());
  }
  std::shuffle(train_rows.begin(), train_rows.end(), rng);
  std::shuffle(valid_rows.begin(), valid_rows.end(), rng);
  const auto take = [&](const std::vector<std::size_t>& rows, const char* part) {
    dataset d;
    d.name = all.name + "-" + part;
    d.sample_shape = all.sample_shape;
    d.classes = all.classes;
    const std::size_t f = all.features();
    d.x.reserve(rows.size() * f);
    for (auto r : rows) {
      d.x.insert(d.x.end(), all.x.begin() + static_cast<std::ptrdiff_t>(r * f),
                 all.x.begin() + static_cast<std::ptrdiff_t>((r + 1) * f));
      d.y.push_back(all.y[r]);
    }
    return d;
  };
  return {take(train_rows, "train"), take(valid_rows, "validation")};
}

expected<dataset> load_dataset(std::string_view name, std::size_t limit) {
  constexpr std::string_view records = "records:";
  if (name.starts_with(records)) {
    if (name.size() == records.size())
      return error(error_code::invalid_argument, "data set 'records:' names no directory: records:<dir>");
    return load_records(std::string(name.substr(records.size())), limit);
  }
  expected<dataset> all = error(error_code::invalid_argument,
                                "unknown data set '" + std::string(name) +
                                  "': digits, fashion-mnist or records:<dir> (a celer-preprocess output directory)");
  if (name == "digits") all = load_digits();
  if (name == "fashion-mnist") all = load_fashion_mnist(/*train=*/true, limit);
  if (all && limit > 0 && limit < all->size()) {
    all->x.resize(limit * all->features());
    all->y.resize(limit);
  }
  return all;
}

} // namespace celer::actors
