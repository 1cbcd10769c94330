// The synthetic product catalog (catalog.hpp; the rules are in README.md, "Synthetic
// catalog"). Every number comes from prng.hpp's generator and its own log and exp, so the
// files are the same bytes everywhere; nlohmann-json writes the lines (its number format is
// its own code, not the C library's).
#include <celer/actors/preprocess/catalog.hpp>
#include <celer/actors/preprocess/item.hpp>
#include <celer/actors/preprocess/sharding.hpp>

#include "io_error.hpp"  // actors/common
#include "prng.hpp"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <filesystem>

namespace celer::preprocess {
namespace {

constexpr std::size_t vocabulary_size = 4096;
constexpr std::uint32_t max_categories = 1000;
/// Of the description's words, the share drawn from the category's own slice (the rest come
/// from the whole vocabulary); the title's share.
constexpr double description_own_share = 0.5, title_own_share = 0.7;

/// The fractional part of (k + 1) × c: a low-discrepancy sequence (Weyl's), spread over
/// [0, 1) in no order of k. One multiplication and a floor: exact bits everywhere.
double spread(std::uint32_t k, double c) {
  const double x = static_cast<double>(k + 1) * c;
  return x - std::floor(x);
}

/// 1/φ (φ the golden ratio) spreads the description lengths; 1/ρ and 1/ρ² (ρ the plastic
/// number) spread the mean prices and ratings, as one two-dimensional sequence (Roberts's R2).
constexpr double golden = 0.6180339887498949;
constexpr double plastic = 0.7548776662466927, plastic_squared = 0.5698402909980532;

double mean_price(std::uint32_t k) { return 5.0 + 195.0 * spread(k, plastic); }
double mean_rating(std::uint32_t k) { return 3.2 + 1.5 * spread(k, plastic_squared); }

expected<void> check(const catalog_options& o) {
  std::string why;
  if (o.catalogs == 0) why = "catalogs must be at least 1";
  else if (o.items_per_catalog == 0) why = "items_per_catalog must be at least 1";
  else if (o.categories == 0 || o.categories > max_categories) {
    why = "categories must be 1 to " + std::to_string(max_categories) + ", got " +
          std::to_string(o.categories);
  } else if (!(o.zipf_s >= 0) || !std::isfinite(o.zipf_s)) {
    why = "zipf_s must be finite and >= 0, got " + std::to_string(o.zipf_s);
  }
  if (why.empty()) return {};
  return error(error_code::invalid_argument, "catalog options: " + why);
}

/// Zipf's cumulative weights: w[k] = Σ_{i<=k} 1/(i+1)^s, unnormalised.
std::vector<double> zipf_cumulative(const catalog_options& o) {
  std::vector<double> cumulative(o.categories);
  double sum = 0;
  for (std::uint32_t k = 0; k < o.categories; ++k) {
    sum += detail::det_exp(-o.zipf_s * detail::det_log(static_cast<double>(k + 1)));
    cumulative[k] = sum;
  }
  return cumulative;
}

std::string zero_padded(std::uint32_t n, int digits) {
  char out[16];
  std::snprintf(out, sizeof out, "%0*u", digits, n);
  return out;
}

/// A word from the category's slice (with probability `own`) or from the whole vocabulary.
const std::string& draw_word(detail::xoshiro256ss& rng, std::span<const std::string> slice,
                             double own) {
  const auto& vocabulary = catalog_vocabulary();
  if (rng.uniform() < own) return slice[rng.below(slice.size())];
  return vocabulary[rng.below(vocabulary.size())];
}

catalog_product make_product(const catalog_options& o, const std::vector<double>& cumulative,
                             std::uint32_t catalog, std::uint32_t index) {
  catalog_product p;
  p.id = "c" + zero_padded(catalog, 2) + "-" + zero_padded(index, 6);
  p.catalog = catalog;
  detail::xoshiro256ss rng(stable_hash64(p.id, o.seed));

  // The category: the first k whose cumulative weight is above u × total.
  const double x = rng.uniform() * cumulative.back();
  const auto at = std::upper_bound(cumulative.begin(), cumulative.end(), x) - cumulative.begin();
  const auto k = static_cast<std::uint32_t>(std::min<std::ptrdiff_t>(at, o.categories - 1));
  p.label = static_cast<std::int32_t>(k);
  p.category = "k" + zero_padded(k, 2);
  const auto slice = catalog_category_words(k, o.categories);

  // The title: 3 to 8 words, each capitalised.
  const auto title_words = 3 + rng.below(6);
  for (std::uint64_t i = 0; i < title_words; ++i) {
    std::string word = draw_word(rng, slice, title_own_share);
    word[0] = static_cast<char>(word[0] - 'a' + 'A');
    if (i > 0) p.title += ' ';
    p.title += word;
  }

  // The description: the category's mean length × a uniform factor in [0.75, 1.25).
  const double length = std::round(catalog_mean_words(k) * (0.75 + 0.5 * rng.uniform()));
  const auto words = static_cast<std::uint64_t>(std::max(1.0, length));
  p.description.reserve(words * 7);
  for (std::uint64_t i = 0; i < words; ++i) {
    if (i > 0) p.description += ' ';
    p.description += draw_word(rng, slice, description_own_share);
  }

  // Price: the category's mean × (1 + 0.25 z), at least 0.5; rating: mean + 0.6 z in 1–5.
  const double price = std::max(0.5, mean_price(k) * (1 + 0.25 * rng.normal()));
  p.price = std::round(price * 100) / 100;
  const double rating = std::clamp(mean_rating(k) + 0.6 * rng.normal(), 1.0, 5.0);
  p.rating = std::round(rating * 10) / 10;
  return p;
}

/// Writes `bytes` to `path` through `path + ".part"`: write, fsync, rename.
expected<void> write_file(const std::string& path, std::string_view bytes) {
  const std::string part = path + ".part";
  const int fd = ::open(part.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return actors::detail::io_error(errno, "creating", part);
  auto fail = [&](const char* what) {
    const int err = errno;
    ::close(fd);
    ::unlink(part.c_str());
    return actors::detail::io_error(err, what, part);
  };
  while (!bytes.empty()) {
    const ::ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail("writing");
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  if (::fsync(fd) != 0) return fail("syncing");
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(part.c_str());
    return actors::detail::io_error(err, "closing", part);
  }
  if (::rename(part.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(part.c_str());
    return actors::detail::io_error(err, "renaming to " + path, part);
  }
  return {};
}

} // namespace

const std::vector<std::string>& catalog_vocabulary() {
  // Word i is the syllables of j = (i × 7919 + 1) mod 2^14 (7919 is odd, so j runs over
  // distinct values): onset, vowel, onset, vowel. Onsets are single consonants or "ch"/"sh"
  // and h is no onset, vowels are one or two letters and never follow each other, so
  // different syllables spell different words.
  static const std::vector<std::string> words = [] {
    static constexpr const char* onsets[16] = {"b", "d", "f", "g", "k", "l", "m",  "n",
                                               "p", "r", "s", "t", "v", "z", "ch", "sh"};
    static constexpr const char* vowels[8] = {"a", "e", "i", "o", "u", "ai", "ou", "ea"};
    std::vector<std::string> out;
    out.reserve(vocabulary_size);
    for (std::uint32_t i = 0; i < vocabulary_size; ++i) {
      const std::uint32_t j = (i * 7919u + 1u) % 16384u;
      out.push_back(std::string(onsets[j % 16]) + vowels[(j / 16) % 8] + onsets[(j / 128) % 16] +
                    vowels[(j / 2048) % 8]);
    }
    return out;
  }();
  return words;
}

std::span<const std::string> catalog_category_words(std::uint32_t category,
                                                    std::uint32_t categories) {
  if (category >= categories) return {};
  const auto& vocabulary = catalog_vocabulary();
  const std::size_t first = std::size_t{category} * vocabulary_size / categories;
  const std::size_t last = (std::size_t{category} + 1) * vocabulary_size / categories;
  return std::span<const std::string>(vocabulary).subspan(first, last - first);
}

double catalog_mean_words(std::uint32_t category) {
  static const double ln50 = detail::det_log(50.0);
  return 8.0 * detail::det_exp(spread(category, golden) * ln50);
}

std::string catalog_file_name(std::uint32_t catalog) {
  return "catalog-" + zero_padded(catalog, 2) + ".jsonl";
}

expected<std::vector<catalog_product>> generate_catalog(const catalog_options& options,
                                                        std::uint32_t catalog) {
  if (auto ok = check(options); !ok) return ok.error();
  const auto cumulative = zipf_cumulative(options);
  std::vector<catalog_product> out;
  out.reserve(options.items_per_catalog);
  for (std::uint32_t i = 0; i < options.items_per_catalog; ++i) {
    out.push_back(make_product(options, cumulative, catalog, i));
  }
  return out;
}

item to_item(const catalog_product& p) {
  item it;
  it.key = p.id;
  it.label = p.label;
  it.category = p.category;
  it.text = p.title + "\n" + p.description;
  it.values = {static_cast<float>(p.price), static_cast<float>(p.rating)};
  return it;
}

expected<std::vector<item>> generate_catalog_items(const catalog_options& options,
                                                   std::uint32_t catalog) {
  auto products = generate_catalog(options, catalog);
  if (!products) return products.error();
  std::vector<item> out;
  out.reserve(products->size());
  for (const auto& p : *products) out.push_back(to_item(p));
  return out;
}

std::string to_json_line(const catalog_product& p) {
  nlohmann::ordered_json line;
  line["id"] = p.id;
  line["catalog"] = p.catalog;
  line["category"] = p.category;
  line["label"] = p.label;
  line["title"] = p.title;
  line["description"] = p.description;
  line["price"] = p.price;
  line["rating"] = p.rating;
  return line.dump();
}

expected<std::vector<std::string>> write_catalog(const std::string& dir,
                                                 const catalog_options& options) {
  if (auto ok = check(options); !ok) return ok.error();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return actors::detail::io_error(ec.value(), "creating the folder", dir);
  const auto cumulative = zipf_cumulative(options);
  std::vector<std::string> paths;
  std::string bytes;
  for (std::uint32_t c = 0; c < options.catalogs; ++c) {
    bytes.clear();
    for (std::uint32_t i = 0; i < options.items_per_catalog; ++i) {
      bytes += to_json_line(make_product(options, cumulative, c, i));
      bytes += '\n';
    }
    auto path = (std::filesystem::path(dir) / catalog_file_name(c)).string();
    if (auto ok = write_file(path, bytes); !ok) return ok.error();
    paths.push_back(std::move(path));
  }
  return paths;
}

} // namespace celer::preprocess
