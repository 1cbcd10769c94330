#pragma once
// The preprocessing worker actor (executor.hpp): takes one block of one pass at a time,
// reads its split (or the cached items of the pass before), runs the pass's stages, and
// returns the block's partial result or its output records. Internal to actors/preprocess.
#include "block_cache.hpp"

#include <celer/actors/preprocess/item.hpp>
#include <celer/actors/preprocess/pipeline.hpp>
#include <celer/codec.hpp>
#include <celer/handles.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace celer::preprocess::detail {

/// What a worker is started with.
struct worker_spec {
  pipeline spec;
  std::uint32_t index = 0;
  std::string cache_dir;
  /// Test and benchmark hooks (run_options): a slowed worker waits (slow_factor - 1) times
  /// its compute time after each block; a crashing one ends its process at the start of its
  /// crash_at_block-th block of the last pass, unless it runs in the driver's process.
  double slow_factor = 1;
  bool crash = false;
  std::uint64_t crash_at_block = 0;
  std::int64_t driver_pid = 0;
  MSGPACK_DEFINE(spec, index, cache_dir, slow_factor, crash, crash_at_block, driver_pid)
};

/// One block's outcome.
struct block_result {
  std::uint64_t block = 0;
  std::uint32_t pass = 0;
  /// Set when the pipeline failed on this block (a bad row, a stage's error): the run stops
  /// with it. Worker deaths are not reported here; the call fails instead.
  std::string error;
  std::uint8_t error_code = 0;
  /// A pass ending in a fitted stage: that stage's partial result.
  std::string partial;
  std::uint64_t items_in = 0, items_out = 0;
  key_digest keys;
  /// Seconds the worker spent on the block (read, stages, encoding; the slowed wait too).
  double seconds = 0;
  bool cached = false;
  /// The last pass: the block's records as a record file's bytes, and their schema.
  std::string schema;
  celer::bytes records;
  MSGPACK_DEFINE(block, pass, error, error_code, partial, items_in, items_out, keys, seconds,
                 cached, schema, records)
};

class preprocess_worker {
public:
  explicit preprocess_worker(worker_spec spec);
  block_result process(std::uint32_t pass, std::uint64_t block, split s,
                       celer::object_ref<std::vector<std::string>> fitted);

private:
  /// The items entering `pass` for split `s`: from the cache, else read and run through
  /// the earlier passes' stages.
  expected<std::vector<item>> items_for(std::uint32_t pass, const split& s,
                                        std::uint64_t split_hash, bool& cached,
                                        std::uint64_t& items_read);
  std::uint64_t cache_key(std::uint32_t pass, std::uint64_t split_hash) const;

  worker_spec spec_;
  runner runner_;
  block_cache cache_;
  /// The fitted states of the passes so far, fetched once per pass.
  std::optional<std::uint32_t> fitted_pass_;
  std::vector<std::string> fitted_;
  std::uint64_t last_pass_blocks_ = 0;
};

/// The actor factory (registered with CELER_REMOTE).
preprocess_worker* make_preprocess_worker(worker_spec spec);

/// A block's items as the records of a record file (output.field chooses the payload).
/// invalid_argument naming the key of an item whose payload does not fit the schema of the
/// first item.
[[nodiscard]] expected<std::pair<std::string, std::string>> encode_records(
  const std::vector<item>& items, const output_spec& output);

} // namespace celer::preprocess::detail
