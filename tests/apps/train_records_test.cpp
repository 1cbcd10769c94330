// celer-train on celer-preprocess's output (apps/train/README.md, "Preprocessed records"): the
// UCI digits written as f32:64 records with a manifest, then the real binary (CELER_TRAIN)
// trained on `data: records:<dir>`. Each run is 40 steps of the digits MLP, about a second.
#include <catch2/catch.hpp>

#include "train_harness.hpp"

#include <celer/actors/data.hpp>
#include <celer/actors/preprocess/item.hpp>
#include <celer/actors/preprocess/manifest.hpp>

#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

using namespace celer_train_test;
namespace fs = std::filesystem;
namespace pp = celer::preprocess;
using Catch::Matchers::Contains;
using json = nlohmann::json;

/// The shipped digits as a celer-preprocess output in `dir`: two shards of f32:64 records,
/// in the digits' own order, keyed "digits:<row>".
void write_digits_records(const fs::path& dir) {
  auto digits = celer::actors::load_digits();
  REQUIRE(digits);
  pp::manifest m{.schema = "f32:64", .classes = 10, .config_hash = "d161d5d161d5d161"};
  pp::key_digest keys;
  const std::size_t half = digits->size() / 2;
  for (std::size_t shard = 0; shard < 2; ++shard) {
    const std::string file = "shard-0000" + std::to_string(shard) + ".rec";
    auto w = pp::record_writer::create((dir / file).string(), m.schema);
    REQUIRE(w);
    for (std::size_t i = shard * half; i < (shard == 0 ? half : digits->size()); ++i) {
      std::string payload(64 * sizeof(float), '\0');
      std::memcpy(payload.data(), digits->x.data() + i * 64, payload.size());  // little-endian hosts
      const std::string key = "digits:" + std::to_string(i);
      REQUIRE(w->append(key, static_cast<std::int32_t>(digits->y[i]), payload));
      keys.add(key);
    }
    const auto records = w->count();  // count() is the records appended until finish()
    REQUIRE(w->finish());
    m.shards.push_back({.file = file, .records = records, .bytes = w->bytes()});
  }
  m.items = keys.count;
  m.key_checksum = keys.hex();
  REQUIRE(pp::write_manifest(dir.string(), m));
  REQUIRE(pp::verify_output(dir.string()));
}

} // namespace

TEST_CASE("celer-train learns the digits from a records directory as from the shipped digits", "[train]") {
  scratch_dir s;
  write_digits_records(s.dir / "digits-rec");
  // The shipped config with `data: records:<dir>`, a relative directory: celer-train makes it
  // absolute for the workers.
  std::string yaml = slurp(digits_config);
  const auto at = yaml.find("\ndata: digits");
  REQUIRE(at != std::string::npos);
  yaml.replace(at, std::strlen("\ndata: digits"), "\ndata: records:digits-rec");
  std::ofstream(s.dir / "rec.yaml") << yaml;
  std::string out;
  REQUIRE(run_celer_train(s.dir, "--config rec.yaml --name rec --max-steps 40 --eval-every 20", out) == 0);
  INFO(out);
  // The same stratified split as the digits' (the records hold them in the same order).
  CHECK_THAT(out, Contains("1438 training and 359 validation samples"));
  const auto summary = json::parse(slurp(s.dir / "celer_results/rec/summary.json"));
  CHECK(summary.at("final_val_accuracy").get<double>() > 0.5);  // chance is 0.1
  CHECK(summary.at("replicas_equal") == true);
  CHECK(json::parse(slurp(s.dir / "celer_results/rec/run.json")).at("data") ==
        "records:" + (fs::canonical(s.dir) / "digits-rec").string());
  // The same floats, labels and order as data: digits, so the same weights at the end.
  std::string digits_out;
  REQUIRE(run_celer_train(s.dir, "--config " + digits_config + " --name dig --max-steps 40 --eval-every 20",
                          digits_out) == 0);
  const auto digits_summary = json::parse(slurp(s.dir / "celer_results/dig/summary.json"));
  CHECK(digits_summary.at("parameters_digests")[0] == summary.at("parameters_digests")[0]);
}

