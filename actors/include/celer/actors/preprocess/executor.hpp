#pragma once
/// Runs a pipeline (pipeline.hpp) over the cluster: preprocessing worker actors take blocks
/// from a shared queue (work_queue.hpp: work stealing, dynamic re-sharding), and the output
/// lands in shard files of CELERRC1 records (records.hpp) with a manifest (manifest.hpp).
///
///   namespace pp = celer::preprocess;
///   celer::init(argc, argv);                  // embedded, or --celer-address for a cluster
///   auto result = pp::run_pipeline(p, {.output_dir = "out/catalog", .workers = 4});
///   if (!result) { std::cerr << result.error().message() << "\n"; return 1; }
///   std::cout << result->items << " items, keys " << result->keys.hex() << "\n";
///
/// How a run goes:
/// - The input is cut into splits (plan_splits). Each block of work is one split; each
///   worker reads its splits itself from the input files, so the input must be readable at
///   the same path on every node (as Ray Data's local paths must).
/// - A pipeline with fitted stages makes one pass per fitted stage before the last: each
///   pass returns each block's partial result (small: statistics, counts) to the driver,
///   which merges them and hands the fitted state to the next pass. With a cache, each pass
///   also keeps every block's items as they leave its stages, so the next pass starts from
///   them instead of reading and computing again.
/// - In the last pass each block comes back as the bytes of a record file, a store object
///   (shared memory on the driver's node; the store moves it between nodes), and the driver
///   copies its records into the output shards in block order, so the output does not
///   depend on which worker did what or when.
/// - A worker that dies loses nothing: the blocks it held go back to the queue, it is
///   restarted, and a block done twice is written once.
#include <celer/actors/preprocess/item.hpp>
#include <celer/actors/preprocess/pipeline.hpp>
#include <celer/actors/preprocess/work_queue.hpp>
#include <celer/error.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace celer::preprocess {

/// What the driver knows while a run goes on, for a progress line.
struct run_progress {
  std::size_t pass = 0, passes = 1;
  work_queue_stats queue;
  std::uint64_t items_in = 0, items_out = 0;
  /// Seconds since the run began.
  double seconds = 0;
  std::size_t worker_failures = 0, cache_hits = 0;
};

struct run_options {
  /// Where the shards and manifest.json go (made if missing; files of an earlier run with
  /// the same names are replaced).
  std::string output_dir;
  /// Worker actors; each holds `cpus_per_worker` CPUs while it lives.
  std::size_t workers = 2;
  double cpus_per_worker = 1;
  /// Blocks each worker holds at once (one running, the rest waiting in its mailbox).
  std::size_t prefetch = 2;
  work_queue_options queue;
  /// Where passes keep their blocks' items for the next pass and for later runs (keyed by a
  /// content hash of the split's bytes, the pipeline and the fitted states); empty: none.
  std::string cache_dir;
  /// How often a worker that dies is started again before the run gives up on it.
  int max_worker_restarts = 3;
  /// Worker names ("w0", "w1", ...) are spread over the nodes (scheduling: spread).
  bool spread = true;
  /// Called on the driver's thread after each block and at the end of each pass.
  std::function<void(const run_progress&)> on_progress;
  /// For tests and benchmarks: worker `slow_worker` (its number) takes `slow_factor` times
  /// as long per block as it computes (it waits the rest), as a slower node would.
  int slow_worker = -1;
  double slow_factor = 1;
  /// For tests: worker `crash_worker` ends its process (std::_Exit) at the start of its
  /// `crash_at_block`-th block of the last pass (1: its first), in its first life only.
  int crash_worker = -1;
  std::uint64_t crash_at_block = 0;
};

struct pass_figures {
  double seconds = 0;
  work_queue_stats queue;
  std::map<std::string, std::size_t> blocks_by_worker;
  /// The fitted stage's state, for people (empty for the last pass).
  std::string fitted;
};

struct run_result {
  std::uint64_t items_in = 0, items = 0;
  key_digest keys;
  std::vector<std::string> shard_files;
  std::vector<pass_figures> passes;
  double seconds = 0;
  std::size_t worker_failures = 0, cache_hits = 0;
  std::string config_hash, schema;
  /// Records in each shard, and the worst relative skew of a category (label) over the
  /// shards: max over labels and shards of |n(label, shard) - n(label) / shards| divided by
  /// n(label) / shards (0: every shard holds each label in exact proportion).
  std::vector<std::uint64_t> shard_records;
  double worst_category_skew = 0;
};

/// Runs `p` (celer must be initialised). Errors: the pipeline's (validate), the input's
/// (a missing file, a bad row: invalid_argument naming the file and row), the output
/// directory's, or unavailable when every worker died past its restarts.
[[nodiscard]] expected<run_result> run_pipeline(const pipeline& p, const run_options& options);

} // namespace celer::preprocess
