// celer::preprocess's text stages (<celer/actors/preprocess/text.hpp>): lower-casing, tokens
// and the length filter; token counts merged across blocks and sent as msgpack; the word
// vocabulary and byte-level BPE, their files (written to a temporary folder, damaged, edited),
// and BPE training checked against a from-scratch recount.
#include <celer/actors/preprocess/text.hpp>

#include "checkpoint_fixtures.hpp"  // temp_dir, read_file, write_file

#include <catch2/catch.hpp>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

using namespace celer::preprocess;

namespace {

using celer::error_code;
using checkpoint_test::read_file;
using checkpoint_test::temp_dir;
using checkpoint_test::write_file;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

/// `body` framed as the vocabulary and BPE files are: "end <crc32>" after it.
std::string with_end_line(const std::string& body) {
  char crc[9];
  std::snprintf(crc, sizeof crc, "%08lx",
                ::crc32(0, reinterpret_cast<const Bytef*>(body.data()),
                        static_cast<uInt>(body.size())));
  return body + "end " + crc + "\n";
}

/// A file's bytes without its end line (what the CRC covers).
std::string body_of(const std::string& file) {
  return file.substr(0, file.size() - 13);
}

token_counts counts_of(std::initializer_list<std::pair<const char*, std::uint64_t>> list) {
  token_counts c;
  for (const auto& [token, n] : list) c.add_token(token, n);
  return c;
}

/// Words of 2-9 letters over a small alphabet, counts falling off like Zipf's law: the shape
/// of real word counts, reproducibly.
token_counts synthetic_words(std::size_t distinct, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  token_counts c;
  const std::string letters = "etaoinshrdlucmfwypvbgkq";
  while (c.size() < distinct) {
    std::string w(2 + gen() % 8, ' ');
    for (auto& ch : w) ch = letters[std::min(gen() % letters.size(), gen() % letters.size())];
    c.add_token(w, 1 + 100000 / (1 + c.size()));
  }
  return c;
}

/// BPE training the slow, obvious way (every pair recounted before each merge): what the
/// incremental trainer must agree with.
std::vector<bpe_model::merge> reference_bpe(const token_counts& words, std::size_t vocab_size,
                                            std::uint64_t min_count) {
  std::vector<std::pair<std::vector<std::uint32_t>, std::uint64_t>> ws;
  for (const auto& [w, n] : words.counts) {
    std::vector<std::uint32_t> s{' '};
    for (char ch : w) s.push_back(static_cast<unsigned char>(ch));
    ws.emplace_back(s, n);
  }
  std::vector<bpe_model::merge> merges;
  while (256 + merges.size() < vocab_size) {
    std::map<bpe_model::merge, std::uint64_t> pairs;  // ordered: ties go to the smaller pair
    for (const auto& [s, n] : ws)
      for (std::size_t j = 0; j + 1 < s.size(); ++j) pairs[{s[j], s[j + 1]}] += n;
    if (pairs.empty()) break;
    auto best = pairs.begin();
    for (auto it = pairs.begin(); it != pairs.end(); ++it)
      if (it->second > best->second) best = it;
    if (best->second < min_count) break;
    const auto [a, b] = best->first;
    const auto made = static_cast<std::uint32_t>(256 + merges.size());
    merges.push_back(best->first);
    for (auto& [s, n] : ws) {
      std::vector<std::uint32_t> out;
      for (std::size_t j = 0; j < s.size();) {
        if (j + 1 < s.size() && s[j] == a && s[j + 1] == b) {
          out.push_back(made);
          j += 2;
        } else {
          out.push_back(s[j++]);
        }
      }
      s = out;
    }
  }
  return merges;
}

} // namespace

// ---- normalising and splitting ---------------------------------------------------------------

