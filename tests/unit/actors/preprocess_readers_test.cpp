// celer::preprocess's readers (<celer/actors/preprocess/readers.hpp>): real CSV, JSON Lines,
// text and IDX files written to a temporary folder (gzipped too), read back into items; their
// errors checked by code and by what the message names.
#include <celer/actors/data.hpp>
#include <celer/actors/preprocess/readers.hpp>

#include "checkpoint_fixtures.hpp"  // temp_dir, write_file

#include <catch2/catch.hpp>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

using namespace celer::preprocess;
namespace fs = std::filesystem;

namespace {

using celer::error_code;
using checkpoint_test::temp_dir;
using checkpoint_test::write_file;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

/// Writes `bytes` gzipped to `p`.
void write_gzip(const fs::path& p, const std::string& bytes) {
  gzFile f = gzopen(p.string().c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) ==
          static_cast<int>(bytes.size()));
  REQUIRE(gzclose(f) == Z_OK);
}

std::string be32(std::uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

/// An IDX file of unsigned bytes with `shape`, value i being (i * 7 + seed) mod 256.
std::string idx_bytes(const std::vector<std::uint32_t>& shape, int seed) {
  std::string s{'\0', '\0', '\x08', static_cast<char>(shape.size())};
  std::size_t n = 1;
  for (auto d : shape) {
    s += be32(d);
    n *= d;
  }
  for (std::size_t i = 0; i < n; ++i) s.push_back(static_cast<char>((i * 7 + seed) % 256));
  return s;
}

const field_map catalog_fields{.key = "sku",
                               .label = "class",
                               .category = "dept",
                               .text = {"title", "body"},
                               .values = {"price", "weight"}};

} // namespace

TEST_CASE("a CSV file's quoted fields, doubled quotes and line breaks inside quotes read as RFC "
          "4180 has them",
          "[preprocess]") {
  temp_dir dir;
  const auto path = (dir.path / "catalog.csv").string();
  // A byte-order mark, CRLF and LF rows, an empty line, a column the map ignores ("note").
  write_file(path, "\xEF\xBB\xBFsku,title,body,price,weight,class,dept,note\r\n"
                   "a-1,Red Shoe,\"light, fast\",59.5,0.4,4,shoes,x\r\n"
                   "\n"
                   "a-2,\"The \"\"Best\"\" Mug\",\"two\nlines\",1e2, 2 ,,kitchen,\"\"\n"
                   "a-3,5\" screen,,-0.25,0,7,\"tv,audio\",last");  // no final line break
  auto items = read_csv(path, catalog_fields);
  REQUIRE(items);
  REQUIRE(items->size() == 3);
  const auto& a = (*items)[0];
  CHECK(a.key == "a-1");
  CHECK(a.label == 4);
  CHECK(a.category == "shoes");
  CHECK(a.text == "Red Shoe light, fast");
  CHECK(a.values == std::vector<float>{59.5f, 0.4f});
  const auto& b = (*items)[1];
  CHECK(b.key == "a-2");
  CHECK(b.label == -1);  // an empty label
  CHECK(b.category == "kitchen");
  CHECK(b.text == "The \"Best\" Mug two\nlines");
  CHECK(b.values == std::vector<float>{100.0f, 2.0f});
  const auto& c = (*items)[2];
  CHECK(c.key == "a-3");
  CHECK(c.text == "5\" screen ");  // a quote inside an unquoted field; an empty body
  CHECK(c.category == "tv,audio");
  CHECK(c.values == std::vector<float>{-0.25f, 0.0f});
  CHECK(c.label == 7);
  CHECK(c.pixels.empty());
  CHECK(c.tokens.empty());
}

TEST_CASE("a CSV without a key column keys its items by file name and row, and stops at the limit",
          "[preprocess]") {
  temp_dir dir;
  const auto path = (dir.path / "rows.csv.gz").string();
  std::string csv = "text;score\n";
  for (int i = 0; i < 10; ++i) csv += "line " + std::to_string(i) + ";" + std::to_string(i) + ".5\n";
  write_gzip(path, csv);  // gzipped: the readers tell gzip from plain themselves
  auto all = read_csv(path, {.text = {"text"}, .values = {"score"}}, {.delimiter = ';'});
  REQUIRE(all);
  REQUIRE(all->size() == 10);
  CHECK((*all)[0].key == "rows.csv.gz:0");
  CHECK((*all)[9].key == "rows.csv.gz:9");
  CHECK((*all)[9].text == "line 9");
  CHECK((*all)[9].values == std::vector<float>{9.5f});
  CHECK((*all)[9].label == -1);
  auto some = read_csv(path, {.text = {"text"}}, {.delimiter = ';', .limit = 4});
  REQUIRE(some);
  REQUIRE(some->size() == 4);
  CHECK(some->back().key == "rows.csv.gz:3");
  CHECK(some->back().values.empty());
}

