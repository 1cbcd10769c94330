// celer::preprocess's record files ("CELERRC1", actors/preprocess/README.md): real files in a
// temporary folder, written, read back, damaged and cut; and their CSV and JSONL exports.
#include <celer/actors/preprocess/records.hpp>

#include "checkpoint_fixtures.hpp"  // temp_dir, noise, read_file, write_file

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

using namespace celer::preprocess;
namespace fs = std::filesystem;

namespace {

using checkpoint_test::noise;
using checkpoint_test::read_file;
using checkpoint_test::temp_dir;
using checkpoint_test::write_file;

struct record {
  std::string key;
  std::int32_t label = 0;
  std::string payload;
};

/// Varied records: empty and long keys, negative labels, payloads of every size mod 8.
std::vector<record> sample_records(std::size_t n, std::uint64_t seed) {
  std::vector<record> out;
  for (std::size_t i = 0; i < n; ++i) {
    record r;
    r.key = i == 0 ? "" : "item/" + std::to_string(i) + std::string(i % 13, 'k');
    r.label = static_cast<std::int32_t>(i % 7) - 3;
    r.payload = noise((i * 37) % 301, seed + i);
    out.push_back(std::move(r));
  }
  return out;
}

void write_records(const std::string& path, const std::string& schema,
                   const std::vector<record>& records) {
  auto w = record_writer::create(path, schema);
  REQUIRE(w);
  for (const auto& r : records) REQUIRE(w->append(r.key, r.label, r.payload));
  CHECK(w->count() == records.size());
  REQUIRE(w->finish());
}

std::string le(std::uint64_t v, int bytes) {
  std::string s;
  for (int i = 0; i < bytes; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  return s;
}

std::uint32_t zcrc(std::string_view s) {
  return static_cast<std::uint32_t>(
    ::crc32(0, reinterpret_cast<const Bytef*>(s.data()), static_cast<uInt>(s.size())));
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

} // namespace

TEST_CASE("a record file gives back every key, label and payload, in order and by index",
          "[preprocess]") {
  temp_dir dir;
  const auto path = (dir.path / "shards" / "shard-00000.rec").string();  // the folder is made
  const auto records = sample_records(500, 1);
  write_records(path, "image:u8:28x28+label", records);
  CHECK(fs::exists(path));
  CHECK_FALSE(fs::exists(path + ".part"));

  auto r = record_reader::open(path);
  REQUIRE(r);
  CHECK(r->schema() == "image:u8:28x28+label");
  CHECK(r->count() == records.size());
  CHECK(r->size() == fs::file_size(path));
  REQUIRE(r->verify());
  for (std::size_t i = 0; i < records.size(); ++i) {
    auto v = r->next();
    REQUIRE(v);
    REQUIRE(v->has_value());
    const record_view& got = **v;
    CHECK(got.index == i);
    CHECK(got.key == records[i].key);
    CHECK(got.label == records[i].label);
    CHECK(got.payload == records[i].payload);
    // Payloads start 8-aligned (the mapping is page-aligned), so floats can be read in place.
    CHECK(reinterpret_cast<std::uintptr_t>(got.payload.data()) % 8 == 0);
    CHECK(got.offset % 8 == 0);
  }
  auto end = r->next();
  REQUIRE(end);
  CHECK_FALSE(end->has_value());

  for (std::uint64_t i : {499u, 0u, 250u, 17u}) {
    auto v = r->at(i);
    REQUIRE(v);
    CHECK(v->key == records[i].key);
    CHECK(v->payload == records[i].payload);
  }
  r->seek(498);
  auto v = r->next();
  REQUIRE(v);
  CHECK((*v)->key == records[498].key);

  auto past = r->at(500);
  REQUIRE_FALSE(past);
  CHECK(past.error().code() == celer::error_code::invalid_argument);

  // A moved reader keeps the mapping; the views stay good.
  record_reader moved = std::move(*r);
  auto again = moved.at(3);
  REQUIRE(again);
  CHECK(again->payload == records[3].payload);
}

TEST_CASE("a record file's bytes are the layout actors/preprocess/README.md documents",
          "[preprocess]") {
  temp_dir dir;
  const auto path = (dir.path / "one.rec").string();
  auto w = record_writer::create(path, "text");
  REQUIRE(w);
  REQUIRE(w->append("ab", -2, "hello"));
  REQUIRE(w->finish());

  std::string header = "CELERRC1" + le(1, 4) + le(4, 4) + "text" + std::string(4, '\0');
  header += le(zcrc(header), 4) + le(0, 4);
  REQUIRE(header.size() == 32);
  // key 2 bytes: 20 + 2 = 22, padded to 24; payload 5 bytes, padded to 8.
  const std::string body = le(2, 4) + le(5, 8) + le(0xFFFFFFFEu, 4) + "ab" + std::string(2, '\0') +
                           "hello" + std::string(3, '\0');
  const std::string rec = le(zcrc(body), 4) + body;
  REQUIRE(rec.size() == 32);
  const std::string index = le(32, 8);
  std::string trailer = le(1, 8) + le(64, 8) + le(zcrc(index), 4);
  const std::string before_crc = header + rec + index + trailer;
  trailer += le(zcrc(before_crc), 4) + "CELEREND";
  CHECK(read_file(path) == header + rec + index + trailer);
}

TEST_CASE("an empty shard is a whole file with no records", "[preprocess]") {
  temp_dir dir;
  const auto path = (dir.path / "empty.rec").string();
  write_records(path, "text", {});
  // 16-byte header + "text" padded to 24, header CRC and reserved (32), trailer (32).
  CHECK(fs::file_size(path) == 64);
  auto r = record_reader::open(path);
  REQUIRE(r);
  CHECK(r->count() == 0);
  CHECK(r->schema() == "text");
  REQUIRE(r->verify());
  auto v = r->next();
  REQUIRE(v);
  CHECK_FALSE(v->has_value());
  std::ostringstream csv;
  REQUIRE(write_csv(*r, csv));
  CHECK(csv.str() == "key,label,payload_bytes,payload\n");
}

TEST_CASE("payloads of several MiB are written whole and read in place", "[preprocess]") {
  temp_dir dir;
  const auto path = (dir.path / "large.rec").string();
  // 3 MiB and 5 MiB + 3 take the unbuffered path; the small ones between are buffered.
  const std::vector<record> records = {{"a", 1, noise(3 << 20, 11)},
                                       {"b", 2, noise(100, 12)},
                                       {"c", 3, noise((5 << 20) + 3, 13)},
                                       {"d", 4, ""},
                                       {"e", 5, noise(300 << 10, 14)}};
  write_records(path, "blob", records);
  auto r = record_reader::open(path);
  REQUIRE(r);
  REQUIRE(r->count() == records.size());
  REQUIRE(r->verify());  // the whole-file CRC carried across the unbuffered writes
  for (std::size_t i = 0; i < records.size(); ++i) {
    auto v = r->at(i);
    REQUIRE(v);
    CHECK(v->key == records[i].key);
    CHECK(v->label == records[i].label);
    CHECK(v->payload.size() == records[i].payload.size());
    CHECK(v->payload == records[i].payload);
  }
}

TEST_CASE("the same records make a bit-identical file", "[preprocess]") {
  temp_dir dir;
  auto records = sample_records(300, 5);
  records.push_back({"large", 9, noise(1 << 20, 6)});
  const auto a = (dir.path / "a.rec").string(), b = (dir.path / "sub" / "b.rec").string();
  write_records(a, "tokens:u32", records);
  write_records(b, "tokens:u32", records);
  CHECK(read_file(a) == read_file(b));
  records[7].label += 1;
  write_records(b, "tokens:u32", records);
  CHECK(read_file(a) != read_file(b));
}

TEST_CASE("a record file made in memory has a file writer's bytes and reads through a view",
          "[preprocess]") {
  temp_dir dir;
  auto records = sample_records(200, 8);
  records.push_back({"large", 4, noise(1 << 20, 9)});  // past the direct-write size
  const auto path = (dir.path / "a.rec").string();
  write_records(path, "f32:4", records);
  auto w = record_writer::in_memory("f32:4");
  REQUIRE(w);
  for (const auto& r : records) REQUIRE(w->append(r.key, r.label, r.payload));
  auto bytes = w->finish_in_memory();
  REQUIRE(bytes);
  CHECK(*bytes == read_file(path));
  CHECK_FALSE(w->finish());  // finished once
  auto r = record_reader::view(*bytes, "a block");
  REQUIRE(r);
  CHECK(r->count() == records.size());
  CHECK(r->verify());
  auto last = r->at(records.size() - 1);
  REQUIRE(last);
  CHECK(last->payload == records.back().payload);
  std::string damaged = *bytes;
  damaged[damaged.size() / 2] ^= 0x20;
  auto bad = record_reader::view(damaged, "a damaged block");
  CHECK((!bad || !bad->verify()));
  auto file_writer = record_writer::create((dir.path / "b.rec").string(), "text");
  REQUIRE(file_writer);
  auto not_memory = file_writer->finish_in_memory();
  REQUIRE_FALSE(not_memory);
  CHECK(not_memory.error().code() == celer::error_code::failed_precondition);
}

TEST_CASE("a flipped byte is a checksum mismatch naming the part and its byte offset",
          "[preprocess]") {
  temp_dir dir;
  const auto path = (dir.path / "flip.rec").string();
  const auto records = sample_records(10, 2);
  write_records(path, "text", records);
  const std::string good = read_file(path);
  std::uint64_t offset3 = 0, payload3 = 0;
  {
    auto r = record_reader::open(path);
    REQUIRE(r);
    auto v = r->at(3);
    REQUIRE(v);
    offset3 = v->offset;
    payload3 = offset3 + static_cast<std::uint64_t>(v->payload.data() - v->key.data()) + 20;
    REQUIRE(!v->payload.empty());
  }

  SECTION("in a record's payload: that record fails, the others read") {
    std::string bad = good;
    bad[payload3 + 1] = static_cast<char>(bad[payload3 + 1] ^ 0x10);
    write_file(path, bad);
    auto r = record_reader::open(path);  // records are checked when read
    REQUIRE(r);
    auto v = r->at(3);
    REQUIRE_FALSE(v);
    CHECK(v.error().code() == celer::error_code::data_loss);
    INFO(v.error().message());
    CHECK(contains(v.error().message(), path));
    CHECK(contains(v.error().message(), "checksum mismatch in record 3"));
    CHECK(contains(v.error().message(), "at byte offset " + std::to_string(offset3)));
    CHECK(r->at(2));
    CHECK(r->at(4));
    auto whole = r->verify();
    REQUIRE_FALSE(whole);
    CHECK(whole.error().message() == v.error().message());
    // Reading in order stops at the damaged record and stays there.
    for (int i = 0; i < 3; ++i) REQUIRE(r->next());
    CHECK_FALSE(r->next());
    CHECK(r->position() == 3);
    std::ostringstream csv;
    CHECK_FALSE(write_csv(*r, csv));
  }
  SECTION("in the header: open fails at the header's CRC") {
    std::string bad = good;
    bad[17] = 'X';  // inside the schema "text"
    write_file(path, bad);
    auto r = record_reader::open(path);
    REQUIRE_FALSE(r);
    CHECK(r.error().code() == celer::error_code::data_loss);
    CHECK(contains(r.error().message(), "header checksum mismatch (stored 0x"));
    CHECK(contains(r.error().message(), "at byte offset 24"));  // where the header's CRC is
  }
  SECTION("in the header's schema size: open says the header is damaged, not cut") {
    std::string bad = good;
    bad[14] = 1;  // the schema grows by 64 KiB, past the end of the file
    write_file(path, bad);
    auto r = record_reader::open(path);
    REQUIRE_FALSE(r);
    CHECK(r.error().code() == celer::error_code::data_loss);
    CHECK(contains(r.error().message(), "header damaged: a schema of 65540 bytes"));
    CHECK(contains(r.error().message(), "at byte offset 12"));
  }
  SECTION("an index whose CRC was recomputed over a wild offset is still refused") {
    std::string bad = good;
    const std::uint64_t index = good.size() - 32 - 8 * records.size();
    bad.replace(index + 8 * 2, 8, le(~std::uint64_t{7}, 8));  // 8-aligned, near 2^64
    const std::string new_index = bad.substr(index, 8 * records.size());
    bad.replace(good.size() - 16, 4, le(zcrc(new_index), 4));
    write_file(path, bad);
    auto r = record_reader::open(path);
    REQUIRE_FALSE(r);
    CHECK(r.error().code() == celer::error_code::data_loss);
    CHECK(contains(r.error().message(), "index entry 2 ("));
    CHECK(contains(r.error().message(), "out of order or out of range"));
  }
  SECTION("in the index: open fails at the index") {
    std::string bad = good;
    const std::uint64_t index = good.size() - 32 - 8 * records.size();
    bad[index + 8 * 5 + 1] = static_cast<char>(bad[index + 8 * 5 + 1] ^ 1);
    write_file(path, bad);
    auto r = record_reader::open(path);
    REQUIRE_FALSE(r);
    CHECK(r.error().code() == celer::error_code::data_loss);
    CHECK(contains(r.error().message(),
                   "index checksum mismatch (stored 0x"));
    CHECK(contains(r.error().message(), "at byte offset " + std::to_string(index)));
  }
  SECTION("in the trailer's count: open fails at the trailer") {
    std::string bad = good;
    bad[good.size() - 32] = static_cast<char>(bad[good.size() - 32] + 1);
    write_file(path, bad);
    auto r = record_reader::open(path);
    REQUIRE_FALSE(r);
    CHECK(r.error().code() == celer::error_code::data_loss);
    CHECK(contains(r.error().message(), "trailer inconsistent"));
    CHECK(contains(r.error().message(), "at byte offset " + std::to_string(good.size() - 32)));
  }
  SECTION("in the trailer's index CRC: open fails at the index") {
    std::string bad = good;
    bad[good.size() - 14] = static_cast<char>(bad[good.size() - 14] ^ 4);
    write_file(path, bad);
    auto r = record_reader::open(path);
    REQUIRE_FALSE(r);
    CHECK(contains(r.error().message(), "index checksum mismatch"));
  }
  SECTION("in the whole-file CRC: open reads, verify finds it") {
    std::string bad = good;
    bad[good.size() - 11] = static_cast<char>(bad[good.size() - 11] ^ 4);
    write_file(path, bad);
    auto r = record_reader::open(path);
    REQUIRE(r);  // open checks the parts; only verify reads the whole file
    auto whole = r->verify();
    REQUIRE_FALSE(whole);
    CHECK(whole.error().code() == celer::error_code::data_loss);
    CHECK(contains(whole.error().message(), "file checksum mismatch"));
    CHECK(contains(whole.error().message(), "at byte offset " + std::to_string(good.size() - 12)));
  }
}

TEST_CASE("a record file cut at any length is found truncated", "[preprocess]") {
  temp_dir dir;
  const auto path = (dir.path / "cut.rec").string();
  write_records(path, "text", sample_records(6, 3));
  const std::string good = read_file(path);
  for (std::size_t len = 0; len < good.size(); ++len) {
    write_file(path, good.substr(0, len));
    auto r = record_reader::open(path);
    INFO("cut to " << len << " of " << good.size() << " bytes");
    REQUIRE_FALSE(r);
    CHECK(r.error().code() == celer::error_code::data_loss);
    CHECK(contains(r.error().message(), "truncated"));
    CHECK(contains(r.error().message(), path));
  }
  write_file(path, good);
  CHECK(record_reader::open(path));
}

TEST_CASE("a stranger file and another version are refused by name", "[preprocess]") {
  temp_dir dir;
  const auto path = (dir.path / "x.rec").string();
  write_file(path, "key,label\nimg1,3\n");
  auto r = record_reader::open(path);
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == celer::error_code::invalid_argument);
  CHECK(contains(r.error().message(), "not a record file: bad magic at byte offset 0"));

  write_records(path, "text", sample_records(2, 4));
  std::string bytes = read_file(path);
  bytes[8] = 2;  // version 2
  write_file(path, bytes);
  r = record_reader::open(path);
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == celer::error_code::failed_precondition);
  CHECK(contains(r.error().message(), "record file version 2 at byte offset 8"));

