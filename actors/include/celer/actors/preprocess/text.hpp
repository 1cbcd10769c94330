#pragma once
/// The text stages of celer-preprocess: lower-casing, whitespace tokens and a length filter;
/// token counts that merge across blocks and processes; a word vocabulary built from them;
/// and a byte-level BPE tokenizer trained on the same counts.
///
///   namespace pp = celer::preprocess;
///   pp::token_counts counts;                  // one per block of items, then merged
///   for (auto& it : items) { pp::lowercase(it); counts.add(it); }
///   total.merge(counts);                      // counts travel as msgpack between processes
///
///   auto vocab = pp::vocabulary::build(total, {.min_count = 2, .max_size = 30000});
///   if (!vocab) return fail(vocab.error());
///   vocab->encode(it);                        // it.tokens: ids, "<unk>"'s for unknown words
///   (void)vocab->save("out/vocab.txt");       // check it; pp::vocabulary::load reads it
///
///   auto bpe = pp::bpe_model::train(total, {.vocab_size = 2000});
///   bpe->encode(it);                          // it.tokens: byte-level BPE ids
///   auto text = bpe->decode(it.tokens);       // the words of it.text joined by one space
///
/// Everything here is deterministic: the same counts (merged in any order) build the same
/// vocabulary and train the same BPE model, on every machine. Pure functions and plain
/// values: no runtime calls, no threads, no locks; a built vocabulary or model may be read
/// by many threads at once. The file formats are in actors/preprocess/README.md.

#include <celer/actors/preprocess/item.hpp>
#include <celer/codec.hpp>
#include <celer/error.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace celer::preprocess {

// ---- normalising and splitting ---------------------------------------------------------------

/// A–Z become a–z in `text`; every other byte stays, so UTF-8 text stays valid UTF-8 (and
/// non-ASCII letters keep their case).
void lowercase(std::string& text) noexcept;
/// lowercase(it.text).
void lowercase(item& it) noexcept;

/// True for the ASCII whitespace bytes: space, \t, \n, \v, \f, \r.
[[nodiscard]] constexpr bool is_ascii_space(char c) noexcept {
  return c == ' ' || (c >= '\t' && c <= '\r');
}

/// The maximal runs of non-whitespace bytes of `text` (whitespace: is_ascii_space), in order:
/// views into `text`. "  a\tbc \n" gives {"a", "bc"}. Non-ASCII bytes are never split.
[[nodiscard]] std::vector<std::string_view> whitespace_tokens(std::string_view text);
/// whitespace_tokens(text).size(), without the vector.
[[nodiscard]] std::size_t count_whitespace_tokens(std::string_view text) noexcept;

/// Whether `it` passes a length filter: min_tokens <= whitespace tokens of it.text <=
/// max_tokens (both ends included; the default max is no limit).
[[nodiscard]] bool keep_by_length(const item& it, std::size_t min_tokens,
                                  std::size_t max_tokens =
                                    std::numeric_limits<std::size_t>::max()) noexcept;

// ---- counts --------------------------------------------------------------------------------

/// How often each whitespace token occurs: what a vocabulary is built from and what BPE is
/// trained on. Each block of items is counted on its own, the partial counts travel as
/// msgpack and merge into one (merge is a sum, so any order and grouping gives the same).
struct token_counts {
  /// Token bytes → occurrences. Sorted by bytes, so equal counts encode to equal bytes.
  std::map<std::string, std::uint64_t, std::less<>> counts;

  /// Counts every whitespace token of `text`.
  void add(std::string_view text);
  /// add(it.text).
  void add(const item& it) { add(it.text); }
  /// Adds `n` occurrences of `token` as it is (no splitting).
  void add_token(std::string_view token, std::uint64_t n = 1);
  /// Adds every count of `other`.
  void merge(const token_counts& other);