TEST_CASE("lowercase changes ASCII letters only, so UTF-8 text stays the same UTF-8",
          "[preprocess]") {
  item it{.text = "Hello WORLD, ÄÖÜ Straße ΣΊΣΥΦΟΣ 123 Z@["};
  lowercase(it);
  CHECK(it.text == "hello world, ÄÖÜ straße ΣΊΣΥΦΟΣ 123 z@[");
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  std::string lower = all;
  lowercase(lower);
  for (int b = 0; b < 256; ++b) {
    const int expect = b >= 'A' && b <= 'Z' ? b + 32 : b;
    REQUIRE(static_cast<unsigned char>(lower[static_cast<std::size_t>(b)]) == expect);
  }
}

TEST_CASE("whitespace tokens split on ASCII whitespace only and the length filter counts them",
          "[preprocess]") {
  const std::string text = "  a\tbc \n\r\vd\fé\xC2\xA0x  ";  // U+00A0 is not ASCII whitespace
  const auto tokens = whitespace_tokens(text);
  CHECK(tokens == std::vector<std::string_view>{"a", "bc", "d", "é\xC2\xA0x"});
  CHECK(count_whitespace_tokens(text) == 4);
  CHECK(whitespace_tokens("").empty());
  CHECK(whitespace_tokens(" \t\n").empty());
  const item it{.text = text};
  CHECK(keep_by_length(it, 4, 4));
  CHECK(keep_by_length(it, 1));
  CHECK_FALSE(keep_by_length(it, 5));
  CHECK_FALSE(keep_by_length(it, 0, 3));
  CHECK(keep_by_length(item{}, 0, 0));
  CHECK_FALSE(keep_by_length(item{}, 1));
}

// ---- counts --------------------------------------------------------------------------------

TEST_CASE("token counts merged in any order and grouping, and sent as msgpack, are the same",
          "[preprocess]") {
  const std::vector<std::string> blocks = {"the cat sat on the mat", "The cat ran",
                                           "a mat a cat the end", "", "grüße grüße"};
  token_counts whole;
  for (const auto& b : blocks) whole.add(b);
  CHECK(whole.count("the") == 3);
  CHECK(whole.count("The") == 1);
  CHECK(whole.count("cat") == 3);
  CHECK(whole.count("grüße") == 2);
  CHECK(whole.count("dog") == 0);
  CHECK(whole.total() == 17);
  CHECK(whole.size() == 10);

  std::vector<token_counts> parts(blocks.size());
  for (std::size_t i = 0; i < blocks.size(); ++i) parts[i].add(item{.text = blocks[i]});
  token_counts forward, backward, pairs_first;
  for (const auto& p : parts) forward.merge(p);
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) backward.merge(*it);
  token_counts left, right;
  left.merge(parts[3]);
  left.merge(parts[1]);
  right.merge(parts[4]);
  right.merge(parts[0]);
  right.merge(parts[2]);
  pairs_first.merge(right);
  pairs_first.merge(left);
  CHECK(forward == whole);
  CHECK(backward == whole);
  CHECK(pairs_first == whole);

  const std::string wire = celer::detail::pack(whole);
  CHECK(wire == celer::detail::pack(backward));  // equal counts, equal bytes
  const auto back = celer::detail::unpack<token_counts>(wire, "token counts");
  CHECK(back == whole);
}

// ---- vocabulary ----------------------------------------------------------------------------

