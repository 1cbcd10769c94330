#pragma once
/// A trainer worker's data loader: threads assemble the batches of its shard ahead of the
/// trainer into a bounded queue (prefetch), and the loader counts how long the trainer waited
/// for them, so a run can tell loader time from compute time. No LibTorch: a batch is floats
/// and int64 labels (a dataset), or token ids (a text).
///
///   auto loader = celer::actors::make_data_loader(
///     celer::actors::dataset_source(train),                  // `train` outlives the loader
///     {.batch_size = 64, .threads = 4, .prefetch = 8, .seed = 7, .rank = rank, .world = world});
///   if (!loader) { std::cerr << loader.error().message(); return 1; }
///   while (auto b = loader->next()) {                         // epoch after epoch
///     step(b->x, b->y);                                       // compute
///     if (b->number == 1000) break;
///   }
///   auto s = loader->stats();   // s.wait_seconds: time the trainer spent blocked in next()
///
/// Deterministic: next() returns batch 0, 1, 2, ... of the same content in the same order
/// for the same seed, shard and options, whatever the number of threads. Threads only decide
/// how early a batch is ready.

#include <celer/actors/data.hpp>
#include <celer/error.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace celer::actors {

/// One batch as the trainer receives it.
struct batch {
  std::uint64_t epoch = 0;
  /// Its place in the loader's sequence, counted across epochs from 0.
  std::uint64_t number = 0;
  /// The samples it holds, in order: rows of a dataset, or windows of a text.
  std::vector<std::size_t> samples;
  /// A dataset's features: samples.size() × features floats, row-major.
  std::vector<float> x;
  /// A dataset's labels (samples.size()), or a text's targets (samples.size() × context).
  std::vector<std::int64_t> y;
  /// A text's input ids: samples.size() × context (empty for a dataset).
  std::vector<std::int64_t> inputs;
};

/// What a loader draws samples from. fill() runs on the loader's threads, several at once:
/// it must only read shared state, and must not throw (an exception there ends the program,
/// as any exception leaving a std::thread does).
class batch_source {
public:
  virtual ~batch_source() = default;
  /// How many samples there are (the loader shards and orders 0 .. size()-1).
  [[nodiscard]] virtual std::size_t size() const = 0;
  /// Fills `out`'s data for `out.samples`.
  virtual void fill(batch& out) const = 0;
};

/// The rows of `data` (x and y). `data` must outlive the loader.
[[nodiscard]] std::unique_ptr<batch_source> dataset_source(const dataset& data);

/// The whole non-overlapping windows of `context` ids of `tokens` (sample i starts at
/// i × context; inputs and next-id targets, as consecutive_windows in <celer/actors/text.hpp>).
/// `tokens` must outlive the loader.
[[nodiscard]] std::unique_ptr<batch_source> text_source(const std::vector<std::int64_t>& tokens,
                                                        std::int64_t context);

/// The samples worker `rank` of `world` owns in `epoch`: every sample 0 .. samples-1 is
/// permuted by (seed, epoch), the same permutation on every worker, and worker r takes
/// positions r, r + world, r + 2·world, ... So in each epoch the shards are disjoint and
/// cover every sample once; their sizes differ by at most one (no padding, unlike PyTorch's
/// DistributedSampler). Empty when rank >= world.
[[nodiscard]] std::vector<std::size_t> shard_order(std::size_t samples, std::size_t rank,
                                                   std::size_t world, std::uint64_t seed,
                                                   std::uint64_t epoch);

/// As above, with shards in proportion to `weights` (one per worker, each > 0; the world is
/// their count): the positions of the permutation are dealt by smooth weighted round robin
/// (each position goes to the worker whose running credit is highest, ties to the lower
/// rank), so worker r holds about weights[r] / Σ weights of every epoch, spread over it.
/// Equal weights deal r, r + world, ... exactly as the overload above. Empty when rank is
/// out of range or a weight is not above 0.
[[nodiscard]] std::vector<std::size_t> shard_order(std::size_t samples, std::size_t rank,
                                                   std::span<const double> weights, std::uint64_t seed,
                                                   std::uint64_t epoch);

struct loader_options {
  std::size_t batch_size = 32;
  /// Threads assembling batches (at least 1). Threads beyond `prefetch` stay idle.
  std::size_t threads = 2;
  /// Batches assembled or being assembled ahead of the trainer, at most (at least 1): the
  /// queue's bound, and so its memory (prefetch batches).
  std::size_t prefetch = 4;
  /// Orders the samples, epoch after epoch (shard_order).
  std::uint64_t seed = 0;
  std::size_t rank = 0;
  std::size_t world = 1;
  /// Empty: shards of equal size. Otherwise `world` weights, each > 0: shards in
  /// proportion (the weighted shard_order), for workers of different speeds that draw
  /// batches of different sizes.
  std::vector<double> shard_weights;
  /// Epochs to deliver; 0 for no end.
  std::uint64_t epochs = 0;
  /// Drop each epoch's last batch when it is short.
  bool drop_last = false;
  /// Busy time added to assembling each batch (a spin on the loader's thread, not a sleep):
  /// stands in for decoding or augmentation, to show what a slow loader costs. 0 by default.
  std::chrono::nanoseconds injected_cost{0};
};

/// A loader's counters since it started.
struct loader_stats {
  /// Batches assembled by the threads, and batches next() returned.
  std::uint64_t assembled = 0;
  std::uint64_t returned = 0;
  /// next() calls whose batch was not ready yet, and the time they spent blocked: what the
  /// loader cost the trainer (0 when it keeps ahead).
  std::uint64_t stalls = 0;
  double wait_seconds = 0;
  /// Time the threads spent assembling, summed over threads (injected cost included).
  double assemble_seconds = 0;
};

/// Batches of one shard, assembled ahead by a pool of threads. One consumer calls next()
/// (from one thread at a time); stats() may be called from any thread. The destructor stops
/// and joins the threads (a batch being assembled is finished first).
class data_loader {
public:
  data_loader(data_loader&&) noexcept;
  data_loader& operator=(data_loader&&) noexcept;
  ~data_loader();

  /// The next batch in order, waiting for it if it is not ready; nothing after the last
  /// epoch (never, with epochs = 0).
  [[nodiscard]] std::optional<batch> next();
  [[nodiscard]] loader_stats stats() const;
  /// Batches in each epoch of this shard.
  [[nodiscard]] std::size_t batches_per_epoch() const noexcept;

private:
  friend expected<data_loader> make_data_loader(std::unique_ptr<batch_source>, loader_options);
  struct state;
  explicit data_loader(std::unique_ptr<state> s);
  std::unique_ptr<state> s_;
};

/// Starts the threads, which begin assembling at once. invalid_argument for no source,
/// batch_size, threads or prefetch of 0, rank >= world, or a shard with no batch (empty,
/// or shorter than a batch with drop_last).
[[nodiscard]] expected<data_loader> make_data_loader(std::unique_ptr<batch_source> source,
                                                     loader_options options);

} // namespace celer::actors