  /// The occurrences of `token` (0 if never seen).
  [[nodiscard]] std::uint64_t count(std::string_view token) const noexcept;
  /// Distinct tokens.
  [[nodiscard]] std::size_t size() const noexcept { return counts.size(); }
  /// All occurrences.
  [[nodiscard]] std::uint64_t total() const noexcept;
  friend bool operator==(const token_counts&, const token_counts&) = default;

  MSGPACK_DEFINE(counts)
};

/// What BPE is trained on: each distinct whitespace word and its count. The same thing as
/// token_counts (count with `add`, merge with `merge`, send as msgpack).
using word_counts = token_counts;

// ---- vocabulary ----------------------------------------------------------------------------

struct vocab_options {
  /// Tokens seen fewer times are left out (they encode as `unknown`).
  std::uint64_t min_count = 1;
  /// The most ids, specials included; 0: no limit. The most frequent tokens are kept.
  std::size_t max_size = 0;
  /// Ids 0, 1, ... in this order: non-empty, distinct, without whitespace.
  std::vector<std::string> specials = {"<pad>", "<unk>"};
  /// The special unknown tokens encode as; must be one of `specials`.
  std::string unknown = "<unk>";
};

/// A word vocabulary: the specials first, then the counted tokens by count descending, ties
/// by their bytes ascending (memcmp order). Encoding splits text on whitespace and looks
/// each token up; a token equal to a special gets the special's id.
class vocabulary {
public:
  /// Builds the vocabulary of `counts` under `options`. invalid_argument for specials that
  /// are empty, repeat or hold whitespace, an `unknown` not among them, a max_size below the
  /// number of specials, or a counted token that is empty or holds whitespace (token_counts
  /// filled by hand); otherwise deterministic.
  [[nodiscard]] static expected<vocabulary> build(const token_counts& counts,
                                                  const vocab_options& options = {});

  /// Reads a file `save` wrote (the format: actors/preprocess/README.md). not_found for a
  /// missing file; invalid_argument for a file of another kind; failed_precondition for
  /// another format version; data_loss naming the line for a damaged or edited file (its
  /// checksum, its line count, a token line, duplicates, the order).
  [[nodiscard]] static expected<vocabulary> load(const std::string& path);
  /// Writes the vocabulary as a text file, a token and its count a line, and a checksum
  /// line; through `path + ".part"` renamed to `path`, so a crash leaves no half file.
  [[nodiscard]] expected<void> save(const std::string& path) const;

  /// The ids of `text`'s whitespace tokens; unknown tokens give unknown_id().
  [[nodiscard]] std::vector<std::uint32_t> encode(std::string_view text) const;
  /// it.tokens = encode(it.text).
  void encode(item& it) const { it.tokens = encode(it.text); }

  /// The id of `token`, if it has one.
  [[nodiscard]] std::optional<std::uint32_t> id(std::string_view token) const;
  /// The token with id `id`; std::nullopt for an id >= size().
  [[nodiscard]] std::optional<std::string_view> token(std::uint32_t id) const;
  /// How often the token with id `id` was counted (a special: its count in the data, usually
  /// 0); 0 for an id >= size().
  [[nodiscard]] std::uint64_t count(std::uint32_t id) const noexcept;
  /// All ids: specials and tokens.
  [[nodiscard]] std::size_t size() const noexcept { return tokens_.size(); }
  /// How many of the first ids are specials.
  [[nodiscard]] std::size_t specials() const noexcept { return specials_; }
  [[nodiscard]] std::uint32_t unknown_id() const noexcept { return unknown_; }

  friend bool operator==(const vocabulary& a, const vocabulary& b) noexcept {
    return a.tokens_ == b.tokens_ && a.counts_ == b.counts_ && a.specials_ == b.specials_ &&
           a.unknown_ == b.unknown_;
  }

private:
  vocabulary() = default;
  struct string_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  void index();

  std::vector<std::string> tokens_;
  std::vector<std::uint64_t> counts_;
  std::unordered_map<std::string, std::uint32_t, string_hash, std::equal_to<>> ids_;
  std::size_t specials_ = 0;
  std::uint32_t unknown_ = 0;
};

