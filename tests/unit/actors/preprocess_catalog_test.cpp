// celer::preprocess's synthetic product catalog: the JSON fields in their order, the same
// bytes for the same options, Zipf category sizes, description lengths that follow the
// category and not its frequency, words that give the category away, and the options refused.
#include <celer/actors/preprocess/catalog.hpp>
#include <celer/actors/preprocess/item.hpp>
#include <celer/actors/preprocess/sharding.hpp>

#include "checkpoint_fixtures.hpp"  // temp_dir, read_file

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace celer::preprocess;
using checkpoint_test::read_file;
using checkpoint_test::temp_dir;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::size_t word_count(const std::string& text) {
  std::istringstream in(text);
  std::size_t n = 0;
  for (std::string w; in >> w;) ++n;
  return n;
}

} // namespace

TEST_CASE("a catalog file holds one JSON object a line, fields in order", "[preprocess]") {
  temp_dir dir;
  const catalog_options opts{.catalogs = 3, .items_per_catalog = 200};
  auto files = write_catalog((dir.path / "cat").string(), opts);
  REQUIRE(files);
  REQUIRE(files->size() == 3);
  CHECK(fs::path((*files)[2]).filename() == "catalog-02.jsonl");
  for (const auto& entry : fs::directory_iterator(dir.path / "cat")) {
    CHECK(entry.path().extension() == ".jsonl");  // no .part left behind
  }

  const auto lines = lines_of(read_file((*files)[1]));
  REQUIRE(lines.size() == 200);
  auto products = generate_catalog(opts, 1);
  REQUIRE(products);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    CHECK(lines[i] == to_json_line((*products)[i]));
    const auto j = nlohmann::ordered_json::parse(lines[i]);
    std::vector<std::string> keys;
    for (auto& [key, value] : j.items()) keys.push_back(key);
    CHECK(keys == std::vector<std::string>{"id", "catalog", "category", "label", "title",
                                           "description", "price", "rating"});
    char id[32];
    std::snprintf(id, sizeof id, "c01-%06zu", i);
    CHECK(j["id"] == id);
    CHECK(j["catalog"] == 1);
    const int label = j["label"];
    CHECK(label >= 0);
    CHECK(label < 40);
    char category[32];
    std::snprintf(category, sizeof category, "k%02d", label);
    CHECK(j["category"] == category);
    const auto title_words = word_count(j["title"]);
    CHECK(title_words >= 3);
    CHECK(title_words <= 8);
    CHECK(word_count(j["description"]) >= 1);
    const double price = j["price"], rating = j["rating"];
    CHECK(price >= 0.5);
    CHECK(std::round(price * 100) / 100 == price);
    CHECK(rating >= 1.0);
    CHECK(rating <= 5.0);
    CHECK(std::round(rating * 10) / 10 == rating);
  }
}

TEST_CASE("the same options write the same bytes, another seed others", "[preprocess]") {
  temp_dir dir;
  const catalog_options opts{.catalogs = 2, .items_per_catalog = 300, .seed = 5};
  auto a = write_catalog((dir.path / "a").string(), opts);
  auto b = write_catalog((dir.path / "b").string(), opts);
  auto c = write_catalog((dir.path / "c").string(), {.catalogs = 2, .items_per_catalog = 300, .seed = 6});
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(c);
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(read_file((*a)[i]) == read_file((*b)[i]));
    CHECK(read_file((*a)[i]) != read_file((*c)[i]));
  }
  // A product depends on its id and the seed alone: a bigger catalog starts the same.
  auto more = generate_catalog({.catalogs = 9, .items_per_catalog = 400, .seed = 5}, 1);
  REQUIRE(more);
  CHECK(lines_of(read_file((*a)[1]))[299] == to_json_line((*more)[299]));
}