TEST_CASE("a column the field map names but the CSV header lacks is invalid_argument naming it "
          "and the file",
          "[preprocess]") {
  temp_dir dir;
  const auto path = (dir.path / "catalog.csv").string();
  write_file(path, "sku,title,title,price\na,b,c,1\n");
  auto missing = read_csv(path, {.key = "sku", .values = {"price", "weight"}});
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code() == error_code::invalid_argument);
  CHECK(contains(missing.error().message(), path));
  CHECK(contains(missing.error().message(), "no column \"weight\""));
  auto twice = read_csv(path, {.text = {"title"}});
  REQUIRE_FALSE(twice);
  CHECK(twice.error().code() == error_code::invalid_argument);
  CHECK(contains(twice.error().message(), "\"title\" 2 times"));
  // A column named twice that the map does not use is no problem.
  auto fine = read_csv(path, {.key = "sku", .values = {"price"}});
  REQUIRE(fine);
  CHECK(fine->at(0).values == std::vector<float>{1.0f});
}

TEST_CASE("a CSV value that does not parse is invalid_argument naming the file, line and column",
          "[preprocess]") {
  temp_dir dir;
  const auto path = (dir.path / "bad.csv").string();
  // The second record spans lines 3-4, so the bad price sits on line 5.
  write_file(path, "id,note,price,class\n"
                   "1,ok,1.5,2\n"
                   "2,\"two\nlines\",2.5,3\n"
                   "3,ok,12abc,4\n");
  auto price = read_csv(path, {.values = {"price"}});
  REQUIRE_FALSE(price);
  CHECK(price.error().code() == error_code::invalid_argument);
  CHECK(contains(price.error().message(), path + " line 5 column \"price\""));
  CHECK(contains(price.error().message(), "\"12abc\" is not a number"));

  write_file(path, "id,class\n1,2\n2,3.5\n");
  auto label = read_csv(path, {.label = "class"});
  REQUIRE_FALSE(label);
  CHECK(label.error().code() == error_code::invalid_argument);
  CHECK(contains(label.error().message(), "line 3 column \"class\": \"3.5\" is not an int32 label"));

  write_file(path, "id,price\n1,\n");
  auto empty = read_csv(path, {.values = {"price"}});
  REQUIRE_FALSE(empty);
  CHECK(contains(empty.error().message(), "line 2 column \"price\": an empty value"));
}

TEST_CASE("CSV rows of the wrong width, unclosed quotes and characters after a closing quote are "
          "refused with their line",
          "[preprocess]") {
  temp_dir dir;
  const auto path = (dir.path / "broken.csv").string();
  const field_map fields{.text = {"a"}};

  write_file(path, "a,b\n1,2\n3\n");
  auto narrow = read_csv(path, fields);
  REQUIRE_FALSE(narrow);
  CHECK(narrow.error().code() == error_code::invalid_argument);
  CHECK(contains(narrow.error().message(), "line 3 has 1 fields; the header has 2"));

  write_file(path, "a,b\n1,2\n\"open,2\n4,5\n");
  auto open = read_csv(path, fields);
  REQUIRE_FALSE(open);
  CHECK(open.error().code() == error_code::invalid_argument);
  CHECK(contains(open.error().message(), "line 3: a quoted field opened here never closes"));

  write_file(path, "a,b\n\"x\"y,2\n");
  auto stray = read_csv(path, fields);
  REQUIRE_FALSE(stray);
  CHECK(stray.error().code() == error_code::invalid_argument);
  CHECK(contains(stray.error().message(), "line 2 field 1: a closing quote must be followed"));

  write_file(path, "");
  auto headless = read_csv(path, fields);
  REQUIRE_FALSE(headless);
  CHECK(headless.error().code() == error_code::invalid_argument);
  CHECK(contains(headless.error().message(), "has no header row"));

  auto quote = read_csv(path, fields, {.delimiter = '"'});
  REQUIRE_FALSE(quote);
  CHECK(quote.error().code() == error_code::invalid_argument);

  auto missing = read_csv((dir.path / "nope.csv").string(), fields);
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code() == error_code::not_found);
  CHECK(contains(missing.error().message(), "nope.csv does not exist"));
}

