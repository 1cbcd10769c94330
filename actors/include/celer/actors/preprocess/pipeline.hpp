#pragma once
/// A preprocessing pipeline: where the items come from, the stages they go through, and the
/// shards they end in. Built in C++ or read from YAML by celer-preprocess (the same names);
/// run over a cluster by `run_pipeline` (executor.hpp), or here, on one thread, by `runner`.
///
///   namespace pp = celer::preprocess;
///   pp::pipeline p;
///   p.input = {.format = pp::input_format::jsonl, .paths = {"catalog-00.jsonl"},
///              .fields = {.key = "id", .label = "label", .category = "category",
///                         .text = {"title", "description"}, .values = {"price", "rating"}}};
///   p.stage("lowercase").stage("tokenize").stage("normalize", {{"mode", "zscore"}})
///    .stage("hash_features", {{"dims", "256"}});
///   p.output = {.field = "values", .shards = 8};
///   if (auto ok = p.validate(); !ok) fail(ok.error());   // names the stage and parameter
///
/// Stages are of three kinds:
/// - map stages change each item alone (lowercase, tokenize, filter, hash_features,
///   to_float, augment, and the apply step of a fitted stage);
/// - fitted stages need the whole data set first: `normalize` (feature statistics),
///   `vocabulary` (token counts), `bpe` (word counts), `rebalance` (class counts). A run
///   makes one pass over every block up to such a stage, gathering mergeable partial
///   results; the driver merges them into the stage's fitted state (the means, the
///   vocabulary, the merges, the class rates), and the next pass applies it;
/// - `sample` (stratified) and `rebalance` decide per item from a hash of its key, so every
///   worker decides alike, in any order: a class keeps (or is copied to) its expected share,
///   not an exact count.
/// The stage list and what each stage takes are in actors/preprocess/README.md, "Stages".
#include <celer/actors/preprocess/item.hpp>
#include <celer/actors/preprocess/readers.hpp>
#include <celer/codec.hpp>
#include <celer/error.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace celer::preprocess {

namespace detail {
class stage;
}

enum class input_format { csv, jsonl, text, idx };
[[nodiscard]] std::string_view input_format_name(input_format f) noexcept;
[[nodiscard]] expected<input_format> parse_input_format(std::string_view name);

struct input_spec {
  input_format format = input_format::jsonl;
  /// Files in order (csv, jsonl, text); for idx: the images file.
  std::vector<std::string> paths;
  /// idx only: the labels file.
  std::string labels;
  /// Which columns (csv) or fields (jsonl) fill which item fields (readers.hpp).
  field_map fields;
  char delimiter = ',';
  /// Items per block (the unit a worker takes; about this many, cut at a line end).
  std::uint32_t block_items = 1024;
  /// Read only the first `limit` items of each file (0: all), for trying a config out.
  std::uint64_t limit = 0;
  MSGPACK_DEFINE(format, paths, labels, fields, delimiter, block_items, limit)
};

/// One stage: an operation's name and its parameters, as written in YAML.
struct stage_spec {
  std::string op;
  std::map<std::string, std::string> params;
  MSGPACK_DEFINE(op, params)
};

struct output_spec {
  /// What each record's payload is: "values" (float32: "f32:<width>"), "pixels"
  /// ("u8:<c>x<h>x<w>"), "tokens" ("u32:tokens") or "text" ("text").
  std::string field = "values";
  /// Shard files to write.
  std::uint32_t shards = 8;
  /// "key": a shard by each key's hash (consistent hashing of keys onto shards);
  /// "category": every shard holds each category in proportion (balanced_assign), by count;
  /// "category_size": the same, balancing the payload bytes (two-level sharding).
  std::string shard_by = "key";
  /// Class names for the manifest, when the labels have names.
  std::vector<std::string> label_names;
  MSGPACK_DEFINE(field, shards, shard_by, label_names)
};