TEST_CASE("celer-train exits 2 before any worker starts for a records directory it cannot use", "[train]") {
  scratch_dir s;
  write_digits_records(s.dir / "digits-rec");
  std::string out;
  // No such directory.
  CHECK(run_celer_train(s.dir, "--data records:nowhere --name a", out) == 2);
  CHECK_THAT(out, Contains("nowhere does not exist"));
  CHECK_FALSE(fs::exists(s.dir / "celer_results/a/run.json"));
  // records: with no directory, from a flag and from YAML.
  CHECK(run_celer_train(s.dir, "--data records: --name b", out) == 2);
  CHECK_THAT(out, Contains("records:<dir>"));
  std::ofstream(s.dir / "empty.yaml") << "data: \"records:\"\n";
  CHECK(run_celer_train(s.dir, "--config empty.yaml --name b", out) == 2);
  CHECK_THAT(out, Contains("key 'data'"));
  // Samples a CNN cannot read (2x32: neither CxHxW nor a flat square), and token records.
  const auto small = [&](const std::string& name, const std::string& schema, std::size_t bytes) {
    pp::manifest m{.schema = schema, .classes = 2, .config_hash = "0000000000000000"};
    pp::key_digest keys;
    auto w = pp::record_writer::create((s.dir / name / "shard-00000.rec").string(), schema);
    REQUIRE(w);
    for (int i = 0; i < 10; ++i) {
      REQUIRE(w->append(std::to_string(i), i % 2, std::string(bytes, '\0')));
      keys.add(std::to_string(i));
    }
    REQUIRE(w->finish());
    m.shards.push_back({.file = "shard-00000.rec", .records = 10, .bytes = w->bytes()});
    m.items = keys.count;
    m.key_checksum = keys.hex();
    REQUIRE(pp::write_manifest((s.dir / name).string(), m));
  };
  small("wide", "f32:2x32", 256);
  CHECK(run_celer_train(s.dir, "--data records:wide --model cnn --name w", out) == 2);
  CHECK_THAT(out, Contains("key 'model' is 'cnn'") && Contains("2x32"));
  small("tiny", "u8:1x2x2", 4);  // the shipped depth, 2 conv blocks, halves 2x2 to nothing
  CHECK(run_celer_train(s.dir, "--data records:tiny --model cnn --name y", out) == 2);
  CHECK_THAT(out, Contains("key 'depth' is 2"));
  small("tokens", "u32:tokens", 16);
  CHECK(run_celer_train(s.dir, "--data records:tokens --name t", out) == 2);
  CHECK_THAT(out, Contains("\"u32:tokens\"") && Contains("f32:SHAPE or u8:SHAPE"));
  // A manifest that lies about a shard's count.
  {
    auto j = json::parse(slurp(s.dir / "digits-rec/manifest.json"));
    j["shards"][1]["records"] = j["shards"][1]["records"].get<int>() + 1;
    j["items"] = j["items"].get<int>() + 1;
    std::ofstream(s.dir / "digits-rec/manifest.json") << j.dump();
  }
  CHECK(run_celer_train(s.dir, "--data records:digits-rec --name c", out) == 2);
  CHECK_THAT(out, Contains("shard-00001.rec") && Contains("record count is 899, its manifest says 900"));
  // A manifest that is not one.
  std::ofstream(s.dir / "digits-rec/manifest.json") << "{\"format\": \"CELERRC1\", \"version\": 1}";
  CHECK(run_celer_train(s.dir, "--data records:digits-rec --name d", out) == 2);
  CHECK_THAT(out, Contains("field 'schema' is missing"));
  CHECK_FALSE(fs::exists(s.dir / "celer_results/d/run.json"));
}
