#include <celer/store/blob_db.hpp>
#include <celer/store/checksum.hpp>

#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

using namespace celer;
using namespace celer::store;

namespace {

struct temp_dir {
  std::filesystem::path path;
  temp_dir() {
    path = std::filesystem::temp_directory_path() /
           ("celer-blob-test-" + std::to_string(::getpid()) + "-" +
            std::to_string(std::random_device{}()));
    std::filesystem::create_directories(path);
  }
  ~temp_dir() { std::filesystem::remove_all(path); }
};

std::string noise(std::size_t size, unsigned seed) {
  std::string s(size, '\0');
  std::mt19937 gen(seed);
  for (auto& c : s) c = static_cast<char>(gen());
  return s;
}

std::map<std::string, std::string> all_of(const blob_db& db, std::string_view space) {
  std::map<std::string, std::string> out;
  auto ok = db.scan(space, [&](std::string_view k, std::string_view v) {
    out.emplace(std::string(k), std::string(v));
  });
  REQUIRE(ok.has_value());
  return out;
}

} // namespace

TEST_CASE("content hashes are XXH3-128 in canonical hex", "[store][checksum]") {
  CHECK(content_hash("", 0).hex() == "99aa06d3014798d86001c324468d497f");
  CHECK(content_hash("celer", 5).hex() == "d09be4f8e8bc561c0455cd120d070b79");
  CHECK(content_hash("celer", 5) == content_hash("celer", 5));
  CHECK_FALSE(content_hash("celer", 5) == content_hash("celeR", 5));
}

TEST_CASE("a blob database keeps large and small blobs by space and key across a reopen",
          "[store][blob_db]") {
  temp_dir dir;
  const std::string big = noise(700 * 1024, 1);
  const std::string small = "seven";
  const auto where = (dir.path / "a" / "b").string();  // folders made as needed
  {
    auto db = open_blob_db(where);
    REQUIRE(db.has_value());
    REQUIRE((*db)->apply({{"chunk", "a", big}, {"chunk", "b", small}}, /*sync=*/false));
    REQUIRE((*db)->apply({{"manifest", "a", small}}, /*sync=*/true));
    auto got = (*db)->get("chunk", "a");
    REQUIRE(got.has_value());
    REQUIRE(got->has_value());
    CHECK(**got == big);
    // Spaces do not see each other's keys.
    CHECK(all_of(**db, "manifest") == std::map<std::string, std::string>{{"a", small}});
    CHECK((*db)->dir() == where);
  }
  auto db = open_blob_db(where);
  REQUIRE(db.has_value());
  CHECK(all_of(**db, "chunk") == std::map<std::string, std::string>{{"a", big}, {"b", small}});
  REQUIRE((*db)->apply({{"chunk", "a", {}, /*erase=*/true}}, /*sync=*/true));
  auto gone = (*db)->get("chunk", "a");
  REQUIRE(gone.has_value());
  CHECK_FALSE(gone->has_value());
  CHECK(all_of(**db, "chunk").size() == 1);
}

TEST_CASE("staged blobs are seen at once and kept by a flush across a reopen",
          "[store][blob_db]") {
  temp_dir dir;
  const std::string big = noise(300 * 1024, 2);
  {
    auto db = open_blob_db(dir.path.string());
    REQUIRE(db.has_value());
    REQUIRE((*db)->stage({{"chunk", "x", big}, {"index", "x", "307200"}}));
    auto seen = (*db)->get("chunk", "x");
    REQUIRE(seen.has_value());
    REQUIRE(seen->has_value());
    CHECK(**seen == big);
    REQUIRE((*db)->flush());
    REQUIRE((*db)->apply({{"manifest", "1", "x"}}, /*sync=*/true));
    // A read-only handle opened now sees the flushed blob and the logged manifest.
    auto reader = open_blob_db(dir.path.string(), {.read_only = true});
    REQUIRE(reader.has_value());
    CHECK(all_of(**reader, "chunk") == std::map<std::string, std::string>{{"x", big}});
    CHECK(all_of(**reader, "manifest").size() == 1);
    CHECK((*reader)->flush().error().code() == error_code::failed_precondition);
  }
  auto db = open_blob_db(dir.path.string());
  REQUIRE(db.has_value());
  CHECK(all_of(**db, "chunk") == std::map<std::string, std::string>{{"x", big}});
}

TEST_CASE("a read-only handle reads blobs whose tables were compacted by earlier writers",
          "[store][blob_db]") {
  // Eight writers in turn, each flushing a blob and erasing an older one: enough tables for
  // compactions (and blob garbage collection) to move them.
  temp_dir dir;
  const std::string shared = noise(300 * 1024, 3);
  for (int round = 1; round <= 8; ++round) {
    auto db = open_blob_db(dir.path.string());
    REQUIRE(db.has_value());
    const std::string own = noise(300 * 1024, 10 + static_cast<unsigned>(round));
    std::vector<blob_write> w = {{"chunk", "own" + std::to_string(round), own}};
    if (round == 1) w.push_back({"chunk", "shared", shared});
    REQUIRE((*db)->stage(w));
    REQUIRE((*db)->flush());
    if (round > 2) {
      REQUIRE((*db)->apply({{"chunk", "own" + std::to_string(round - 2), {}, true}}, false));
    }
  }
  auto reader = open_blob_db(dir.path.string(), {.read_only = true});
  REQUIRE(reader.has_value());
  auto got = (*reader)->get("chunk", "shared");
  REQUIRE(got.has_value());
  REQUIRE(got->has_value());
  CHECK(**got == shared);
  auto gone = (*reader)->get("chunk", "own1");
  REQUIRE(gone.has_value());
  CHECK_FALSE(gone->has_value());
  CHECK(all_of(**reader, "chunk").size() == 3);
}

TEST_CASE("a read-only blob database opens beside a writer and refuses writes",
          "[store][blob_db]") {
  temp_dir dir;
  auto writer = open_blob_db(dir.path.string());
  REQUIRE(writer.has_value());
  REQUIRE((*writer)->apply({{"m", "1", "one"}}, /*sync=*/true));

  // A second writer is refused: the database is one writer's.
  auto second = open_blob_db(dir.path.string());
  REQUIRE_FALSE(second.has_value());
  CHECK(second.error().code() == error_code::unavailable);

  auto reader = open_blob_db(dir.path.string(), {.read_only = true});
  REQUIRE(reader.has_value());
  auto one = (*reader)->get("m", "1");
  REQUIRE(one.has_value());
  REQUIRE(one->has_value());
  CHECK(**one == "one");
  auto refused = (*reader)->apply({{"m", "2", "two"}}, /*sync=*/true);
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().code() == error_code::failed_precondition);
}

TEST_CASE("a read-only open of a directory without a blob database is not_found",
          "[store][blob_db]") {
  temp_dir dir;
  auto db = open_blob_db((dir.path / "nothing-here").string(), {.read_only = true});
  REQUIRE_FALSE(db.has_value());
  CHECK(db.error().code() == error_code::not_found);
  CHECK(db.error().message().find("nothing-here") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir.path / "nothing-here"));
}