  auto missing = record_reader::open((dir.path / "none.rec").string());
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code() == celer::error_code::not_found);
}

TEST_CASE("a writer dropped before finish leaves no file, and a finished one takes no more",
          "[preprocess]") {
  temp_dir dir;
  const auto path = (dir.path / "w.rec").string();
  write_file(path + ".part", "left by a crash");
  {
    auto w = record_writer::create(path, "text");
    REQUIRE(w);
    REQUIRE(w->append("k", 0, "v"));
    CHECK(fs::exists(path + ".part"));
    CHECK_FALSE(fs::exists(path));
  }
  CHECK_FALSE(fs::exists(path + ".part"));
  CHECK_FALSE(fs::exists(path));

  auto w = record_writer::create(path, "text");
  REQUIRE(w);
  REQUIRE(w->append("k", 0, "v"));
  REQUIRE(w->finish());
  auto more = w->append("k2", 0, "v");
  REQUIRE_FALSE(more);
  CHECK(more.error().code() == celer::error_code::failed_precondition);
  CHECK_FALSE(w->finish());
  CHECK(fs::exists(path));

  auto bad = record_writer::create("", "text");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code() == celer::error_code::invalid_argument);
  auto long_schema = record_writer::create(path, std::string(70000, 's'));
  REQUIRE_FALSE(long_schema);
  CHECK(long_schema.error().code() == celer::error_code::invalid_argument);
}

