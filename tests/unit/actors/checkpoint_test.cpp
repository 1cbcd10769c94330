// The checkpoint writers' pure parts, without the runtime: chunking, the manifest on disk,
// write() and restore() over real tiers (RocksDB and a directory) in temporary folders.
#include <celer/actors/checkpoint.hpp>
#include <celer/store/blob_db.hpp>
#include <celer/store/checksum.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>

#include "checkpoint_fixtures.hpp"

using namespace celer::checkpoint;
using namespace checkpoint_test;

namespace {

std::vector<std::string> keys_of(const std::string& bytes, const chunking& c = {}) {
  std::vector<std::string> keys;
  std::size_t at = 0;
  for (auto n : cut(bytes.data(), bytes.size(), c)) {
    keys.push_back(celer::store::content_hash(bytes.data() + at, n).hex());
    at += n;
  }
  return keys;
}

std::size_t fresh(const std::vector<std::string>& before, const std::vector<std::string>& after) {
  const std::set<std::string> old(before.begin(), before.end());
  std::size_t n = 0;
  for (const auto& k : after) n += old.contains(k) ? 0 : 1;
  return n;
}

snapshot weights_snapshot(const std::vector<float>& w, std::int64_t step) {
  snapshot s;
  s.set_step(step);
  s.add_view("model/w", w.data(), w.size() * sizeof(float), {{"dtype", "float32"}});
  s.add_int("step", step);
  return s;
}

std::vector<float> floats_of(const snapshot& s, const std::string& name) {
  const entry* e = s.find(name);
  REQUIRE(e != nullptr);
  std::vector<float> out(e->data.size() / sizeof(float));
  std::memcpy(out.data(), e->data.data(), e->data.size());
  return out;
}

} // namespace

TEST_CASE("chunking is deterministic and an edit in an 8 MiB entry changes only nearby chunks",
          "[actors][checkpoint]") {
  const std::string data = noise(8 << 20, 1);
  const auto cuts = cut(data.data(), data.size());
  CHECK(cut(data.data(), data.size()) == cuts);
  std::size_t total = 0;
  const chunking c;
  for (std::size_t i = 0; i < cuts.size(); ++i) {
    total += cuts[i];
    CHECK(cuts[i] <= c.max_bytes);
    if (i + 1 < cuts.size()) CHECK(cuts[i] >= c.min_bytes);
  }
  CHECK(total == data.size());
  // About avg_bytes apiece (min + the mean wait for a cut): 8 MiB is some 20 to 40 chunks.
  CHECK(cuts.size() >= 16);
  CHECK(cuts.size() <= 64);
  const auto before = keys_of(data);

  SECTION("overwriting 100 bytes in the middle") {
    std::string edited = data;
    for (std::size_t i = 0; i < 100; ++i) edited[(4 << 20) + i] ^= 0x5a;
    CHECK(fresh(before, keys_of(edited)) <= 2);
  }
  SECTION("inserting 10 bytes in the middle (everything after it shifts)") {
    std::string shifted = data;
    shifted.insert(std::size_t{4} << 20, "0123456789");
    CHECK(fresh(before, keys_of(shifted)) <= 3);
  }
  SECTION("no bytes, and fewer bytes than the minimum") {
    CHECK(cut(data.data(), 0).empty());
    CHECK(cut(data.data(), 1000) == std::vector<std::size_t>{1000});
  }
}

TEST_CASE("the chunker's cuts are those of the on-disk format", "[actors][checkpoint]") {
  // A regression guard: the gear table and the masks are part of the format. If this fails
  // the cuts changed, and every chunk of an existing archive would be written again.
  const std::string data = noise(2 << 20, 42);
  const std::vector<std::size_t> expected = {270465, 276354, 272252, 301324, 295167,
                                             115658, 223628, 296301, 46003};
  CHECK(cut(data.data(), data.size()) == expected);
}

TEST_CASE("an incremental checkpoint writes only the chunks that changed",
          "[actors][checkpoint]") {
  temp_dir dir;
  auto w = noise_floats(2 << 20, 7);  // 8 MiB
  auto first = write(weights_snapshot(w, 100), dir.both());
  REQUIRE(first.has_value());
  CHECK(first->id == 1);
  CHECK(first->logical_bytes == (8u << 20) + 3);
  CHECK(first->fast.chunks_written == first->fast.chunks);
  CHECK(first->archive.bytes_written >= 8u << 20);

  // 1% of the values, one contiguous run (say, the rows of an embedding that a batch touched).
  for (std::size_t i = 0; i < w.size() / 100; ++i) w[w.size() / 2 + i] += 1.0f;
  auto second = write(weights_snapshot(w, 200), dir.both());
  REQUIRE(second.has_value());
  CHECK(second->id == 2);
  for (const auto* t : {&second->fast, &second->archive}) {
    CHECK(t->used);
    CHECK(t->chunks_written <= 3);
    CHECK(t->bytes_written < (3u << 20));
    CHECK(t->bytes_written == second->archive.bytes_written);
  }
  auto back = restore(dir.both());
  REQUIRE(back.has_value());
  CHECK(back->info.id == 2);
  CHECK(floats_of(back->data, "model/w") == w);
}

