// The character-level corpus: Debian's fortune files, the byte vocabulary, the split by
// whole fortunes and the window samplers (<celer/actors/text.hpp>).
#include <celer/actors/text.hpp>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

using namespace celer::actors;

namespace {

std::string joined(const std::vector<std::string>& docs) {
  std::string all;
  for (const auto& d : docs) all += d;
  return all;
}

} // namespace

TEST_CASE("Debian's fortunes load as whole entries and split the same way for the same seed",
          "[actors][text]") {
  auto docs = load_fortunes();
  REQUIRE(docs.has_value());
  // fortunes-min 1:1.99.1-7.3: 821 entries in fortunes, literature and riddles.
  CHECK(docs->size() > 800);
  for (const auto& d : *docs) {
    REQUIRE(!d.empty());
    CHECK(d.back() == '\n');
    CHECK(d.find("\n%\n") == std::string::npos);
  }
  auto a = make_char_corpus(*docs, 0.1, 7, "fortunes");
  auto b = make_char_corpus(*docs, 0.1, 7, "fortunes");
  auto c = make_char_corpus(*docs, 0.1, 8, "fortunes");
  REQUIRE(a.has_value());
  REQUIRE(b.has_value());
  REQUIRE(c.has_value());
  CHECK(a->train == b->train);
  CHECK(a->validation == b->validation);
  CHECK(a->validation != c->validation);
  // Every byte of every entry lands in one part, plus "%\n" after each entry.
  CHECK(a->train.size() + a->validation.size() == joined(*docs).size() + 2 * docs->size());
  // About a tenth of the text is for validation (whole entries, so not exactly).
  const double share = static_cast<double>(a->validation.size()) /
                       static_cast<double>(a->train.size() + a->validation.size());
  CHECK(share > 0.05);
  CHECK(share < 0.2);
  // The vocabulary is the training text's bytes: it encodes and decodes that text exactly.
  CHECK(a->vocabulary.size() > 60);
  CHECK(a->vocabulary.size() < 128);
  const std::string train_text = a->vocabulary.decode(a->train);
  CHECK(a->vocabulary.encode(train_text) == a->train);
  CHECK(train_text.substr(train_text.size() - 2) == "%\n");
  for (auto id : a->train) CHECK(id != char_vocabulary::unknown);
}

TEST_CASE("a byte the vocabulary has not seen is the unknown id", "[actors][text]") {
  const char_vocabulary v("abcab");
  CHECK(v.size() == 4);  // unknown, a, b, c
  CHECK(v.encode("cab") == std::vector<std::int64_t>{3, 1, 2});
  CHECK(v.encode("axb") == std::vector<std::int64_t>{1, char_vocabulary::unknown, 2});
  CHECK(v.decode({1, 0, 3, 99}) == "a?c?");
}

TEST_CASE("a window's targets are its inputs one id later, and a seed repeats the windows",
          "[actors][text]") {
  std::vector<std::int64_t> text(500);
  for (std::size_t i = 0; i < text.size(); ++i) text[i] = static_cast<std::int64_t>(i);
  auto s1 = make_window_sampler(text, 16, 3);
  auto s2 = make_window_sampler(text, 16, 3);
  REQUIRE(s1.has_value());
  REQUIRE(s2.has_value());
  const auto w = s1->sample(50);
  CHECK(w.count == 50);
  CHECK(w.context == 16);
  REQUIRE(w.inputs.size() == 50 * 16);
  REQUIRE(w.targets.size() == 50 * 16);
  for (std::size_t r = 0; r < 50; ++r) {
    const auto start = w.inputs[r * 16];
    CHECK(start + 16 < 500);  // room for the last target
    for (std::size_t j = 0; j < 16; ++j) {
      CHECK(w.inputs[r * 16 + j] == start + static_cast<std::int64_t>(j));
      CHECK(w.targets[r * 16 + j] == start + static_cast<std::int64_t>(j) + 1);
    }
  }
  const auto again = s2->sample(50);
  CHECK(again.inputs == w.inputs);
  CHECK(s1->sample(50).inputs != w.inputs);  // the engine moved on

  // Consecutive windows: every whole window, none overlapping, in order.
  const auto all = consecutive_windows(text, 16);
  CHECK(all.count == 31);  // (500 - 1) / 16
  CHECK(all.inputs.front() == 0);
  CHECK(all.inputs[16] == 16);
  CHECK(all.targets.back() == 31 * 16);

  CHECK_THAT(make_window_sampler(text, 0, 1).error().message(), Catch::Contains("context"));
  CHECK_THAT(make_window_sampler(text, 500, 1).error().message(), Catch::Contains("no window"));
}

TEST_CASE("missing fortune files say which package to install", "[actors][text]") {
  auto missing = load_fortunes({"fortunes"}, "/nonexistent/fortunes");
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().code() == celer::error_code::not_found);
  CHECK_THAT(missing.error().message(), Catch::Contains("/nonexistent/fortunes/fortunes") &&
                                          Catch::Contains("fortunes-min") &&
                                          Catch::Contains("install-deps.sh"));

  const auto dir = std::filesystem::temp_directory_path() / "celer-text-test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "two") << "first line\n%\nsecond\n  entry\n%\n";
  std::ofstream(dir / "none") << "%\n%\n";
  auto two = load_fortunes({"two"}, dir.string());
  REQUIRE(two.has_value());
  CHECK(*two == std::vector<std::string>{"first line\n", "second\n  entry\n"});
  CHECK(load_fortunes({"none"}, dir.string()).error().code() == celer::error_code::invalid_argument);
  CHECK_THAT(make_char_corpus(*two, 0.0, 1, "x").error().message(), Catch::Contains("(0, 1)"));
  CHECK_THAT(make_char_corpus(*two, 0.1, 1, "x").error().message(), Catch::Contains("empty"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("the unigram entropy is that of the ids' frequencies", "[actors][text]") {
  CHECK(unigram_entropy_bits({}) == 0);
  CHECK(unigram_entropy_bits({5, 5, 5}) == 0);
  CHECK(unigram_entropy_bits({1, 2, 1, 2}) == Approx(1.0));
  CHECK(unigram_entropy_bits({0, 1, 2, 3}) == Approx(2.0));
}