TEST_CASE("JSON Lines fields fill items: strings, numbers, numeric strings, arrays and null labels",
          "[preprocess]") {
  temp_dir dir;
  const auto path = (dir.path / "docs.jsonl").string();
  write_file(path,
             R"({"id": "d1", "lang": "en", "title": "Hello", "body": "wörld", "y": 3, "f": [1, "2.5"], "g": 4})"
             "\n"
             "   \n"  // a blank line: skipped, but counted in line numbers
             R"({"id": 17, "lang": null, "title": "A", "body": true, "y": null, "f": [], "g": "-1e1"})"
             "\r\n"
             R"({"id": "d3", "lang": "de", "title": "", "body": "x", "y": "7", "f": 0.5, "g": 1})");
  const field_map fields{.key = "id",
                         .label = "y",
                         .category = "lang",
                         .text = {"title", "body"},
                         .values = {"f", "g"}};
  auto items = read_jsonl(path, fields);
  REQUIRE(items);
  REQUIRE(items->size() == 3);
  CHECK((*items)[0].key == "d1");
  CHECK((*items)[0].label == 3);
  CHECK((*items)[0].category == "en");
  CHECK((*items)[0].text == "Hello wörld");
  CHECK((*items)[0].values == std::vector<float>{1.0f, 2.5f, 4.0f});
  CHECK((*items)[1].key == "17");
  CHECK((*items)[1].label == -1);
  CHECK((*items)[1].category.empty());
  CHECK((*items)[1].text == "A true");
  CHECK((*items)[1].values == std::vector<float>{-10.0f});
  CHECK((*items)[2].label == 7);
  CHECK((*items)[2].text == " x");
  CHECK((*items)[2].values == std::vector<float>{0.5f, 1.0f});

  auto keyless = read_jsonl(path, {.text = {"title"}}, /*limit=*/2);
  REQUIRE(keyless);
  REQUIRE(keyless->size() == 2);
  CHECK((*keyless)[1].key == "docs.jsonl:1");  // rows count from 0, blank lines left out
}

TEST_CASE("a JSON line that is not JSON, not an object, lacks a field or holds a bad value is "
          "invalid_argument naming its line",
          "[preprocess]") {
  temp_dir dir;
  const auto path = (dir.path / "bad.jsonl").string();
  const field_map fields{.label = "y", .text = {"t"}, .values = {"v"}};
  const std::string good = R"({"t": "ok", "y": 1, "v": 2})";
  const auto refused = [&](const std::string& line3, const std::string& part) {
    write_file(path, good + "\n" + good + "\n" + line3 + "\n" + good + "\n");
    auto r = read_jsonl(path, fields);
    REQUIRE_FALSE(r);
    CHECK(r.error().code() == error_code::invalid_argument);
    CHECK(contains(r.error().message(), path + " line 3"));
    CHECK(contains(r.error().message(), part));
  };
  refused(R"({"t": "ok", "y": 1, "v": )", "is not JSON");
  refused(R"([1, 2])", "is not a JSON object but array");
  refused(R"({"t": "ok", "v": 2})", "no field \"y\"");
  refused(R"({"t": "ok", "y": 1.5, "v": 2})", "field \"y\": 1.5 is not an integer label");
  refused(R"({"t": "ok", "y": 4000000000, "v": 2})", "out of an int32's range");
  refused(R"({"t": "ok", "y": 1, "v": "two"})", "field \"v\": \"two\" is not a number");
  refused(R"({"t": "ok", "y": 1, "v": [1, {}]})", "in an array, {} is not a number");
  refused(R"({"t": ["a"], "y": 1, "v": 2})", "field \"t\": an array is not text");
}

TEST_CASE("a text file gives one item per non-blank line, keyed by file name and line from 0",
          "[preprocess]") {
  temp_dir dir;
  const auto path = (dir.path / "corpus.txt").string();
  write_file(path, "first line\r\n\n  \t\nZweite Zeile: grüße\nlast");
  auto items = read_text(path);
  REQUIRE(items);
  REQUIRE(items->size() == 3);
  CHECK((*items)[0].key == "corpus.txt:0");
  CHECK((*items)[0].text == "first line");
  CHECK((*items)[1].key == "corpus.txt:3");
  CHECK((*items)[1].text == "Zweite Zeile: grüße");
  CHECK((*items)[2].key == "corpus.txt:4");
  CHECK((*items)[2].text == "last");
  CHECK((*items)[2].label == -1);
  auto one = read_text(path, /*limit=*/1);
  REQUIRE(one);
  CHECK(one->size() == 1);
  auto missing = read_text((dir.path / "none.txt").string());
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code() == error_code::not_found);
}