TEST_CASE("a vocabulary puts the specials first, then tokens by count descending, ties by bytes",
          "[preprocess]") {
  const auto counts = counts_of({{"b", 5}, {"a", 5}, {"z", 9}, {"é", 5}, {"B", 5}, {"rare", 1},
                                 {"<unk>", 4}});
  auto v = vocabulary::build(counts);
  REQUIRE(v);
  std::vector<std::string> order;
  for (std::uint32_t i = 0; i < v->size(); ++i) order.emplace_back(*v->token(i));
  // "<unk>" in the data is the special, not a second id; "é" (0xC3 0xA9) sorts after ASCII.
  CHECK(order == std::vector<std::string>{"<pad>", "<unk>", "z", "B", "a", "b", "é", "rare"});
  CHECK(v->specials() == 2);
  CHECK(v->unknown_id() == 1);
  CHECK(v->count(1) == 4);
  CHECK(v->count(2) == 9);
  CHECK(v->count(99) == 0);
  CHECK_FALSE(v->token(8).has_value());
  CHECK(v->id("a") == 4u);
  CHECK_FALSE(v->id("nope").has_value());
  CHECK(v->encode("  z a\tnope <unk> <pad>") == std::vector<std::uint32_t>{2, 4, 1, 1, 0});
  item it{.text = "rare z"};
  v->encode(it);
  CHECK(it.tokens == std::vector<std::uint32_t>{7, 2});

  auto small = vocabulary::build(counts, {.min_count = 5, .max_size = 4,
                                          .specials = {"[UNK]", "[CLS]"}, .unknown = "[UNK]"});
  REQUIRE(small);
  CHECK(small->size() == 4);
  CHECK(*small->token(0) == "[UNK]");
  CHECK(*small->token(2) == "z");
  CHECK(*small->token(3) == "B");
  CHECK(small->encode("a b") == std::vector<std::uint32_t>{0, 0});

  auto no_limit = vocabulary::build(counts, {.min_count = 6});
  REQUIRE(no_limit);
  CHECK(no_limit->size() == 3);  // <pad>, <unk>, z
}

TEST_CASE("vocabulary options that cannot work are invalid_argument", "[preprocess]") {
  const auto counts = counts_of({{"a", 1}});
  const auto refused = [&](const vocab_options& o, const std::string& part) {
    auto v = vocabulary::build(counts, o);
    REQUIRE_FALSE(v);
    CHECK(v.error().code() == error_code::invalid_argument);
    CHECK(contains(v.error().message(), part));
  };
  refused({.specials = {"<pad>", "<pad>", "<unk>"}}, "listed twice");
  refused({.specials = {"<pad>", "<u nk>"}, .unknown = "<u nk>"}, "holds whitespace");
  refused({.specials = {"<pad>"}}, "not among the specials");
  refused({.max_size = 1}, "leaves no room");
  token_counts odd;
  odd.add_token("two words");
  auto bad = vocabulary::build(odd);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code() == error_code::invalid_argument);
}

TEST_CASE("a vocabulary file holds a header, a token and count a line and a checksum, and loads "
          "back equal",
          "[preprocess]") {
  temp_dir dir;
  const auto path = (dir.path / "vocab.txt").string();
  auto v = vocabulary::build(counts_of({{"the", 3}, {"grüße", 2}, {"a", 3}}));
  REQUIRE(v);
  REQUIRE(v->save(path));
  const std::string expect = with_end_line("celer-vocabulary 1 tokens=5 specials=2 unknown=1\n"
                                           "<pad>\t0\n"
                                           "<unk>\t0\n"
                                           "a\t3\n"
                                           "the\t3\n"
                                           "grüße\t2\n");
  CHECK(read_file(path) == expect);
  CHECK_FALSE(std::filesystem::exists(path + ".part"));
  auto back = vocabulary::load(path);
  REQUIRE(back);
  CHECK(*back == *v);
  CHECK(back->encode("the grüße x") == std::vector<std::uint32_t>{3, 4, 1});
}

