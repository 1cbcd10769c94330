// celer-preprocess's output directory (manifest.hpp, actors/preprocess/README.md "The output
// directory"): real shard files and a manifest in a temporary folder, read back, verified,
// damaged; and the trainers' load_records over it (data.hpp).
#include <celer/actors/data.hpp>
#include <celer/actors/preprocess/item.hpp>
#include <celer/actors/preprocess/manifest.hpp>

#include "checkpoint_fixtures.hpp"  // temp_dir, read_file, write_file

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

using namespace celer::preprocess;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

using celer::error_code;
using checkpoint_test::read_file;
using checkpoint_test::temp_dir;
using checkpoint_test::write_file;

/// REQUIRE(ok), showing the error's message when it is not.
void require_ok(const celer::expected<void>& ok) {
  INFO((ok ? std::string() : ok.error().to_string()));
  REQUIRE(ok);
}

/// One sample as the tests write it: a key, a label and its values (f32) or bytes (u8).
struct sample {
  std::string key;
  std::int32_t label = 0;
  std::string payload;
};

std::string f32_bytes(const std::vector<float>& v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), v.data(), s.size());  // the tests run on little-endian machines
  return s;
}

/// `n` samples of `values` floats each: sample i's value j is i + j / 100, label i % classes.
std::vector<sample> f32_samples(std::size_t n, std::size_t values, int classes) {
  std::vector<sample> out;
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<float> v(values);
    for (std::size_t j = 0; j < values; ++j) v[j] = static_cast<float>(i) + static_cast<float>(j) / 100.0f;
    out.push_back({"item/" + std::to_string(i), static_cast<std::int32_t>(i % classes), f32_bytes(v)});
  }
  return out;
}

/// Writes `samples` to `shards` shard files (dealt in order: the first n/shards to shard 0)
/// and the manifest; returns the manifest written.
manifest write_output(const fs::path& dir, const std::string& schema, int classes, const std::vector<sample>& samples,
                      std::size_t shards = 3) {
  manifest m{.schema = schema, .classes = classes, .config_hash = "00c0ffee00c0ffee"};
  key_digest keys;
  const std::size_t per = (samples.size() + shards - 1) / shards;
  for (std::size_t s = 0; s < shards; ++s) {
    char name[32];
    std::snprintf(name, sizeof name, "shard-%05zu.rec", s);
    auto w = record_writer::create((dir / name).string(), schema);
    REQUIRE(w);
    for (std::size_t i = s * per; i < std::min(samples.size(), (s + 1) * per); ++i) {
      REQUIRE(w->append(samples[i].key, samples[i].label, samples[i].payload));
      keys.add(samples[i].key);
    }
    const auto records = w->count();  // count() is the records appended until finish()
    require_ok(w->finish());
    m.shards.push_back({.file = name, .records = records, .bytes = w->bytes()});
  }
  m.items = keys.count;
  m.key_checksum = keys.hex();
  require_ok(write_manifest(dir.string(), m));
  return m;
}

/// Rewrites one field of `dir`'s manifest.json as JSON text (bypassing write_manifest's checks).
void edit_manifest(const fs::path& dir, const std::function<void(nlohmann::json&)>& edit) {
  auto j = nlohmann::json::parse(read_file(dir / "manifest.json"));
  edit(j);
  write_file(dir / "manifest.json", j.dump(2));
}

} // namespace

