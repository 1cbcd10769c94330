// celer-bench-catalog: writes the synthetic product catalog the preprocessing benchmarks run
// on (celer::preprocess::write_catalog, actors/preprocess/README.md "Synthetic catalog") and
// reports what it holds and what writing it cost: files, bytes, seconds, MB/s; products per
// category (the Zipf skew) and words per description (the per-item cost), overall and for
// the largest and smallest categories.
//
//   build/bench/celer-bench-catalog [--smoke] [--dir DIR] [--catalogs N] [--items N]
//                                   [--categories N] [--zipf-s S] [--seed N] [--keep]
//
// The files are read back and every line is checked against generate_catalog (a mismatch
// prints "CHECK FAILED" and the program exits 1). Without --keep the folder is removed.
#include <celer/actors/preprocess/catalog.hpp>

#include <CLI/CLI.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace pp = celer::preprocess;
namespace fs = std::filesystem;

int main(int argc, char** argv) {
  pp::catalog_options opts;
  std::string dir;
  bool smoke = false, keep = false;
  CLI::App app{"celer-bench-catalog: writes the synthetic skewed product catalog and measures it"};
  app.add_flag("--smoke", smoke, "3 catalogs of 500 products");
  app.add_option("--dir", dir, "where to write (default: a new folder under the temp dir)");
  app.add_option("--catalogs", opts.catalogs, "catalog files (default 55)");
  app.add_option("--items", opts.items_per_catalog, "products per catalog (default 15000)");
  app.add_option("--categories", opts.categories, "categories (default 40)");
  app.add_option("--zipf-s", opts.zipf_s, "Zipf exponent of the category sizes (default 1.1)");
  app.add_option("--seed", opts.seed, "seed (default 1)");
  app.add_flag("--keep", keep, "keep the files");
  CLI11_PARSE(app, argc, argv);
  if (smoke) {
    opts.catalogs = 3;
    opts.items_per_catalog = 500;
  }
  if (dir.empty()) {
    dir = (fs::temp_directory_path() / ("celer-bench-catalog-" + std::to_string(::getpid()))).string();
  }

  const auto start = std::chrono::steady_clock::now();
  auto files = pp::write_catalog(dir, opts);
  const double seconds =
    std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!files) {
    std::fprintf(stderr, "write_catalog: %s\n", files.error().to_string().c_str());
    return 1;
  }

  std::uint64_t bytes = 0, products = 0, words = 0;
  std::map<std::int32_t, std::uint64_t> count, category_words;
  int failures = 0;
  for (std::uint32_t c = 0; c < opts.catalogs; ++c) {
    const auto& path = (*files)[c];
    bytes += fs::file_size(path);
    auto expected = pp::generate_catalog(opts, c);
    if (!expected) return 1;
    std::ifstream in(path);
    std::string line;
    for (const auto& p : *expected) {
      if (!std::getline(in, line) || line != pp::to_json_line(p)) {
        if (failures++ < 3) std::printf("CHECK FAILED: %s line of %s\n", p.id.c_str(), path.c_str());
      }
      const auto n = static_cast<std::uint64_t>(std::count(p.description.begin(), p.description.end(), ' ') + 1);
      ++count[p.label];
      category_words[p.label] += n;
      words += n;
      ++products;
    }
  }
  if (!keep) fs::remove_all(dir);

  auto row = [](const char* name, double value, const char* unit) {
    std::printf("%-34s %14.3f %s\n", name, value, unit);
  };
  std::printf("%u catalogs x %u products, %u categories, zipf_s %.2f, seed %llu\n", opts.catalogs,
              opts.items_per_catalog, opts.categories, opts.zipf_s,
              static_cast<unsigned long long>(opts.seed));
  row("bytes", static_cast<double>(bytes), "B");
  row("write_seconds", seconds, "s");
  row("write_throughput", static_cast<double>(bytes) / seconds / 1e6, "MB/s");
  row("products_per_second", static_cast<double>(products) / seconds, "1/s");
  row("mean_bytes_per_product", static_cast<double>(bytes) / static_cast<double>(products), "B");
  row("mean_words_per_description", static_cast<double>(words) / static_cast<double>(products), "words");
  std::printf("%-8s %10s %8s %12s %12s\n", "category", "products", "share", "mean_words", "words_share");
  for (auto& [k, n] : count) {
    const bool shown = k < 5 || k >= static_cast<std::int32_t>(opts.categories) - 3;
    if (!shown) continue;
    std::printf("k%02d      %10llu %8.4f %12.1f %12.4f\n", k, static_cast<unsigned long long>(n),
                static_cast<double>(n) / static_cast<double>(products),
                static_cast<double>(category_words[k]) / static_cast<double>(n),
                static_cast<double>(category_words[k]) / static_cast<double>(words));
  }
  const auto [smallest, largest] = std::minmax_element(
    count.begin(), count.end(), [](auto& a, auto& b) { return a.second < b.second; });
  std::printf("largest_category k%02d %llu, smallest k%02d %llu, ratio %.1f\n", largest->first,
              static_cast<unsigned long long>(largest->second), smallest->first,
              static_cast<unsigned long long>(smallest->second),
              static_cast<double>(largest->second) / static_cast<double>(smallest->second));
  return failures == 0 ? 0 : 1;
}
