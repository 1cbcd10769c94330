#pragma once
// A training run's configuration: read from YAML (config/train/*.yaml), overridden by flags,
// checked with errors that name the key, written back as run.json (which --resume reads with
// the same reader: JSON is YAML). Each key is declared once, in config_keys() (config.cpp):
// its YAML key, its flag, its --help line and its choices come from there
// (<celer/apps/config_schema.hpp>); a new key is a field here and a line there.
//
//   auto cfg = celer::train_app::load_config_file("config/train/digits-mlp.yaml");
//   if (!cfg) { std::cerr << cfg.error().message() << "\n"; return 2; }
//   cfg->num_workers = 4;                               // a flag overrides the file
//   if (auto ok = celer::train_app::validate(*cfg); !ok) ...
//
// No runtime calls, no LibTorch: the driver, the tests and --help share it.
#include <celer/apps/config_schema.hpp>
#include <celer/error.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace celer::train_app {

/// Everything one run needs. Every field is a YAML key of the same name and a flag
/// (`--num-workers` for num_workers).
struct train_config {
  std::string name = "digits-mlp";
  /// "digits", "fashion-mnist", "fortunes" (text: model transformer), or "records:<dir>": an
  /// output directory of celer-preprocess (f32 or u8 samples with labels; load_records in
  /// <celer/actors/data.hpp>). celer-train makes a relative <dir> absolute before the workers
  /// start.
  std::string data = "digits";
  /// Use only the first `limit` samples (0: all).
  std::uint64_t limit = 0;
  /// Trainer-worker actors, one model replica each (synchronous data parallel).
  int num_workers = 2;
  double cpus_per_worker = 1;
  /// The model (<celer/actors/torch/model.hpp>): "mlp" or "cnn" (digits, fashion-mnist, records), or
  /// "transformer" (<celer/actors/torch/transformer.hpp>, data fortunes).
  std::string model = "mlp";
  /// mlp: hidden units, cnn: channels, transformer: the embedding width (a multiple of heads).
  int width = 128;
  /// mlp: hidden layers, cnn: conv blocks, transformer: decoder blocks.
  int depth = 2;
  /// transformer: characters a window holds (a sample is one window), and attention heads.
  std::int64_t context = 64;
  std::int64_t heads = 4;
  double dropout = 0.0;
  /// The optimiser: "adam", "adamw" or "sgd".
  std::string optimizer = "adam";
  double lr = 0.002;
  double weight_decay = 0.0;
  double momentum = 0.9;
  /// Samples per micro-batch on each worker; a step sees
  /// batch_size × accumulate_steps × num_workers samples.
  std::int64_t batch_size = 32;
  /// Micro-batches whose gradients add up before each allreduce and optimiser step.
  std::int64_t accumulate_steps = 1;
  /// Passes over the training split (all workers together); max_steps > 0 stops earlier.
  std::int64_t epochs = 8;
  std::int64_t max_steps = 0;
  /// What each worker sends of its gradient: "none" (float32, averaged by a ring allreduce),
  /// "sign" (1 bit a value and a scale per 1,024, with error feedback) or "topk" (the
  /// topk_fraction largest entries, with error feedback); compressed packets are exchanged
  /// by allgather and every worker averages them alike (<celer/actors/trainer/compression.hpp>).
  std::string compression = "none";
  double topk_fraction = 0.01;
  /// "fp32", or "bf16": the forward pass under LibTorch's CPU autocast to bfloat16 (matrix
  /// products in bf16), the weights, gradients, allreduce and optimiser in float32.
  std::string precision = "fp32";
  /// "fixed", or "noise_scale": the batch grows (doubles) while the gradient noise scale
  /// (<celer/actors/trainer/noise_scale.hpp>) says a larger one is efficient, up to
  /// max_batch_size samples a step (all workers), at most once per batch_size_cooldown steps.
  std::string batch_size_policy = "fixed";
  std::int64_t max_batch_size = 1024;
  std::int64_t batch_size_cooldown = 50;
  /// noise_scale: how the learning rate follows the batch: "none" (lr stays), "sqrt" (lr x
  /// sqrt(batch / starting batch), the usual rule for Adam) or "linear" (lr x batch / start,
  /// Goyal et al.'s rule for SGD).
  std::string batch_size_lr_scaling = "none";
  /// "none", or "dynamic" loss scaling (<celer/actors/trainer/loss_scale.hpp>, mode sync):
  /// each micro-batch's loss is multiplied by a scale before backward and the gradients
  /// divided by it after; when the averaged gradient holds an inf or a nan the step is
  /// skipped on every replica and the scale halves, and after loss_scale_growth_interval
  /// clean steps in a row it doubles. What half-precision training on GPUs needs (fp16
  /// gradients underflow without it); in float32 or bf16 it guards the weights from a
  /// step that overflowed.
  std::string loss_scale = "none";
  double loss_scale_init = 65536;
  std::int64_t loss_scale_growth_interval = 2000;
  /// Scale the averaged gradient down to this L2 norm when it is larger (0: no clipping).
  double clip_grad_norm = 0;
  /// Steps between evaluations on the validation split (0: every epoch), and the last step
  /// always.
  std::int64_t eval_every = 0;
  /// Steps one actor call runs (calls cost a round trip; steps within one do not).
  std::int64_t steps_per_call = 10;
  /// Steps between checkpoints (0: none; the last step is saved when checkpoints are on).
  std::int64_t checkpoint_every = 0;
  /// Worker failures survived (an exception, a dead process): the failed worker is replaced
  /// alone and takes its peers' weights and optimiser state; when none survived, every
  /// worker is, from the newest checkpoint (step 0 without one); in asynchronous steps the
  /// replacement joins the parameter servers at its clock. 0: a failure ends the run.
  int max_failures = 0;
  /// Seconds a worker waits for a peer in a collective before the group is broken (or, in
  /// async mode, at the staleness bound for the slowest worker). A worker that died is
  /// noticed at once, from its failed call; this bounds a peer that hangs.
  double collective_timeout_s = 120;
  /// The straggler option (mode sync, no compression; 0: off): a step goes on with the
  /// gradients in hand this many ms after it began; a worker whose gradients are not in is
  /// left out of that step's mean, and its late gradients are dropped.
  std::int64_t straggler_timeout_ms = 0;
  /// How the allreduce groups the workers (<celer/actors/collective.hpp>): "none" (one
  /// ring), "by_node" (a ring on each node, one among the nodes' leaders, a broadcast back:
  /// only the leaders send across nodes), or "by_label" (local groups by local_groups, one
  /// label per worker, e.g. a rack). Compressed gradients go by allgather, not grouped.
  std::string hierarchy = "none";
  std::vector<std::string> local_groups;
  /// "equal", or "speed": each worker's micro-batch and data shard in proportion to its
  /// speed (celer::gpu::shares of batch_size x num_workers), and the allreduce's mean
  /// weighed to match, so a slower device stops holding every step. The speeds are
  /// worker_speeds when given (one per worker, e.g. the devices' TFLOPS), else each
  /// worker's samples/s measured at the start (one worker at a time; within 10% of each
  /// other they count as equal) and again every sharding_interval steps. Mode sync, fixed
  /// batch size.
  std::string sharding = "equal";
  std::vector<double> worker_speeds;
  /// sharding speed with measured speeds: steps between re-measurements from the workers'
  /// own compute times during the run; the batch is split again when that saves at least
  /// 10% of a step's compute, two windows in a row (0: the start's measurement only).
  std::int64_t sharding_interval = 25;
  /// The loader's threads and prefetch window, per worker.
  int loader_threads = 1;
  int prefetch = 4;
  /// Busy time (ms) added to assembling each batch: stands in for decoding or augmentation,
  /// to see what a slow loader costs (the progress line's data-wait). 0 by default.
  double loader_cost_ms = 0;
  /// How the workers combine their gradients: "sync" (an allreduce each step, every replica
  /// the same), "async" (each worker pushes its gradient to the parameter servers and pulls
  /// fresh weights, at most `staleness` steps ahead of the slowest) or "hybrid" (sync first,
  /// then async: after hybrid_sync_steps, or once the loss plateaus, whichever comes first).
  std::string mode = "sync";
  /// async and hybrid: steps a worker may run ahead of the slowest (0: the servers average
  /// each step, which is synchronous training through them).
  int staleness = 2;
  /// async and hybrid: parameter-server actors, each holding a shard of the parameters.
  int num_servers = 1;
  /// hybrid: switch to async after this many synchronous steps (0: only by the plateau rule).
  std::int64_t hybrid_sync_steps = 50;
  /// hybrid: switch once the mean training loss of the last `window` steps is less than
  /// `tolerance` (a fraction) below that of the `window` steps before (window 0: off).
  std::int64_t hybrid_plateau_window = 0;
  double hybrid_plateau_tolerance = 0.02;
  /// Stop once a validation reaches this accuracy (0: run every step); summary.json records
  /// the step and the seconds it took.
  double target_accuracy = 0;
  /// Seeds the initial weights and the batches' order.
  std::uint64_t seed = 1;
  /// Seconds between progress lines (a line also follows each evaluation).
  double progress_interval = 2;
  /// The output directory; empty: ./celer_results/<name>.
  std::string output;
};

/// The keys a config may have: each one's name, line of help, choices, flag (config.cpp).
[[nodiscard]] const apps::config_schema<train_config>& config_keys();

/// The keys a config may have, each with a one-line description: --help prints it.
[[nodiscard]] std::string key_help();

/// Reads YAML text (or JSON); `source` names it in errors. invalid_argument naming the key
/// (and the valid keys) for anything unknown or malformed.
[[nodiscard]] expected<train_config> parse_config(std::string_view text, std::string_view source);
/// Reads a YAML file; not_found when it cannot be read.
[[nodiscard]] expected<train_config> load_config_file(const std::string& path);

/// Checks the whole configuration (after flags). invalid_argument naming the key and what
/// to change.
[[nodiscard]] expected<void> validate(const train_config& cfg);

/// The configuration as JSON (run.json), every key spelt out; parse_config reads it.
[[nodiscard]] std::string to_json(const train_config& cfg);

/// The output directory: `output`, or ./celer_results/<name>.
[[nodiscard]] std::string output_dir(const train_config& cfg);

} // namespace celer::train_app