TEST_CASE("a damaged, cut, edited or foreign vocabulary file is refused, naming what is wrong",
          "[preprocess]") {
  temp_dir dir;
  const auto path = (dir.path / "vocab.txt").string();
  auto v = vocabulary::build(counts_of({{"x", 3}, {"y", 2}, {"z", 1}}));
  REQUIRE(v);
  REQUIRE(v->save(path));
  const std::string good = read_file(path);
  const auto refused = [&](const std::string& bytes, error_code code, const std::string& part) {
    write_file(path, bytes);
    auto r = vocabulary::load(path);
    REQUIRE_FALSE(r);
    CHECK(r.error().code() == code);
    CHECK(contains(r.error().message(), path));
    CHECK(contains(r.error().message(), part));
  };
  std::string flipped = good;
  flipped[good.find("y\t")] = 'q';
  refused(flipped, error_code::data_loss, "checksum mismatch");
  for (std::size_t cut : {std::size_t{0}, std::size_t{20}, good.size() - 1, good.size() - 5}) {
    refused(good.substr(0, cut), cut < 17 ? error_code::invalid_argument : error_code::data_loss,
            cut < 17 ? "not a vocabulary file" : "truncated");
  }
  refused(good + "extra\t1\n", error_code::data_loss, "truncated or damaged");
  refused("celer-bpe 1 merges=0\n", error_code::invalid_argument, "not a vocabulary file");
  // Edited files with a recomputed checksum: the structure is checked too.
  const std::string body = body_of(good);
  auto edited = [&](std::string from, std::string to) {
    std::string b = body;
    b.replace(b.find(from), from.size(), to);
    return with_end_line(b);
  };
  refused(edited("vocabulary 1", "vocabulary 2"), error_code::failed_precondition,
          "version 2; this build reads version 1");
  refused(edited("tokens=5", "tokens=6"), error_code::data_loss, "its header says 6");
  refused(edited("unknown=1", "unknown=2"), error_code::data_loss, "line 1");
  refused(edited("y\t2", "y\t4"), error_code::data_loss, "line 5: \"y\" is out of order");
  refused(edited("z\t1", "a\t2"), error_code::data_loss, "line 6: \"a\" is out of order");
  refused(edited("y\t2", "y 2"), error_code::data_loss, "line 5: expected");
  refused(edited("y\t2\nz\t1", "x\t2\nz\t1"), error_code::data_loss, "\"x\" is listed twice");
  auto missing = vocabulary::load((dir.path / "none.txt").string());
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code() == error_code::not_found);
}

// ---- byte-level BPE ------------------------------------------------------------------------

TEST_CASE("BPE on \"aaabdaaabac\" makes the textbook merges aa, ab, then (aa)(ab)",
          "[preprocess]") {
  // Wikipedia's example: Z = aa, Y = ab, X = ZY. Pairs with overlaps: (a, a) 4, then (Z, a)
  // and (a, b) tie at 2 and the smaller ids (97, 98) win.
  auto m = bpe_model::train(counts_of({{"aaabdaaabac", 1}}), {.vocab_size = 1000});
  REQUIRE(m);
  CHECK(m->merges() == std::vector<bpe_model::merge>{{'a', 'a'}, {'a', 'b'}, {256, 257}});
  CHECK(m->size() == 259);
  CHECK(*m->token(258) == "aaab");
  CHECK(m->encode("aaabdaaabac") == std::vector<std::uint32_t>{' ', 258, 'd', 258, 'a', 'c'});
  CHECK(m->encode("aaab aaab") == std::vector<std::uint32_t>{' ', 258, ' ', 258});
  CHECK(*m->decode(m->encode("aaabdaaabac")) == "aaabdaaabac");

  auto once = bpe_model::train(counts_of({{"aaabdaaabac", 1}}), {.vocab_size = 257});
  REQUIRE(once);
  CHECK(once->merges() == std::vector<bpe_model::merge>{{'a', 'a'}});
  auto none = bpe_model::train(counts_of({{"aaabdaaabac", 1}}), {.vocab_size = 256});
  REQUIRE(none);
  CHECK(none->merges().empty());
  CHECK(none->encode("hi") == std::vector<std::uint32_t>{' ', 'h', 'i'});
}