TEST_CASE("a checkpoint restores exactly: bytes, attributes, small values, RNG state",
          "[actors][checkpoint]") {
  temp_dir dir;
  std::mt19937_64 rng(2024);
  for (int i = 0; i < 1000; ++i) (void)rng();
  const std::string blob = noise((1 << 20) + 3, 9);
  const std::string not_utf8 = std::string("\xff\xfe", 2) + "binary text";
  snapshot s;
  s.set_step(4200);
  s.set_metadata("run", "digits-7");
  s.add_bytes("optimizer/state", celer::bytes(std::string_view(blob)), {{"shape", "3,5"}});
  s.add_bytes("empty", celer::bytes());
  s.add_int("data/position", -123456789012345);
  s.add_float("lr", 0.1);
  s.add_float("tiny", std::numeric_limits<double>::denorm_min());
  s.add_float("minus_zero", -0.0);
  s.add_float("inf", std::numeric_limits<double>::infinity());
  s.add_text("note", "ünïcödé");
  s.add_text("raw", not_utf8);
  s.add_rng("rng/sampler", rng);

  auto opts = GENERATE(as<std::string>{}, "both", "fast", "archive");
  options o = dir.both();
  if (opts == "fast") o.archive_dir.clear();
  if (opts == "archive") o.fast_dir.clear();
  auto saved = write(s, o);
  REQUIRE(saved.has_value());
  auto back = restore(o);
  REQUIRE(back.has_value());
  CHECK(back->skipped.empty());
  CHECK(back->repaired.empty());
  CHECK(back->source == (opts == "archive" ? "archive" : "fast"));
  const snapshot& r = back->data;
  CHECK(r.step() == 4200);
  CHECK(back->info.step == 4200);
  CHECK(r.metadata() == s.metadata());
  REQUIRE(r.entries().size() == s.entries().size());
  for (std::size_t i = 0; i < s.entries().size(); ++i) {
    CHECK(r.entries()[i].name == s.entries()[i].name);  // in order
    CHECK(r.entries()[i].type == s.entries()[i].type);
    CHECK(r.entries()[i].attributes == s.entries()[i].attributes);
    CHECK(r.entries()[i].data == s.entries()[i].data);
  }
  CHECK(r.get_int("data/position").value() == -123456789012345);
  CHECK(r.get_float("lr").value() == 0.1);
  CHECK(r.get_float("tiny").value() == std::numeric_limits<double>::denorm_min());
  CHECK(std::signbit(r.get_float("minus_zero").value()));
  CHECK(std::isinf(r.get_float("inf").value()));
  CHECK(r.get_text("raw").value() == not_utf8);
  std::mt19937_64 again;
  REQUIRE(r.get_rng("rng/sampler", again).has_value());
  for (int i = 0; i < 10; ++i) CHECK(again() == rng());
}

TEST_CASE("a snapshot's typed values say what is wrong when read as another type",
          "[actors][checkpoint]") {
  snapshot s;
  s.add_text("t", "x").add_int("n", 3).add_int("n", 4);
  CHECK(s.entries().size() == 2);  // adding a name again replaces it
  CHECK(s.get_int("n").value() == 4);
  CHECK(s.get_int("t").error().code() == celer::error_code::invalid_argument);
  CHECK(s.get_text("missing").error().code() == celer::error_code::not_found);
  std::mt19937_64 e;
  CHECK(s.get_rng("t", e).error().code() == celer::error_code::data_loss);
}

