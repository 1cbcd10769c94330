#include <celer/actors/preprocess/executor.hpp>
#include <celer/actors/preprocess/manifest.hpp>
#include <celer/actors/preprocess/pipeline.hpp>
#include <celer/actors/preprocess/records.hpp>
#include <celer/celer.hpp>

#include "checkpoint_fixtures.hpp"  // temp_dir

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace pp = celer::preprocess;
namespace fs = std::filesystem;

namespace {

/// The checkpoint tests' temp_dir, with a path joiner for file names.
struct temp_dir : checkpoint_test::temp_dir {
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

/// A JSON Lines catalog of `n` products: 3 categories of unequal size and text length.
std::string write_products(const temp_dir& dir, const std::string& name, int n) {
  std::ofstream out(dir / name);
  const auto id = name.substr(0, name.find('.'));
  for (int i = 0; i < n; ++i) {
    const int label = i % 7 == 0 ? 2 : i % 3 == 0 ? 1 : 0;
    out << R"({"id":")" << id << i << R"(","label":)" << label << R"(,"category":"k)" << label
        << R"(","title":"Red   SHOE no )" << i << R"(","description":")";
    for (int w = 0; w < 3 + label * 20; ++w) out << (w % 2 ? "Lace " : "sole ");
    out << R"(","price":)" << (10.0 + i % 50) << R"(,"rating":)" << (1.0 + (i % 5)) << "}\n";
    if (i % 17 == 0) out << "\n";  // blank lines are skipped
  }
  return dir / name;
}

pp::pipeline products_pipeline(std::vector<std::string> paths) {
  pp::pipeline p;
  p.input = {.format = pp::input_format::jsonl,
             .paths = std::move(paths),
             .fields = {.key = "id", .label = "label", .category = "category",
                        .text = {"title", "description"}, .values = {"price", "rating"}},
             .block_items = 64};
  p.stage("lowercase").stage("tokenize").stage("normalize", {{"mode", "zscore"}})
    .stage("hash_features", {{"dims", "16"}});
  p.output = {.field = "values", .shards = 4, .shard_by = "category"};
  return p;
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct scoped_runtime {
  scoped_runtime() { celer::init({.num_cpus = 3}); }
  ~scoped_runtime() { celer::shutdown(); }
};

} // namespace

TEST_CASE("a pipeline is checked stage by stage, naming the stage and the parameter",
          "[preprocess]") {
  pp::pipeline p = products_pipeline({"x.jsonl"});
  CHECK(p.validate());
  p.stage("normalise");
  auto bad = p.validate();
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message().find("stage 5 (normalise): unknown stage 'normalise'") != std::string::npos);
  p.stages.back() = {"hash_features", {{"dims", "0"}}};
  bad = p.validate();
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message().find("dims is '0'") != std::string::npos);
  p.stages.back() = {"lowercase", {{"mode", "fast"}}};
  bad = p.validate();
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message().find("unknown parameter 'mode'") != std::string::npos);
  p.stages.pop_back();
  p.output.shard_by = "random";
  CHECK_FALSE(p.validate());
}

TEST_CASE("a fitted stage cuts the run into passes, and the local run normalises by all items",
          "[preprocess]") {
  temp_dir dir;
  const auto path = write_products(dir, "a.jsonl", 300);
  const auto p = products_pipeline({path});
  auto r = pp::runner::make(p);
  REQUIRE(r);
  CHECK(r->passes() == 2);
  auto splits = pp::plan_splits(p.input);
  REQUIRE(splits);
  CHECK(splits->size() == 5);  // 300 items, 64 a block
  CHECK((*splits)[1].first_row == 64);
  auto items = pp::run_local(p);
  REQUIRE(items);
  REQUIRE(items->size() == 300);
  const auto& first = items->at(1);  // label 0: a description of 3 words
  CHECK(first.key == "a1");
  CHECK(first.text == "red shoe no 1 sole lace sole");
  REQUIRE(first.values.size() == 18);  // 16 word buckets, then price and rating
  double sum = 0, sq = 0, words = 0;
  for (const auto& it : *items) {
    sum += it.values[16];
    sq += it.values[16] * it.values[16];
  }
  for (int b = 0; b < 16; ++b) words += first.values[static_cast<std::size_t>(b)];
  CHECK(words == 7);
  CHECK(std::abs(sum / 300) < 1e-5);
  CHECK(std::abs(sq / 300 - 1) < 1e-4);
}