TEST_CASE("BPE decodes what it encodes, ASCII, UTF-8 and any bytes, words joined by one space",
          "[preprocess]") {
  token_counts words;
  words.add("the quick brown fox jumps over the lazy dog the end");
  words.add("Grüße aus Köln — naïve café 東京 東京 東京 🙂🙂 🙂🙂 здравствуйте мир мир");
  auto m = bpe_model::train(words, {.vocab_size = 400, .min_pair_count = 2});
  REQUIRE(m);
  CHECK(m->size() > 256);
  CHECK(m->size() <= 400);
  for (const std::string text : {"the quick brown fox", "Grüße aus Köln — 東京 🙂🙂",
                                 "unseen words, zebra! ünïcödé", "x", ""}) {
    const auto ids = m->encode(text);
    for (auto id : ids) REQUIRE(id < m->size());
    auto back = m->decode(ids);
    REQUIRE(back);
    CHECK(*back == text);
  }
  // Whitespace is normalised: the words come back joined by one space.
  CHECK(*m->decode(m->encode("  the\tlazy \n dog ")) == "the lazy dog");
  // Bytes that are not UTF-8 round-trip too: byte-level, no unknown id.
  std::string raw;
  for (int b = 0; b < 256; ++b)
    if (!is_ascii_space(static_cast<char>(b))) raw.push_back(static_cast<char>(b));
  CHECK(*m->decode(m->encode(raw)) == raw);
  // Frequent words end up one id each (with their marking space).
  CHECK(m->encode("the").size() == 1);
  item it{.text = "the end"};
  m->encode(it);
  CHECK(it.tokens == m->encode("the end"));
  auto bad = m->decode(std::vector<std::uint32_t>{' ', 70000});
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code() == error_code::invalid_argument);
  CHECK(contains(bad.error().message(), "id 70000 at position 1"));
}

TEST_CASE("BPE training is deterministic, independent of how the counts were merged, and agrees "
          "with a full recount before every merge",
          "[preprocess]") {
  const auto words = synthetic_words(600, 3);
  // The same counts split into blocks merged in two orders.
  std::vector<token_counts> blocks(4);
  std::size_t i = 0;
  for (const auto& [w, n] : words.counts) blocks[i++ % 4].add_token(w, n);
  token_counts forward, backward;
  for (const auto& b : blocks) forward.merge(b);
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) backward.merge(*it);

  auto a = bpe_model::train(words, {.vocab_size = 700, .min_pair_count = 2});
  auto b = bpe_model::train(forward, {.vocab_size = 700, .min_pair_count = 2});
  auto c = bpe_model::train(backward, {.vocab_size = 700, .min_pair_count = 2});
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(c);
  CHECK(a->size() == 700);
  CHECK(*a == *b);
  CHECK(*a == *c);
  CHECK(a->merges() == reference_bpe(words, 700, 2));

  // Counts of 1 and ties everywhere: min_pair_count stops it, and ties still agree.
  token_counts flat;
  flat.add("ab ba abab baba aab bba xyz zyx");
  for (std::uint64_t min : {1, 2, 3}) {
    auto f = bpe_model::train(flat, {.vocab_size = 300, .min_pair_count = min});
    REQUIRE(f);
    CHECK(f->merges() == reference_bpe(flat, 300, min));
  }
  auto rebuilt = bpe_model::from_merges(a->merges());
  REQUIRE(rebuilt);
  CHECK(*rebuilt == *a);
  CHECK(rebuilt->encode("stone tiles") == a->encode("stone tiles"));
}

TEST_CASE("BPE options and merge lists that cannot work are invalid_argument", "[preprocess]") {
  auto small = bpe_model::train(counts_of({{"ab", 2}}), {.vocab_size = 255});
  REQUIRE_FALSE(small);
  CHECK(small.error().code() == error_code::invalid_argument);
  CHECK(contains(small.error().message(), "vocab_size 255"));
  auto ahead = bpe_model::from_merges({{'a', 'b'}, {256, 258}});
  REQUIRE_FALSE(ahead);
  CHECK(ahead.error().code() == error_code::invalid_argument);
  CHECK(contains(ahead.error().message(), "merge 1 (256, 258) names an id not made before it"));
  auto twice = bpe_model::from_merges({{'a', 'b'}, {'a', 'b'}});
  REQUIRE_FALSE(twice);
  CHECK(contains(twice.error().message(), "repeats"));
  auto empty = bpe_model::train(token_counts{}, {});
  REQUIRE(empty);
  CHECK(empty->size() == 256);
}