TEST_CASE("the first line of the default catalog is pinned", "[preprocess]") {
  // The same on every machine: a change here changes every benchmark's input.
  auto products = generate_catalog({.items_per_catalog = 1}, 0);
  REQUIRE(products);
  const auto line = to_json_line(products->at(0));
  CHECK(line.starts_with(R"({"id":"c00-000000","catalog":0,"category":"k03","label":3,)"
                         R"("title":"Feane Nache Dulai Mebi","description":"chudo tokea )"));
  CHECK(stable_hash64(line) == 0x31fbd96604add940ull);
}

TEST_CASE("categories follow Zipf's law and lengths do not follow frequency", "[preprocess]") {
  const catalog_options opts{.catalogs = 4, .items_per_catalog = 10'000};
  std::map<std::int32_t, std::size_t> count;
  std::map<std::int32_t, double> words;
  std::size_t n = 0;
  for (std::uint32_t c = 0; c < opts.catalogs; ++c) {
    auto products = generate_catalog(opts, c);
    REQUIRE(products);
    for (const auto& p : *products) {
      ++count[p.label];
      words[p.label] += static_cast<double>(word_count(p.description));
      ++n;
    }
  }
  double harmonic = 0;
  for (int k = 1; k <= 40; ++k) harmonic += std::pow(k, -1.1);
  for (int k : {0, 1, 2, 9}) {
    const double expected = static_cast<double>(n) * std::pow(k + 1, -1.1) / harmonic;
    CHECK(static_cast<double>(count[k]) == Approx(expected).epsilon(5 * std::sqrt(expected) / expected));
  }
  CHECK(count[0] > 20 * count[39]);

  // Each category's mean length is its rule's, within the ±25% uniform spread's noise.
  double shortest = 1e9, longest = 0;
  for (auto& [k, total] : words) {
    const auto rule = catalog_mean_words(static_cast<std::uint32_t>(k));
    if (count[k] >= 100) CHECK(total / static_cast<double>(count[k]) == Approx(rule).epsilon(0.05));
    shortest = std::min(shortest, rule);
    longest = std::max(longest, rule);
  }
  CHECK(shortest >= 8.0);
  CHECK(longest <= 400.0);
  CHECK(longest / shortest > 20);
  // Among the five most frequent categories, the longest descriptions are > 4× the shortest:
  // the heavy categories are not simply the cheap (or the dear) ones.
  double top_min = 1e9, top_max = 0;
  for (std::uint32_t k = 0; k < 5; ++k) {
    top_min = std::min(top_min, catalog_mean_words(k));
    top_max = std::max(top_max, catalog_mean_words(k));
  }
  CHECK(top_max / top_min > 4);
}

TEST_CASE("a product's words give its category away", "[preprocess]") {
  const auto& vocabulary = catalog_vocabulary();
  CHECK(vocabulary.size() == 4096);
  CHECK(std::set<std::string>(vocabulary.begin(), vocabulary.end()).size() == 4096);
  for (const auto& w : vocabulary) {
    CHECK(w.size() >= 2);
    CHECK(std::all_of(w.begin(), w.end(), [](char ch) { return ch >= 'a' && ch <= 'z'; }));
  }
  CHECK(catalog_category_words(0, 40).size() == 102);
  CHECK(catalog_category_words(40, 40).empty());

  auto products = generate_catalog({.catalogs = 1, .items_per_catalog = 2000}, 0);
  REQUIRE(products);
  double own = 0, all = 0;
  for (const auto& p : *products) {
    const auto slice = catalog_category_words(static_cast<std::uint32_t>(p.label), 40);
    const std::set<std::string> mine(slice.begin(), slice.end());
    std::istringstream in(p.description);
    for (std::string w; in >> w; ++all) own += mine.count(w) != 0 ? 1.0 : 0.0;
  }
  // Half the words come from the category's slice, and 1/40 of the rest land in it by chance.
  CHECK(own / all == Approx(0.5 + 0.5 / 40).margin(0.01));
}

TEST_CASE("catalog products become items", "[preprocess]") {
  auto items = generate_catalog_items({.catalogs = 2, .items_per_catalog = 10}, 1);
  auto products = generate_catalog({.catalogs = 2, .items_per_catalog = 10}, 1);
  REQUIRE(items);
  REQUIRE(products);
  REQUIRE(items->size() == 10);
  const auto& it = items->at(3);
  const auto& p = products->at(3);
  CHECK(it.key == "c01-000003");
  CHECK(it.label == p.label);
  CHECK(it.category == p.category);
  CHECK(it.text == p.title + "\n" + p.description);
  CHECK(it.values == std::vector<float>{static_cast<float>(p.price), static_cast<float>(p.rating)});
}

TEST_CASE("catalog options out of range are refused", "[preprocess]") {
  for (const catalog_options& bad :
       {catalog_options{.catalogs = 0}, catalog_options{.items_per_catalog = 0},
        catalog_options{.categories = 0}, catalog_options{.categories = 1001},
        catalog_options{.zipf_s = -1}, catalog_options{.zipf_s = std::nan("")}}) {
    auto r = generate_catalog(bad, 0);
    REQUIRE_FALSE(r);
    CHECK(r.error().code() == celer::error_code::invalid_argument);
    temp_dir dir;
    auto w = write_catalog(dir.path.string(), bad);
    REQUIRE_FALSE(w);
    CHECK(w.error().code() == celer::error_code::invalid_argument);
  }
}