// ---- byte-level BPE ------------------------------------------------------------------------

struct bpe_options {
  /// The most ids: the 256 bytes and the merges (so at least 256).
  std::size_t vocab_size = 1000;
  /// Merging stops when the most frequent pair occurs fewer times than this (0 acts as 1).
  std::uint64_t min_pair_count = 2;
};

/// Byte-level byte-pair encoding. Ids 0–255 are the bytes; id 256 + r is merge r, the
/// concatenation of the two ids it merges. Each whitespace word is encoded on its own as
/// " " + word (a leading space marks a word's start, as GPT-2 and SentencePiece do), so
/// merges may hold a word's start (" the") but never cross words; any bytes encode (UTF-8
/// or not), there is no unknown id.
///
/// Training (Sennrich et al. 2016, on word counts): every word " " + w as its bytes,
/// weighted by its count; repeatedly, the most frequent adjacent pair (overlaps counted, so
/// "aaa" holds 2 of (a, a); ties: the smaller (left id, right id)) becomes a new id and
/// replaces its occurrences left to right. Pair counts are kept up to date incrementally,
/// only in the words that held the merged pair.
class bpe_model {
public:
  using merge = std::pair<std::uint32_t, std::uint32_t>;

  /// Trains on `words` until vocab_size ids or no pair occurs min_pair_count times.
  /// invalid_argument for a vocab_size below 256 or above 2^32. Deterministic: the same
  /// counts (merged in any order) give the same merges.
  [[nodiscard]] static expected<bpe_model> train(const word_counts& words,
                                                 const bpe_options& options = {});
  /// The model of these merges, in rank order (how a model travels as msgpack: its
  /// merges()). invalid_argument for a merge naming an id not made before it, or a pair
  /// merged twice.
  [[nodiscard]] static expected<bpe_model> from_merges(std::vector<merge> merges);

  /// Reads a file `save` wrote (format: actors/preprocess/README.md); errors as
  /// vocabulary::load's.
  [[nodiscard]] static expected<bpe_model> load(const std::string& path);
  /// Writes the merges as a text file, one a line with the merged bytes for people, and a
  /// checksum line; through `path + ".part"`.
  [[nodiscard]] expected<void> save(const std::string& path) const;

  /// The ids of `text`: each whitespace word's " " + word, merged by rank (the merge of the
  /// lowest rank present first, all its occurrences left to right) until none applies.
  [[nodiscard]] std::vector<std::uint32_t> encode(std::string_view text) const;
  /// it.tokens = encode(it.text).
  void encode(item& it) const { it.tokens = encode(it.text); }
  /// The bytes of `ids` concatenated, less the first byte if it is the first word's marking
  /// space: decode(encode(t)) is t's whitespace words joined by one space (t itself when t
  /// is words separated by single spaces). invalid_argument naming the position of an id
  /// >= size().
  [[nodiscard]] expected<std::string> decode(std::span<const std::uint32_t> ids) const;

  /// The bytes of id `id`; std::nullopt for an id >= size().
  [[nodiscard]] std::optional<std::string_view> token(std::uint32_t id) const;
  /// 256 + merges().size().
  [[nodiscard]] std::size_t size() const noexcept { return tokens_.size(); }
  /// The merges in rank order: merge r made id 256 + r.
  [[nodiscard]] const std::vector<merge>& merges() const noexcept { return merges_; }

  friend bool operator==(const bpe_model& a, const bpe_model& b) { return a.merges_ == b.merges_; }

private:
  bpe_model();
  /// Appends merge (a, b), whose ids exist: its token and rank.
  void add_merge(merge m);
  /// Encodes one word's bytes (the marking space included) onto `out`.
  void encode_word(std::string_view bytes, std::vector<std::uint32_t>& out) const;

  std::vector<merge> merges_;
  /// Each id's bytes.
  std::vector<std::string> tokens_;
  /// (left << 32 | right) → rank.
  std::unordered_map<std::uint64_t, std::uint32_t> ranks_;
};

} // namespace celer::preprocess