TEST_CASE("a BPE model file lists its merges with their bytes and a checksum, loads back equal "
          "and is refused when damaged",
          "[preprocess]") {
  temp_dir dir;
  const auto path = (dir.path / "bpe.txt").string();
  auto m = bpe_model::train(counts_of({{"aaabdaaabac", 1}, {"ça", 2}}), {.vocab_size = 1000});
  REQUIRE(m);
  REQUIRE(m->save(path));
  const std::string good = read_file(path);
  // " ça" is 20 C3 A7 61: its three pairs count 2, as do (a, b) and, after aa, (aa, a);
  // (a, a) counts 4 with its overlaps. So aa first, then the pairs of count 2 by their ids.
  // actors/preprocess/README.md shows this file.
  CHECK(good == with_end_line("celer-bpe 1 merges=6\n"
                              "97 97 aa\n"
                              "32 195 \\x20\\xC3\n"
                              "97 98 ab\n"
                              "167 97 \\xA7a\n"
                              "256 258 aaab\n"
                              "257 259 \\x20\\xC3\\xA7a\n"));
  const std::string body = body_of(good);
  auto back = bpe_model::load(path);
  REQUIRE(back);
  CHECK(*back == *m);
  CHECK(back->encode("ça aaab") == m->encode("ça aaab"));

  const auto refused = [&](const std::string& bytes, error_code code, const std::string& part) {
    write_file(path, bytes);
    auto r = bpe_model::load(path);
    REQUIRE_FALSE(r);
    CHECK(r.error().code() == code);
    CHECK(contains(r.error().message(), path));
    CHECK(contains(r.error().message(), part));
  };
  std::string flipped = good;
  flipped[good.find("97 97") + 1] = '8';
  refused(flipped, error_code::data_loss, "checksum mismatch");
  refused(good.substr(0, good.size() - 3), error_code::data_loss, "truncated");
  refused("celer-vocabulary 1 tokens=0 specials=0 unknown=0\n", error_code::invalid_argument,
          "not a BPE model file");
  const auto edited = [&](const std::string& from, const std::string& to) {
    std::string b = body;
    b.replace(b.find(from), from.size(), to);
    return with_end_line(b);
  };
  refused(edited("97 97 aa", "98 97 aa"), error_code::data_loss, "line 2: the merged bytes are ba");
  refused(edited("97 97 aa", "97 999 aa"), error_code::data_loss, "not made before it");
  refused(edited("celer-bpe 1", "celer-bpe 7"), error_code::failed_precondition, "version 7");
  refused(edited("merges=", "merges=1"), error_code::data_loss, "its header says");
  auto missing = bpe_model::load((dir.path / "none.txt").string());
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code() == error_code::not_found);
}

TEST_CASE("BPE trains 20,000 distinct words to 2,000 ids and encodes every word back",
          "[preprocess]") {
  const auto words = synthetic_words(20000, 11);
  // Its time, with `-d yes`, is in actors/preprocess/README.md ("Limits").
  auto m = bpe_model::train(words, {.vocab_size = 2000, .min_pair_count = 2});
  REQUIRE(m);
  CHECK(m->size() == 2000);
  std::size_t ids = 0, bytes = 0;
  for (const auto& [w, n] : words.counts) {
    const auto encoded = m->encode(w);
    REQUIRE(*m->decode(encoded) == w);
    ids += encoded.size();
    bytes += w.size() + 1;
  }
  CHECK(ids * 3 < bytes * 2);  // merges shorten the words by more than a third (about half)
}
