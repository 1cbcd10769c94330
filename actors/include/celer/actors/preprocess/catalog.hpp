#pragma once
/// The synthetic, skewed product catalog the preprocessing benchmarks run on: by default 55
/// catalogs of 15,000 products, each product in one of 40 categories drawn from Zipf's law
/// (a few categories hold most products), with a description whose length, the per-item
/// cost, depends strongly on the category, and words a classifier can learn the category
/// from. Same options, same bytes, on every machine.
///
///   namespace pp = celer::preprocess;
///   auto files = pp::write_catalog("data/catalog", {});   // catalog-00.jsonl ... catalog-54.jsonl
///   if (!files) return fail(files.error());
///
///   auto items = pp::generate_catalog_items({.catalogs = 2, .items_per_catalog = 100}, 1);
///   // items->at(0).key == "c01-000000", .label is the category, .text the title and
///   // description, .values {price, rating}
///
/// Each line of catalog-NN.jsonl is one JSON object, its fields in this order:
///   {"id":"c03-000117","catalog":3,"category":"k07","label":7,"title":"Shaitou Bako Rimea",
///    "description":"bako lounea ...","price":59.5,"rating":4.2}
/// The rules that make each field are in actors/preprocess/README.md ("Synthetic catalog").
/// Every product draws from xoshiro256** seeded with stable_hash64(id, seed): a product is the
/// same whichever catalogs are generated with it, in whatever order.
#include <celer/error.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace celer::preprocess {

struct item;

struct catalog_options {
  std::uint32_t catalogs = 55;
  std::uint32_t items_per_catalog = 15000;
  /// 1 to 1,000 (each keeps its own slice of the 4,096-word vocabulary).
  std::uint32_t categories = 40;
  /// Zipf's exponent: category k (from 0) is drawn with probability ∝ 1/(k+1)^s; 0 is uniform.
  double zipf_s = 1.1;
  std::uint64_t seed = 1;
};

/// One product, as a line of the catalog holds it.
struct catalog_product {
  /// "c" + catalog (2 digits at least) + "-" + position in the catalog (6 digits at least).
  std::string id;
  std::uint32_t catalog = 0;
  /// "k" + label (2 digits at least).
  std::string category;
  /// The category's index, 0 for the most frequent.
  std::int32_t label = 0;
  std::string title, description;
  /// In currency units, rounded to cents.
  double price = 0;
  /// 1.0 to 5.0, rounded to one decimal.
  double rating = 0;
};

/// The products of catalog `catalog` (any number: it need not be below options.catalogs),
/// in id order. invalid_argument for options out of range (no catalogs, no items, categories
/// outside 1–1,000, a negative or non-finite zipf_s).
[[nodiscard]] expected<std::vector<catalog_product>> generate_catalog(const catalog_options& options,
                                                                      std::uint32_t catalog);

/// The same products as items: key = id, label, category, text = title + "\n" + description,
/// values = {price, rating}.
[[nodiscard]] expected<std::vector<item>> generate_catalog_items(const catalog_options& options,
                                                                 std::uint32_t catalog);

/// The product as an item (see generate_catalog_items).
[[nodiscard]] item to_item(const catalog_product& product);

/// The product's line of the catalog file, without the line break (nlohmann-json).
[[nodiscard]] std::string to_json_line(const catalog_product& product);

/// Writes catalog-00.jsonl … catalog-NN.jsonl (2 digits at least) into `dir`, made if
/// missing, each first as a ".part" file, fsynced and renamed: a crash leaves no half file
/// under a final name. Existing files are replaced. Returns the paths, in catalog order.
/// invalid_argument for bad options; I/O errors as the disk reports them.
[[nodiscard]] expected<std::vector<std::string>> write_catalog(const std::string& dir,
                                                               const catalog_options& options);

/// "catalog-03.jsonl".
[[nodiscard]] std::string catalog_file_name(std::uint32_t catalog);

/// The 4,096 distinct lower-case, pronounceable words products are written in (two
/// consonant-vowel syllables: "bako", "shaitou"); the same list on every call.
[[nodiscard]] const std::vector<std::string>& catalog_vocabulary();

/// The slice of the vocabulary that category `category` of `categories` prefers: words
/// [k·4096/C, (k+1)·4096/C). Empty for a category out of range.
[[nodiscard]] std::span<const std::string> catalog_category_words(std::uint32_t category,
                                                                  std::uint32_t categories);

/// The mean description length of a category, in words: 8 · 50^f with f the fractional part
/// of (k + 1) · 0.618… (the golden ratio's inverse), so lengths spread over 8–400 and follow
/// no order of k, hence none of frequency.
[[nodiscard]] double catalog_mean_words(std::uint32_t category);

} // namespace celer::preprocess
