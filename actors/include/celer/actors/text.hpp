#pragma once
/// A character-level text corpus for small language models, read offline from Debian's
/// `fortunes-min` (/usr/share/games/fortunes: `fortunes`, `literature`, `riddles`; BSD
/// licence, see actors/README.md): a byte vocabulary, token ids, a train/validation split by
/// whole fortunes, and a sampler of (input, target) windows. No LibTorch: ids are int64, so
/// the loader (<celer/actors/loader.hpp>) and the transformer
/// (<celer/actors/torch/transformer.hpp>) share them.
///
///   auto docs = celer::actors::load_fortunes();              // expected<vector<string>>
///   if (!docs) { std::cerr << docs.error().message(); return 1; }
///   auto corpus = celer::actors::make_char_corpus(*docs, /*validation_fraction=*/0.1,
///                                                 /*seed=*/7, "fortunes");
///   auto sampler = celer::actors::make_window_sampler(corpus->train, /*context=*/64,
///                                                     /*seed=*/1);
///   auto w = sampler->sample(/*count=*/32);  // w.inputs, w.targets: 32 × 64 ids each
///
/// Every random choice comes from a seeded std::mt19937_64 through this library's own draws
/// (not the standard distributions, whose algorithms differ between standard libraries): the
/// same seed gives the same split and the same windows anywhere.

#include <celer/error.hpp>

#include <array>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace celer::actors {

/// Where Debian's fortunes-min (and fortunes) install their fortune files.
inline constexpr std::string_view debian_fortunes_dir = "/usr/share/games/fortunes";

/// The entries of fortune files, in file order: each file is a run of entries separated by
/// lines holding only "%" (the strfile format; the `.dat` index files are not needed). An
/// entry keeps its own newlines. `files` are names in `dir` (Debian's fortunes-min by
/// default). not_found, naming the file and the package to install, when one is missing;
/// invalid_argument when the files hold no entry.
[[nodiscard]] expected<std::vector<std::string>> load_fortunes(
  const std::vector<std::string>& files = {"fortunes", "literature", "riddles"},
  const std::string& dir = {});

/// A byte-level vocabulary: id 0 is the unknown byte, ids 1..size()-1 the distinct bytes of
/// the text it was built from, in byte order. A byte it has not seen encodes as unknown.
class char_vocabulary {
public:
  static constexpr std::int64_t unknown = 0;

  char_vocabulary() = default;
  /// The bytes of `text`.
  explicit char_vocabulary(std::string_view text);

  /// Ids in all, unknown included.
  [[nodiscard]] std::int64_t size() const noexcept {
    return static_cast<std::int64_t>(bytes_.size()) + 1;
  }
  [[nodiscard]] std::int64_t id(char c) const noexcept {
    return ids_[static_cast<unsigned char>(c)];
  }
  /// The byte of `id`; '?' for unknown or an id out of range.
  [[nodiscard]] char byte(std::int64_t id) const noexcept;
  [[nodiscard]] std::vector<std::int64_t> encode(std::string_view text) const;
  [[nodiscard]] std::string decode(const std::vector<std::int64_t>& ids) const;

private:
  std::array<std::int64_t, 256> ids_{};  // byte -> id, 0 (unknown) for bytes not seen
  std::string bytes_;                    // id - 1 -> byte
};

/// A text split into training and validation token ids.
struct char_corpus {
  std::string name;
  /// Built from the training text alone: a byte seen only in validation is unknown there.
  char_vocabulary vocabulary;
  std::vector<std::int64_t> train;
  std::vector<std::int64_t> validation;
};

/// Splits `documents` (whole fortunes, so no window straddles the two parts) into training
/// and validation text: the documents are shuffled by `seed` and the first
/// round(validation_fraction × n) go to validation. Each part is its documents in that order,
/// each followed by "%\n" (the fortune separator, so a model learns where an entry ends).
/// invalid_argument for a fraction outside (0, 1) or a part that would be empty.
[[nodiscard]] expected<char_corpus> make_char_corpus(const std::vector<std::string>& documents,
                                                     double validation_fraction,
                                                     std::uint64_t seed, std::string name);

/// `count` windows of `context` ids each, row-major: targets[i] is the id that follows
/// inputs[i] in the text (a language model's next-token labels).
struct token_windows {
  std::int64_t count = 0;
  std::int64_t context = 0;
  std::vector<std::int64_t> inputs;
  std::vector<std::int64_t> targets;
};

/// Windows at random starts, uniform over every start that leaves room for the targets.
/// Holds a reference to `tokens`, which must outlive it. One owner; not thread-safe.
class window_sampler {
public:
  /// Needs tokens.size() > context >= 1 (make_window_sampler checks it).
  window_sampler(const std::vector<std::int64_t>& tokens, std::int64_t context, std::uint64_t seed);

  [[nodiscard]] token_windows sample(std::int64_t count);
  [[nodiscard]] std::int64_t context() const noexcept { return context_; }
  /// The engine, for a checkpoint to save and restore (checkpoint::snapshot::add_rng).
  [[nodiscard]] std::mt19937_64& engine() noexcept { return rng_; }

private:
  const std::vector<std::int64_t>* tokens_;
  std::int64_t context_;
  std::mt19937_64 rng_;
};

/// invalid_argument when context < 1 or the text is not longer than one window.
[[nodiscard]] expected<window_sampler> make_window_sampler(const std::vector<std::int64_t>& tokens,
                                                           std::int64_t context, std::uint64_t seed);

/// Every whole window of `context` ids that does not overlap the last, from the start (for
/// evaluation: each id but the first is a target once, up to the last whole window).
[[nodiscard]] token_windows consecutive_windows(const std::vector<std::int64_t>& tokens,
                                                std::int64_t context);

/// The entropy, in bits per token, of the ids' (>= 0) frequencies in `tokens` (what a model that
/// knows only those frequencies scores): the baseline a language model must beat.
[[nodiscard]] double unigram_entropy_bits(const std::vector<std::int64_t>& tokens);

} // namespace celer::actors