struct pipeline {
  input_spec input;
  std::vector<stage_spec> stages;
  output_spec output;
  MSGPACK_DEFINE(input, stages, output)

  /// Appends a stage (C++ callers); validate() checks it.
  pipeline& stage(std::string op, std::map<std::string, std::string> params = {});
  /// Every stage known and its parameters well-formed, the input and output usable:
  /// invalid_argument naming the stage (by number and op) and the parameter.
  [[nodiscard]] expected<void> validate() const;
  /// 16 hex digits of XXH64 over the canonical encoding of the input spec, the stages and
  /// the output: what celer-preprocess's cache and manifest name a config by.
  [[nodiscard]] std::string hash() const;
};

/// A part of one input file that one worker reads: a line-aligned byte range (csv, jsonl,
/// text) or a range of images (idx), with the number of its first row.
struct split {
  std::uint32_t file = 0;
  std::uint64_t begin = 0, end = 0;
  /// The number of the split's first item among the file's items (from 0), and of its first
  /// line among the file's lines (from 0; blank lines counted).
  std::uint64_t first_row = 0, first_line = 0;
  MSGPACK_DEFINE(file, begin, end, first_row, first_line)
};

/// Cuts the input into splits of about `input.block_items` items. Reads each file once to
/// find its line ends (CSV: outside quotes); an IDX file only by its header. A gzipped CSV,
/// JSON Lines or text file is one split (a gzip stream cannot be entered mid-way). Errors
/// name the file.
[[nodiscard]] expected<std::vector<split>> plan_splits(const input_spec& input);

/// Reads one split's items. Errors name the file and row.
[[nodiscard]] expected<std::vector<item>> read_split(const input_spec& input, const split& s);

/// A validated pipeline, ready to run: its stages compiled and cut into passes at each
/// fitted stage. Copyable; one thread at a time per copy (workers each hold one).
class runner {
public:
  [[nodiscard]] static expected<runner> make(const pipeline& p);

  /// How many passes a run makes over the data: 1 + the fitted stages.
  [[nodiscard]] std::size_t passes() const noexcept { return passes_.size(); }
  /// Pass `pass` over one block: applies its map stages to `items` in place (items may be
  /// dropped or copied), given the fitted states of the earlier passes (`fitted[k]` for
  /// pass k's fitted stage); then, if the pass ends at a fitted stage, returns that stage's
  /// partial result for these items (msgpack bytes; empty otherwise).
  [[nodiscard]] expected<std::string> run(std::size_t pass, std::vector<item>& items,
                                          const std::vector<std::string>& fitted) const;
  /// Only the partial result of pass `pass`'s fitted stage over `items` that already went
  /// through the pass's map stages (the stage cache's items); empty for the last pass.
  [[nodiscard]] expected<std::string> partial(std::size_t pass, const std::vector<item>& items) const;
  /// Merges pass `pass`'s partial results into its fitted stage's state (msgpack bytes).
  [[nodiscard]] expected<std::string> fit(std::size_t pass,
                                          const std::vector<std::string>& partials) const;
  /// A line per fitted state for people ("normalize: mean 12.3 ... over 825000 items").
  [[nodiscard]] std::string describe_fitted(std::size_t pass, const std::string& fitted) const;

  const pipeline& spec() const noexcept { return spec_; }

private:
  struct pass_range {
    std::size_t first = 0, fitted_stage = 0;  // stages [first, fitted_stage) are mapped
    bool ends_in_fit = false;
  };
  pipeline spec_;
  std::vector<std::shared_ptr<const detail::stage>> stages_;
  std::vector<pass_range> passes_;
};

/// Runs the whole pipeline on this thread over every split (the reference for the
/// distributed run: the same items, in the same order). For tests and small inputs.
[[nodiscard]] expected<std::vector<item>> run_local(const pipeline& p);

} // namespace celer::preprocess
MSGPACK_ADD_ENUM(celer::preprocess::input_format);