TEST_CASE("the manifest is JSON a person can read, closed by its checksum line",
          "[actors][checkpoint]") {
  temp_dir dir;
  auto w = noise_floats(1 << 18, 3);
  REQUIRE(write(weights_snapshot(w, 7), dir.archive_only()).has_value());
  const std::string text = read_file(manifest_file(dir.path / "archive", 1));
  CHECK(text.starts_with("{\n \"format\": \"celer-checkpoint/1\",\n \"id\": 1,\n \"step\": 7,"));
  CHECK(text.find("{\"name\":\"step\",\"type\":\"int64\",\"size\":1,") != std::string::npos);
  CHECK(text.find("\"value\":\"7\"") != std::string::npos);
  CHECK(text.find("\"attributes\":{\"dtype\":\"float32\"}") != std::string::npos);
  const auto last = text.rfind('\n', text.size() - 2);
  CHECK(text.substr(last + 1, 8) == "xxh3_64 ");
  const auto body = text.substr(0, last + 1);
  char want[17];
  std::snprintf(want, sizeof want, "%016llx",
                static_cast<unsigned long long>(celer::store::checksum(body.data(), body.size())));
  CHECK(text.substr(last + 9, 16) == want);
  // Every chunk it names is a file under chunks/, named by its hash.
  for (const auto& key : chunk_keys_in(text)) {
    const auto bytes = read_file(chunk_file(dir.path / "archive", key));
    CHECK(celer::store::content_hash(bytes.data(), bytes.size()).hex() == key);
  }
  CHECK(read_file(dir.path / "archive" / "FORMAT") == "celer-checkpoint/1\n");
}

TEST_CASE("retention keeps what each tier's policy says and removes unreferenced chunks",
          "[actors][checkpoint]") {
  temp_dir dir;
  options o = dir.both();
  o.fast_keep_last = 2;
  o.archive_keep_last = 2;
  o.archive_keep_every_steps = 300;
  const std::string shared = noise(1 << 20, 99);  // the same in every checkpoint
  std::map<std::uint64_t, std::string> own;       // id -> what only it holds
  for (std::uint64_t id = 1; id <= 8; ++id) {
    own[id] = noise(1 << 20, id);
    snapshot s;
    s.set_step(static_cast<std::int64_t>(id) * 100);
    s.add_bytes("shared", celer::bytes(std::string_view(shared)));
    s.add_bytes("own", celer::bytes(std::string_view(own[id])));
    auto r = write(s, o);
    REQUIRE(r.has_value());
    REQUIRE(r->id == id);
    if (id > 1) CHECK(r->fast.chunks_written == keys_of(own[id]).size());  // shared: deduped
  }
  auto all = list(o);
  REQUIRE(all.has_value());
  std::map<std::uint64_t, std::pair<bool, bool>> where;
  for (const auto& i : *all) where[i.id] = {i.in_fast, i.in_archive};
  // Fast: the newest 2. Archive: the newest 2, and steps 300 and 600.
  CHECK(where == std::map<std::uint64_t, std::pair<bool, bool>>{
                   {3, {false, true}}, {6, {false, true}}, {7, {true, true}}, {8, {true, true}}});

  auto chunks_of = [&](std::initializer_list<std::uint64_t> ids) {
    std::set<std::string> keys;
    for (const auto& k : keys_of(shared)) keys.insert(k);
    for (auto id : ids) {
      for (const auto& k : keys_of(own[id])) keys.insert(k);
    }
    return keys.size();
  };
  CHECK(count_chunk_files(dir.path / "archive") == chunks_of({3, 6, 7, 8}));
  {
    auto db = celer::store::open_blob_db(o.fast_dir, {.read_only = true});
    REQUIRE(db.has_value());
    std::size_t in_fast = 0;
    REQUIRE((*db)->scan("chunk", [&](std::string_view, std::string_view) { ++in_fast; }));
    CHECK(in_fast == chunks_of({7, 8}));
  }

  SECTION("an old checkpoint kept only by the archive restores, its chunks from both tiers") {
    auto back = restore(o, {.max_id = 5});
    REQUIRE(back.has_value());
    CHECK(back->info.id == 3);
    CHECK(back->skipped.empty());  // 4 and 5 are gone, not broken
    CHECK(back->source == "fast+archive");  // "shared" is still in the fast tier
    CHECK(back->data.find("own")->data.view() == own[3]);
  }
}