TEST_CASE("an output directory's manifest reads back as written and the directory verifies", "[preprocess]") {
  temp_dir tmp;
  const auto dir = tmp.path / "out";
  auto m = write_output(dir, "f32:2x3", 4, f32_samples(10, 6, 4));
  m.label_names = {"a", "b", "c", "d"};
  require_ok(write_manifest(dir.string(), m));
  CHECK_FALSE(fs::exists(dir / "manifest.json.part"));

  auto back = read_manifest(dir.string());
  REQUIRE(back);
  CHECK(back->schema == "f32:2x3");
  CHECK(back->sample_shape == std::vector<std::int64_t>{2, 3});  // filled from the schema
  CHECK(back->classes == 4);
  CHECK(back->label_names == m.label_names);
  CHECK(back->items == 10);
  CHECK(back->shards.size() == 3);
  CHECK(back->shards[0] == shard_entry{.file = "shard-00000.rec", .records = 4, .bytes = m.shards[0].bytes});
  CHECK(back->shards[2].records == 2);
  CHECK(back->key_checksum == m.key_checksum);
  m.sample_shape = {2, 3};
  CHECK(*back == m);

  // The JSON a person (or Python) reads: the format, the version and every field by name.
  const auto j = nlohmann::json::parse(read_file(dir / "manifest.json"));
  CHECK(j.at("format") == "CELERRC1");
  CHECK(j.at("version") == 1);
  CHECK(j.at("sample_shape") == nlohmann::json::array({2, 3}));
  CHECK(j.at("shards")[1].at("file") == "shard-00001.rec");

  const auto ok = verify_output(dir.string());
  INFO((ok ? std::string() : ok.error().message()));
  CHECK(ok);
}

TEST_CASE("schemas parse to their shapes and payload sizes, and bad ones are refused", "[preprocess]") {
  CHECK(*parse_schema_shape("f32:64") == std::vector<std::int64_t>{64});
  CHECK(*parse_schema_shape("f32:1x28x28") == std::vector<std::int64_t>{1, 28, 28});
  CHECK(*parse_schema_shape("u8:1x28x28") == std::vector<std::int64_t>{1, 28, 28});
  CHECK(parse_schema_shape("u32:tokens")->empty());
  CHECK(parse_schema_shape("text")->empty());
  CHECK(*schema_payload_bytes("f32:8x8") == 256);
  CHECK(*schema_payload_bytes("u8:1x28x28") == 784);
  CHECK(*schema_payload_bytes("text") == 0);
  for (const char* bad : {"", "f32", "f32:", "f32:0", "f32:-3", "f32:2x", "f32:x2", "f32:2xx2", "f64:3", "u8:28 x28",
                          "image:u8:28x28+label", "f32:65536x65536", "u8:1x1x1x1x1x1x1x1x1"}) {
    INFO(bad);
    auto s = parse_schema_shape(bad);
    REQUIRE_FALSE(s);
    CHECK(s.error().code() == error_code::invalid_argument);
  }
  CHECK_THAT(parse_schema_shape("f64:3").error().message(), Contains("f32:SHAPE"));
}