TEST_CASE("records export to CSV and JSON Lines for people", "[preprocess]") {
  temp_dir dir;
  const auto text = (dir.path / "text.rec").string();
  write_records(text, "text:utf-8", {{"doc,1", 3, "say \"hi\"\nbye"}, {"doc2", -1, "plain"},
                                     {std::string("bad\xff", 4), 0, ""}});
  auto r = record_reader::open(text);
  REQUIRE(r);

  std::ostringstream csv;
  REQUIRE(write_csv(*r, csv));
  CHECK(csv.str() == "key,label,payload_bytes,payload\n"
                     "\"doc,1\",3,12,\"say \"\"hi\"\"\nbye\"\n"
                     "doc2,-1,5,plain\n"
                     "bad\xff,0,0,\n");

  const auto jsonl_path = (dir.path / "out" / "text.jsonl").string();
  fs::create_directories(dir.path / "out");
  REQUIRE(write_jsonl(*r, jsonl_path));
  std::istringstream lines(read_file(jsonl_path));
  std::vector<nlohmann::json> rows;
  for (std::string line; std::getline(lines, line);) rows.push_back(nlohmann::json::parse(line));
  REQUIRE(rows.size() == 3);
  CHECK(rows[0]["key"] == "doc,1");
  CHECK(rows[0]["label"] == 3);
  CHECK(rows[0]["payload_bytes"] == 12);
  CHECK(rows[0]["payload"] == "say \"hi\"\nbye");
  CHECK(rows[1]["label"] == -1);
  CHECK(rows[2]["key"] == "bad\xEF\xBF\xBD");  // U+FFFD for the byte that is not UTF-8
  // Keys come first, as written.
  CHECK(read_file(jsonl_path).starts_with("{\"key\":\"doc,1\",\"label\":3,\"payload_bytes\":12,"));

  // A binary schema: sizes only.
  const auto bin = (dir.path / "bin.rec").string();
  write_records(bin, "image:u8:2x2", {{"img0", 7, std::string("\0\1\2\3", 4)}});
  auto b = record_reader::open(bin);
  REQUIRE(b);
  const auto csv_path = (dir.path / "bin.csv").string();
  REQUIRE(write_csv(*b, csv_path));
  CHECK(read_file(csv_path) == "key,label,payload_bytes\nimg0,7,4\n");
  std::ostringstream jl;
  REQUIRE(write_jsonl(*b, jl));
  CHECK(jl.str() == "{\"key\":\"img0\",\"label\":7,\"payload_bytes\":4}\n");

  auto nowhere = write_csv(*b, (dir.path / "no" / "such" / "dir.csv").string());
  REQUIRE_FALSE(nowhere);
  CHECK(contains(nowhere.error().message(), "dir.csv"));
}