TEST_CASE("a bad row stops the run with the file and row", "[preprocess]") {
  temp_dir dir;
  {
    std::ofstream out(dir / "bad.jsonl");
    out << R"({"id":"a","label":0,"title":"x","description":"y","price":1,"rating":2,"category":"c"})" << "\n";
    out << R"({"id":"b","label":0,"title":"x","description":"y","price":"cheap","rating":2,"category":"c"})" << "\n";
  }
  auto items = pp::run_local(products_pipeline({dir / "bad.jsonl"}));
  REQUIRE_FALSE(items);
  CHECK(items.error().code() == celer::error_code::invalid_argument);
  CHECK(items.error().message().find("bad.jsonl") != std::string::npos);
  CHECK(items.error().message().find("price") != std::string::npos);
  // The workers stop the run the same way, and leave no shard or manifest behind.
  scoped_runtime rt;
  auto run = pp::run_pipeline(products_pipeline({dir / "bad.jsonl"}), {.output_dir = dir / "out"});
  REQUIRE_FALSE(run);
  CHECK(run.error().code() == celer::error_code::invalid_argument);
  CHECK(run.error().message().find("bad.jsonl line 2") != std::string::npos);
  for (const auto& f : fs::directory_iterator(dir.path / "out"))
    CHECK(f.path().extension() != ".rec");
  CHECK_FALSE(fs::exists(dir.path / "out" / "manifest.json"));
}

TEST_CASE("the workers' output is the same, bit for bit, under every scheduling policy and from "
          "the cache", "[preprocess]") {
  temp_dir dir;
  const auto a = write_products(dir, "a.jsonl", 700);
  const auto b = write_products(dir, "b.jsonl", 260);
  const auto p = products_pipeline({a, b});
  auto local = pp::run_local(p);
  REQUIRE(local);
  pp::key_digest expected_keys;
  for (const auto& it : *local) expected_keys.add(it.key);

  scoped_runtime rt;
  std::map<std::string, std::string> first_bytes;
  for (auto policy : {pp::queue_policy::fixed, pp::queue_policy::steal, pp::queue_policy::reshard}) {
    const auto out = dir / ("out-" + std::string(pp::queue_policy_name(policy)));
    auto result = pp::run_pipeline(p, {.output_dir = out, .workers = 3,
                                       .queue = {.policy = policy, .reshard_every = 2},
                                       .cache_dir = dir / "cache"});
    REQUIRE(result);
    CHECK(result->items == 960);
    CHECK(result->items_in == 960);
    CHECK(result->keys == expected_keys);
    CHECK(result->passes.size() == 2);
    CHECK(result->schema == "f32:18");
    CHECK(result->shard_files.size() == 4);
    // Each label in turn over the shards: at most one record from a fair share each.
    CHECK(result->worst_category_skew < 0.05);
    REQUIRE(pp::verify_output(out));
    auto m = pp::read_manifest(out);
    REQUIRE(m);
    CHECK(m->items == 960);
    CHECK(m->key_checksum == expected_keys.hex());
    CHECK(m->classes == 3);
    for (const auto& f : result->shard_files) {
      const auto bytes = file_bytes(out + "/" + f);
      if (first_bytes.count(f) == 0) first_bytes[f] = bytes;
      else CHECK(bytes == first_bytes[f]);
    }
    // The first run reads its second pass's items from the cache (16 blocks); later runs
    // read every block of both passes from it.
    CHECK(result->cache_hits == (policy == pp::queue_policy::fixed ? 16u : 32u));
  }
  // Every category is spread over the shards in proportion (each label in turn).
  auto reader = pp::record_reader::open(dir / "out-fixed" + "/" + "shard-00000-of-00004.rec");
  REQUIRE(reader);
  std::map<std::int32_t, int> labels;
  while (true) {
    auto rec = reader->next();
    REQUIRE(rec);
    if (!*rec) break;
    ++labels[(*rec)->label];
  }
  CHECK(labels.size() == 3);
}

TEST_CASE("stratified sampling and rebalancing keep their counts when run by the workers",
          "[preprocess]") {
  temp_dir dir;
  const auto a = write_products(dir, "a.jsonl", 400);
  auto p = products_pipeline({a});
  p.stages = {{"sample", {{"fraction", "0.25"}, {"seed", "3"}}}, {"rebalance", {{"mode", "oversample"}}}};
  p.output = {.field = "text", .shards = 2, .shard_by = "key"};
  auto local = pp::run_local(p);
  REQUIRE(local);
  std::map<std::int32_t, int> per_label;
  std::map<std::string, int> keys;
  for (const auto& it : *local) ++per_label[it.label], ++keys[it.key];
  REQUIRE(per_label.size() == 3);
  const int most = per_label.begin()->second;
  for (const auto& [l, n] : per_label) CHECK(n == most);  // every class as large as the largest
  for (const auto& [k, n] : keys) CHECK(n == 1);          // copies have their own keys
  scoped_runtime rt;
  auto result = pp::run_pipeline(p, {.output_dir = dir / "out", .workers = 2});
  REQUIRE(result);
  CHECK(result->items == local->size());
  CHECK(result->passes.size() == 3);
  pp::key_digest d;
  for (const auto& it : *local) d.add(it.key);
  CHECK(result->keys == d);
}