TEST_CASE("IDX files the test writes, gzipped or plain, read back as raw pixels, labels and keys",
          "[preprocess]") {
  temp_dir dir;
  const auto images = dir.path / "imgs-idx3-ubyte.gz";
  const auto labels = dir.path / "labels-idx1-ubyte";
  const std::string image_bytes = idx_bytes({5, 3, 4}, 1);
  write_gzip(images, image_bytes);
  write_file(labels, idx_bytes({5}, 3));
  auto items = read_idx(images.string(), labels.string());
  REQUIRE(items);
  REQUIRE(items->size() == 5);
  for (std::size_t i = 0; i < 5; ++i) {
    const auto& it = (*items)[i];
    CHECK(it.key == "imgs-idx3-ubyte.gz:" + std::to_string(i));
    CHECK(it.height == 3);
    CHECK(it.width == 4);
    CHECK(it.channels == 1);
    CHECK(it.label == static_cast<std::int32_t>((i * 7 + 3) % 256));
    const std::string expect = image_bytes.substr(16 + i * 12, 12);
    CHECK(std::string(it.pixels.begin(), it.pixels.end()) == expect);
  }
  auto two = read_idx(images.string(), labels.string(), /*limit=*/2);
  REQUIRE(two);
  CHECK(two->size() == 2);
  auto unlabelled = read_idx(images.string(), "");
  REQUIRE(unlabelled);
  CHECK(unlabelled->at(4).label == -1);
}

TEST_CASE("IDX files that do not pair, are not images or are cut are refused naming the file",
          "[preprocess]") {
  temp_dir dir;
  const auto images = (dir.path / "images").string();
  const auto labels = (dir.path / "labels").string();
  write_file(images, idx_bytes({4, 2, 2}, 0));
  write_file(labels, idx_bytes({3}, 0));
  auto unpaired = read_idx(images, labels);
  REQUIRE_FALSE(unpaired);
  CHECK(unpaired.error().code() == error_code::invalid_argument);
  CHECK(contains(unpaired.error().message(), "do not pair"));

  write_file(images, idx_bytes({4, 4}, 0));
  auto flat = read_idx(images, "");
  REQUIRE_FALSE(flat);
  CHECK(flat.error().code() == error_code::invalid_argument);
  CHECK(contains(flat.error().message(), "2-dimensional"));

  auto cut_bytes = idx_bytes({4, 2, 2}, 0);
  cut_bytes.pop_back();
  write_file(images, cut_bytes);
  auto cut = read_idx(images, "");
  REQUIRE_FALSE(cut);
  CHECK(cut.error().code() == error_code::invalid_argument);
  CHECK(contains(cut.error().message(), images + " should hold 16 values"));

  write_file(images, "PK\x03\x04 not idx");
  auto foreign = read_idx(images, "");
  REQUIRE_FALSE(foreign);
  CHECK(foreign.error().code() == error_code::invalid_argument);
  CHECK(contains(foreign.error().message(), "not an IDX file"));

  auto missing = read_idx((dir.path / "none").string(), "");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code() == error_code::not_found);
}

TEST_CASE("Debian's Fashion-MNIST test set reads as 10,000 28x28 items matching load_idx",
          "[preprocess]") {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  const auto images = dir + "/t10k-images-idx3-ubyte.gz";
  const auto labels = dir + "/t10k-labels-idx1-ubyte.gz";
  if (!fs::exists(images) || !fs::exists(labels)) {
    WARN("skipped: " << dir << " is missing (Debian's dataset-fashion-mnist)");
    return;
  }
  auto items = read_idx(images, labels);
  REQUIRE(items);
  REQUIRE(items->size() == 10000);
  const auto reference = celer::actors::load_idx(images, labels);
  REQUIRE(reference);
  std::vector<int> per_class(10);
  for (std::size_t i = 0; i < items->size(); ++i) {
    const auto& it = (*items)[i];
    REQUIRE(it.pixels.size() == 784);
    REQUIRE(it.label == reference->y[i]);
    ++per_class.at(static_cast<std::size_t>(it.label));
  }
  CHECK((*items)[0].label == 9);  // the first test image is an ankle boot
  CHECK(per_class == std::vector<int>(10, 1000));
  CHECK((*items)[0].height == 28);
  CHECK((*items)[0].width == 28);
  // The same bytes load_idx scales to [0, 1].
  const auto& last = items->back();
  for (std::size_t p = 0; p < 784; ++p) {
    REQUIRE(static_cast<float>(last.pixels[p]) / 255.0f == reference->x[9999 * 784 + p]);
  }
}