TEST_CASE("a corrupted chunk in the archive makes restore fall back and say which and why",
          "[actors][checkpoint]") {
  temp_dir dir;
  auto w = noise_floats(1 << 20, 5);
  REQUIRE(write(weights_snapshot(w, 100), dir.both()).has_value());
  const auto older = w;
  for (std::size_t i = 0; i < 1000; ++i) w[i] = 0.5f;
  REQUIRE(write(weights_snapshot(w, 200), dir.both()).has_value());

  const fs::path archive = dir.path / "archive";
  std::string victim;
  const auto before = chunk_keys_in(read_file(manifest_file(archive, 1)));
  for (const auto& k : chunk_keys_in(read_file(manifest_file(archive, 2)))) {
    if (!before.contains(k)) victim = k;
  }
  REQUIRE_FALSE(victim.empty());
  std::string bytes = read_file(chunk_file(archive, victim));
  bytes[bytes.size() / 2] ^= 0x01;
  write_file(chunk_file(archive, victim), bytes);

  SECTION("with the fast tier lost, restore takes the older checkpoint") {
    fs::remove_all(dir.path / "fast");
    auto back = restore(dir.both());
    REQUIRE(back.has_value());
    CHECK(back->info.id == 1);
    CHECK(back->source == "archive");
    CHECK(floats_of(back->data, "model/w") == older);
    REQUIRE(back->skipped.size() == 1);
    CHECK(back->skipped[0].id == 2);
    CHECK(back->skipped[0].step == 200);
    CHECK_THAT(back->skipped[0].why,
               Catch::Contains("chunk " + victim) && Catch::Contains("archive: its bytes do not match its hash"));
  }
  SECTION("with the fast tier whole, its copy is read and nothing is skipped") {
    auto back = restore(dir.both());
    REQUIRE(back.has_value());
    CHECK(back->info.id == 2);
    CHECK(back->skipped.empty());
    CHECK(floats_of(back->data, "model/w") == w);
  }
  SECTION("when no checkpoint reads back whole, restore is data_loss and lists each") {
    fs::remove_all(dir.path / "fast");
    for (const auto& k : before) {
      std::string b = read_file(chunk_file(archive, k));
      b[0] ^= 0x01;
      write_file(chunk_file(archive, k), b);
    }
    auto back = restore(dir.both());
    REQUIRE_FALSE(back.has_value());
    CHECK(back.error().code() == celer::error_code::data_loss);
    CHECK_THAT(back.error().message(),
               Catch::Contains("checkpoint 2 (step 200)") && Catch::Contains("checkpoint 1 (step 100)"));
  }
}

TEST_CASE("a truncated manifest is skipped for the older checkpoint", "[actors][checkpoint]") {
  temp_dir dir;
  auto w = noise_floats(1 << 16, 11);
  REQUIRE(write(weights_snapshot(w, 10), dir.archive_only()).has_value());
  REQUIRE(write(weights_snapshot(w, 20), dir.archive_only()).has_value());
  const fs::path m2 = manifest_file(dir.path / "archive", 2);
  const std::string text = read_file(m2);
  write_file(m2, text.substr(0, text.size() / 2));

  auto back = restore(dir.archive_only());
  REQUIRE(back.has_value());
  CHECK(back->info.id == 1);
  CHECK(back->data.step() == 10);
  REQUIRE(back->skipped.size() == 1);
  CHECK(back->skipped[0].id == 2);
  CHECK_THAT(back->skipped[0].why, Catch::Contains("archive: the manifest is truncated"));
  auto all = list(dir.archive_only());
  REQUIRE(all.has_value());
  REQUIRE(all->size() == 1);
  CHECK(all->front().id == 1);
  // The next save still counts past the broken one.
  auto third = write(weights_snapshot(w, 30), dir.archive_only());
  REQUIRE(third.has_value());
  CHECK(third->id == 3);
}

TEST_CASE("restore with nothing saved is not_found, and bad options are invalid_argument",
          "[actors][checkpoint]") {
  temp_dir dir;
  auto none = restore(dir.both());
  REQUIRE_FALSE(none.has_value());
  CHECK(none.error().code() == celer::error_code::not_found);
  CHECK_THAT(none.error().message(), Catch::Contains((dir.path / "archive").string()));
  CHECK_FALSE(fs::exists(dir.path / "archive"));  // reading creates nothing
  snapshot s;
  CHECK(write(s, options{}).error().code() == celer::error_code::invalid_argument);
  options keep_none = dir.both();
  keep_none.fast_keep_last = 0;
  CHECK(write(s, keep_none).error().code() == celer::error_code::invalid_argument);
  s.add_int("", 1);
  CHECK(write(s, dir.both()).error().code() == celer::error_code::invalid_argument);
}

TEST_CASE("write errors name the path: an archive folder that cannot be made",
          "[actors][checkpoint]") {
  temp_dir dir;
  write_file(dir.path / "a-file", "not a folder");
  options o{.archive_dir = (dir.path / "a-file" / "archive").string()};
  snapshot s;
  s.add_int("n", 1);
  auto r = write(s, o);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code() == celer::error_code::unavailable);
  CHECK_THAT(r.error().message(), Catch::Contains("archive tier cannot be opened") &&
                                    Catch::Contains((dir.path / "a-file").string()));
}