TEST_CASE("a bad manifest is refused with the field it gets wrong", "[preprocess]") {
  temp_dir tmp;
  const auto dir = tmp.path / "out";
  write_output(dir, "u8:2x2", 3, {{"a", 0, "abcd"}, {"b", 1, "efgh"}, {"c", 2, "ijkl"}});
  const std::string saved = read_file(dir / "manifest.json");
  struct bad_case {
    std::function<void(nlohmann::json&)> edit;
    error_code code;
    std::string says;
  };
  const std::vector<bad_case> cases = {
    {[](auto& j) { j["schema"] = "u8:2y2"; }, error_code::invalid_argument, "field 'schema'"},
    {[](auto& j) { j["schema"] = 7; }, error_code::invalid_argument, "field 'schema' must be a string"},
    {[](auto& j) { j.erase("classes"); }, error_code::invalid_argument, "field 'classes' is missing"},
    {[](auto& j) { j["classes"] = -1; }, error_code::invalid_argument, "field 'classes'"},
    {[](auto& j) { j["items"] = 4; }, error_code::invalid_argument, "field 'items' is 4 but the shards' records add up to 3"},
    {[](auto& j) { j["key_checksum"] = "xyz"; }, error_code::invalid_argument, "field 'key_checksum'"},
    {[](auto& j) { j["config_hash"] = "0123456789ABCDEF"; }, error_code::invalid_argument, "field 'config_hash'"},
    {[](auto& j) { j["label_names"] = {"one"}; }, error_code::invalid_argument, "field 'label_names'"},
    {[](auto& j) { j["sample_shape"] = {4}; }, error_code::invalid_argument, "field 'sample_shape'"},
    {[](auto& j) { j["shards"][0]["file"] = "../elsewhere.rec"; }, error_code::invalid_argument, "field 'shards[0].file'"},
    {[](auto& j) { j["shards"][0]["file"] = "/tmp/x.rec"; }, error_code::invalid_argument, "field 'shards[0].file'"},
    {[](auto& j) { j["shards"][1]["file"] = j["shards"][0]["file"]; }, error_code::invalid_argument, "listed twice"},
    {[](auto& j) { j["shards"][2]["records"] = "1"; }, error_code::invalid_argument, "field 'shards[2].records' must be an integer"},
    {[](auto& j) { j["shards"][2].erase("bytes"); }, error_code::invalid_argument, "field 'shards[2].bytes' is missing"},
    {[](auto& j) { j["format"] = "CELERRC2"; }, error_code::invalid_argument, "field 'format'"},
    {[](auto& j) { j["version"] = 2; }, error_code::failed_precondition, "field 'version' is 2"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    INFO("case " << i << ": " << cases[i].says);
    write_file(dir / "manifest.json", saved);
    edit_manifest(dir, cases[i].edit);
    auto m = read_manifest(dir.string());
    REQUIRE_FALSE(m);
    CHECK(m.error().code() == cases[i].code);
    CHECK_THAT(m.error().message(), Contains(cases[i].says) && Contains("manifest.json"));
    CHECK_FALSE(verify_output(dir.string()));
  }
  // Not JSON at all (a torn write would be, without the .part and rename).
  write_file(dir / "manifest.json", saved.substr(0, saved.size() / 2));
  CHECK(read_manifest(dir.string()).error().code() == error_code::data_loss);
  // No manifest: not an output directory, or an unfinished run; no directory at all.
  fs::remove(dir / "manifest.json");
  CHECK(read_manifest(dir.string()).error().code() == error_code::not_found);
  CHECK_THAT(read_manifest(dir.string()).error().message(), Contains("has not finished"));
  CHECK(read_manifest((tmp.path / "nowhere").string()).error().code() == error_code::not_found);
  // write_manifest refuses what read_manifest would, and writes nothing.
  manifest bad{.schema = "f32:8", .items = 1, .key_checksum = "0123456789abcdef", .config_hash = "0123456789abcdef"};
  auto w = write_manifest(dir.string(), bad);
  REQUIRE_FALSE(w);
  CHECK_THAT(w.error().message(), Contains("field 'items' is 1"));
  CHECK_FALSE(fs::exists(dir / "manifest.json"));
}

TEST_CASE("verify_output finds a changed byte, a missing shard, a wrong count and a wrong key checksum",
          "[preprocess]") {
  temp_dir tmp;
  const auto dir = tmp.path / "out";
  const auto m = write_output(dir, "f32:4", 2, f32_samples(12, 4, 2));
  const auto shard1 = dir / "shard-00001.rec";
  const std::string good = read_file(shard1);
  const std::string manifest_text = read_file(dir / "manifest.json");
  REQUIRE(verify_output(dir.string()));

  SECTION("a changed byte in a shard's payload is data_loss naming the shard") {
    std::string bad = good;
    bad[bad.size() - 32 - 8 * 4 - 3] ^= 0x01;  // inside the last record's payload
    write_file(shard1, bad);
    auto v = verify_output(dir.string());
    REQUIRE_FALSE(v);
    CHECK(v.error().code() == error_code::data_loss);
    CHECK_THAT(v.error().message(), Contains("shard-00001.rec") && Contains("checksum mismatch"));
  }
  SECTION("a missing shard is not_found naming it") {
    fs::remove(shard1);
    auto v = verify_output(dir.string());
    REQUIRE_FALSE(v);
    CHECK(v.error().code() == error_code::not_found);
    CHECK_THAT(v.error().message(), Contains("shard-00001.rec") && Contains("shards[1]") && Contains("missing"));
  }
  SECTION("a manifest's count that is not the file's is data_loss naming both") {
    edit_manifest(dir, [](auto& j) {
      j["shards"][1]["records"] = 5;
      j["items"] = 13;
    });
    auto v = verify_output(dir.string());
    REQUIRE_FALSE(v);
    CHECK(v.error().code() == error_code::data_loss);
    CHECK_THAT(v.error().message(), Contains("shard-00001.rec") && Contains("record count is 4, its manifest says 5"));
  }
  SECTION("a wrong size in the manifest is data_loss") {
    edit_manifest(dir, [&](auto& j) { j["shards"][1]["bytes"] = m.shards[1].bytes + 8; });
    auto v = verify_output(dir.string());
    REQUIRE_FALSE(v);
    CHECK(v.error().code() == error_code::data_loss);
    CHECK_THAT(v.error().message(), Contains("size is " + std::to_string(m.shards[1].bytes)));
  }
  SECTION("a wrong key checksum is data_loss") {
    edit_manifest(dir, [](auto& j) { j["key_checksum"] = "0123456789abcdef"; });
    auto v = verify_output(dir.string());
    REQUIRE_FALSE(v);
    CHECK(v.error().code() == error_code::data_loss);
    CHECK_THAT(v.error().message(), Contains("key checksum") && Contains(m.key_checksum) && Contains("0123456789abcdef"));
  }
  SECTION("a shard of another schema than the manifest's is data_loss") {
    auto w = record_writer::create(shard1.string(), "f32:2x2");
    REQUIRE(w);
    for (const auto& s : f32_samples(12, 4, 2)) {
      if (w->count() < 4) REQUIRE(w->append(s.key, s.label, s.payload));
    }
    require_ok(w->finish());
    auto v = verify_output(dir.string());
    REQUIRE_FALSE(v);
    CHECK(v.error().code() == error_code::data_loss);
    CHECK_THAT(v.error().message(), Contains("schema is \"f32:2x2\", its manifest says \"f32:4\""));
  }
  SECTION("a bad schema in the manifest is invalid_argument naming the field") {
    edit_manifest(dir, [](auto& j) { j["schema"] = "float:4"; });
    auto v = verify_output(dir.string());
    REQUIRE_FALSE(v);
    CHECK(v.error().code() == error_code::invalid_argument);
    CHECK_THAT(v.error().message(), Contains("field 'schema' is \"float:4\""));
  }
}

TEST_CASE("verify_output refuses a payload of the wrong size and a label outside the classes", "[preprocess]") {
  temp_dir tmp;
  SECTION("payload") {
    const auto dir = tmp.path / "size";
    write_output(dir, "u8:2x2", 3, {{"a", 0, "abcd"}, {"b", 1, "efg"}, {"c", 2, "ijkl"}}, 1);
    auto v = verify_output(dir.string());
    REQUIRE_FALSE(v);
    CHECK(v.error().code() == error_code::invalid_argument);
    CHECK_THAT(v.error().message(), Contains("shard-00000.rec: record 1 has a payload of 3 bytes"));
  }
  SECTION("label") {
    const auto dir = tmp.path / "label";
    write_output(dir, "u8:2x2", 3, {{"a", 0, "abcd"}, {"b", 3, "efgh"}}, 1);
    auto v = verify_output(dir.string());
    REQUIRE_FALSE(v);
    CHECK(v.error().code() == error_code::invalid_argument);
    CHECK_THAT(v.error().message(), Contains("record 1 has label 3, outside [0, 3)"));
  }
}

TEST_CASE("load_records reads f32 records as they are and u8 records scaled, in shard and file order",
          "[preprocess]") {
  temp_dir tmp;
  SECTION("f32") {
    const auto dir = tmp.path / "digits-like";
    write_output(dir, "f32:1x2x3", 3, f32_samples(10, 6, 3));
    auto d = celer::actors::load_records(dir.string());
    REQUIRE(d);
    CHECK(d->name == "digits-like");
    CHECK(d->sample_shape == std::vector<std::int64_t>{1, 2, 3});
    CHECK(d->classes == 3);
    REQUIRE(d->size() == 10);
    REQUIRE(d->x.size() == 60);
    for (std::size_t i = 0; i < 10; ++i) {
      CHECK(d->y[i] == static_cast<std::int64_t>(i % 3));
      CHECK(d->x[i * 6 + 5] == static_cast<float>(i) + 0.05f);
    }
    // limit keeps the first samples; "records:<dir>" (with a trailing slash) is the same.
    auto first = celer::actors::load_dataset("records:" + dir.string() + "/", 4);
    REQUIRE(first);
    CHECK(first->name == "digits-like");
    CHECK(first->size() == 4);
    CHECK(std::vector<float>(d->x.begin(), d->x.begin() + 24) == first->x);
  }
  SECTION("u8") {
    const auto dir = tmp.path / "pixels";
    write_output(dir, "u8:1x2x2", 2, {{"a", 1, std::string("\x00\xff\x80\x01", 4)}, {"b", 0, "abcd"}}, 2);
    auto d = celer::actors::load_records(dir.string());
    REQUIRE(d);
    CHECK(d->sample_shape == std::vector<std::int64_t>{1, 2, 2});
    CHECK(d->y == std::vector<std::int64_t>{1, 0});
    CHECK(d->x[0] == 0.0f);
    CHECK(d->x[1] == 1.0f);
    CHECK(d->x[2] == Approx(128.0 / 255));
    CHECK(d->x[4] == Approx(97.0 / 255));  // 'a'
  }
}

TEST_CASE("load_records refuses what a trainer cannot use, saying what is wrong", "[preprocess]") {
  temp_dir tmp;
  const auto refused = [](const fs::path& dir) {
    auto d = celer::actors::load_records(dir.string());
    REQUIRE_FALSE(d);
    return d.error();
  };
  SECTION("tokens and text") {
    write_output(tmp.path / "tok", "u32:tokens", 2, {{"a", 0, "abcdefgh"}}, 1);
    auto e = refused(tmp.path / "tok");
    CHECK(e.code() == error_code::invalid_argument);
    CHECK_THAT(e.message(), Contains("\"u32:tokens\"") && Contains("f32:SHAPE or u8:SHAPE"));
    write_output(tmp.path / "text", "text", 0, {{"a", -1, "hello"}}, 1);
    CHECK_THAT(refused(tmp.path / "text").message(), Contains("\"text\""));
  }
  SECTION("unlabelled") {
    write_output(tmp.path / "nolabel", "f32:2", 0, {{"a", -1, f32_bytes({1, 2})}}, 1);
    CHECK_THAT(refused(tmp.path / "nolabel").message(), Contains("unlabelled"));
  }
  SECTION("a label outside [0, classes)") {
    write_output(tmp.path / "label", "f32:2", 2, {{"a", 0, f32_bytes({1, 2})}, {"b", 2, f32_bytes({1, 2})}}, 1);
    auto e = refused(tmp.path / "label");
    CHECK(e.code() == error_code::invalid_argument);
    CHECK_THAT(e.message(), Contains("shard-00000.rec: record 1 has label 2, outside [0, 2)"));
  }
  SECTION("a payload of the wrong size, naming the shard file and the record") {
    write_output(tmp.path / "size", "f32:2", 2,
                 {{"a", 0, f32_bytes({1, 2})}, {"b", 1, f32_bytes({1, 2})}, {"c", 1, f32_bytes({1, 2, 3})}}, 2);
    auto e = refused(tmp.path / "size");
    CHECK(e.code() == error_code::invalid_argument);
    CHECK_THAT(e.message(), Contains("shard-00001.rec: record 0 has a payload of 12 bytes") && Contains("needs 8"));
  }
  SECTION("damage") {
    write_output(tmp.path / "damaged", "f32:4", 2, f32_samples(6, 4, 2), 2);
    const auto shard = tmp.path / "damaged" / "shard-00001.rec";
    std::string bytes = read_file(shard);
    bytes[bytes.size() - 32 - 8 * 3 - 3] ^= 0x10;  // the last record's payload
    write_file(shard, bytes);
    auto e = refused(tmp.path / "damaged");
    CHECK(e.code() == error_code::data_loss);
    CHECK_THAT(e.message(), Contains("shard-00001.rec") && Contains("checksum mismatch in record 2"));
  }
  SECTION("a missing directory, or one without a manifest") {
    CHECK(refused(tmp.path / "nowhere").code() == error_code::not_found);
    fs::create_directories(tmp.path / "empty");
    CHECK(refused(tmp.path / "empty").code() == error_code::not_found);
    CHECK(celer::actors::load_dataset("records:").error().code() == error_code::invalid_argument);
  }
}
