// celer-train: distributed training with trainer workers as celer actors (apps/train/README.md).
//
//   celer-train                                          # the default: config/train/digits-mlp.yaml
//   celer-train --config config/train/digits-mlp.yaml --num-workers 4
//   celer-train --resume --name digits-mlp               # continue from the newest checkpoint
//   celer-train --address 10.0.0.1:6380 ...              # on a cluster
#include "config.hpp"
#include "default_config.hpp"
#include "driver.hpp"
#include "report.hpp"

#include <celer/actors/data.hpp>
#include <celer/actors/text.hpp>
#include <celer/celer.hpp>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace {

namespace app = celer::train_app;

std::atomic<bool> stop_requested{false};

extern "C" void on_stop_signal(int) {
  // The first Ctrl-C stops after the current call (saving a checkpoint when they are on);
  // a second one ends the process at once.
  stop_requested.store(true);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

std::string help_footer() {
  return R"(
HOW IT TRAINS
  Synchronous data parallelism. num_workers trainer-worker actors each hold a replica of
  the model, an optimiser and a shard of the training split (a data loader with its own
  threads and prefetch). They join a celer::collective group and start from rank 0's
  weights (a broadcast). Each step, every worker computes the gradients of its own
  batch_size x accumulate_steps samples, one ring allreduce averages them, and every
  replica takes the same optimiser step, so the replicas stay equal bit for bit (the run
  checks it at the end). Rank 0 evaluates on the validation split (20% of each class).
  With compression: sign or topk, each worker sends a compressed gradient (error
  feedback) by allgather instead. With max_failures > 0, a worker that fails is replaced
  alone, from its peers' weights and optimiser state (the survivors' allreduce is aborted
  at once), and the run goes on; if none survived, every worker is, from the newest
  checkpoint.
  With straggler_timeout_ms > 0, a step goes on with the gradients in hand that many ms
  after it began: a late worker's are left out of the mean and dropped ("skipped").

  mode: async trains through num_servers parameter-server actors instead, each holding a
  shard of the parameters and the optimiser state: every step, each worker pushes its own
  gradient, the servers apply it at once, and the worker pulls the weights they hold. No
  worker runs more than `staleness` steps ahead of the slowest: a step that would waits
  in the servers (staleness 0: the servers average each step, as synchronous training).
  mode: hybrid is synchronous for hybrid_sync_steps (or until the training loss
  plateaus: its mean over the last hybrid_plateau_window steps less than
  hybrid_plateau_tolerance below the window before), then asynchronous; the console says
  when it switches and metrics.jsonl carries each line's mode. Asynchronous steps take no
  compression; their checkpoints hold the servers' weights and optimiser state (--resume
  starts every worker at the slowest one's step), and with max_failures a failed worker
  is replaced alone, joining the servers at its clock (apps/train/README.md).
  target_accuracy > 0 stops the run once a validation reaches it (time to accuracy).

DATA
  data: digits (shipped), fashion-mnist (Debian's dataset-fashion-mnist), fortunes (text),
  or records:<dir>: the output directory of celer-preprocess (its manifest.json and CELERRC1
  shards; actors/preprocess/README.md, "The output directory"). Its samples must be
  f32:SHAPE (float32 values, used as they are) or u8:SHAPE (bytes, scaled to [0, 1]) with
  labels; the validation split is 20% of each class, as for the shipped data. A relative
  <dir> is made absolute (run.json keeps that). A missing directory, a bad manifest or
  samples the model cannot read exit 2 before any worker starts.

MODELS, PRECISION AND BATCH SIZE
  model: mlp or cnn on data: digits, fashion-mnist or records:<dir> (cnn: samples shaped
  CxHxW, e.g. f32:1x28x28, or a flat square like f32:64); model: transformer (a small
  character-level GPT-style decoder: context, width, heads, depth = decoder blocks) on
  data: fortunes (Debian's fortunes-min), where a sample is a window of `context`
  characters, the loss is per character, accuracy is next-character accuracy, and each
  validation also reports bits per character (val_bits_per_char).
  precision: bf16 runs each forward pass under LibTorch's CPU autocast to bfloat16; the
  weights (the master copy), the gradients, the allreduce and the optimiser stay float32.
  hierarchy: by_node runs the allreduce as a ring on each node, a ring among the nodes'
  leaders and a broadcast back, so only the leaders send across nodes; by_label groups by
  local_groups (one label per worker, e.g. racks) instead.
  sharding: speed (sync mode) gives each worker a micro-batch and a data shard in
  proportion to its speed (celer::gpu::shares of batch_size x num_workers): the speeds in
  worker_speeds (e.g. [3, 1], a mixed set of devices), or each worker's samples/s measured
  on a few batches at the start (within 10% of each other: equal) and again every
  sharding_interval steps from their compute times during the run (re-sharded when that
  saves 10% of a step's compute, two windows in a row). The allreduce's mean is weighed
  by the batches, so it is the mean over every sample of the step; a slower worker stops
  holding every step.
  loss_scale: dynamic (sync mode) multiplies each loss by a scale (loss_scale_init) before
  the backward pass and divides the gradients by it after; a step whose averaged gradient
  holds an inf or a nan is skipped on every replica and the scale halves, and the scale
  doubles after loss_scale_growth_interval clean steps (PyTorch's GradScaler rules). It is
  what fp16 on GPUs needs; on CPUs it keeps an overflowed step off the weights. The
  progress line shows the scale and the overflows; metrics.jsonl has loss_scale and
  overflow a step, and checkpoints keep the scaler's state.
  batch_size_policy: noise_scale (sync mode, 2+ workers, no compression) estimates the
  gradient noise scale B_simple each step from each worker's gradient norm against the
  averaged one (both allreduced, so every worker decides alike) and doubles the batch
  (more micro-batches a step, all workers at the same step) while B_simple exceeds it, up
  to max_batch_size samples a step, at most once per batch_size_cooldown steps; with
  batch_size_lr_scaling sqrt or linear the learning rate follows batch / starting batch.

CONFIGURATION (YAML)
  A config is a YAML mapping of these keys; flags win over the file. With no --config,
  the built-in config/train/digits-mlp.yaml is used (--print-config prints the config a run
  would use, after flags: a file to start from).

)" + app::key_help() +
         R"(
OUTPUT (--output, default ./celer_results/<name>)
  metrics.jsonl        a line per step: mode (sync or async), loss, accuracy, samples_per_s,
                       bytes_sent (per worker), data_wait_s, compute_s, allreduce_s (async:
                       push_pull_s, bound_wait_s, ahead), grad_norm, and with noise_scale
                       batch_size and noise_scale, with loss_scale dynamic loss_scale
                       and overflow (1: skipped); and val_loss, val_accuracy (fortunes:
                       val_bits_per_char) at each validation
  tensorboard/         the same as a TensorBoard event file: tensorboard --logdir <output>
  summary.json         final validation accuracy, samples/s, each replica's parameter digest
  report.html          one page to open in a browser: the outcome, the config, and plots
                       against step of the losses, accuracies, samples/s, the step time
                       split (data-wait / compute / allreduce), bytes sent and gradient
                       norm; self-contained (inline SVG, nothing fetched). Written at the
                       end, on Ctrl-C and on failure; --report-only rebuilds it
  run.json             the configuration used (--resume reads it)
  checkpoints/         with checkpoint_every > 0: model, optimiser and step (the newest 3)

  The progress line: step, epoch, training loss, samples/s, bytes each worker sent per
  step, and per step the time waiting for data, computing and in the allreduce.

EXAMPLES
  celer-train                                           # digits MLP, 2 workers, ~10 s
  celer-train --num-workers 4 --name digits-4           # 4 replicas, 4 shards
  celer-train --compression sign --name sign            # 1-bit gradients: 31x fewer bytes
  celer-train --mode async --staleness 2 --name async   # parameter servers, bounded staleness
  celer-train --mode hybrid --hybrid-sync-steps 40 --name hy   # sync for 40 steps, then async
  celer-train --target-accuracy 0.95 --eval-every 5     # stop at 95% (time to accuracy)
  celer-train --config config/train/fortunes-transformer.yaml  # a char transformer, ~1 min
  celer-train --data records:out/digits --name rec        # celer-preprocess's output
  celer-train --precision bf16 --name bf                # bf16 autocast, fp32 master weights
  celer-train --batch-size-policy noise_scale --max-batch-size 512 --name ns  # growing batch
  celer-train --loss-scale dynamic --precision bf16 --name ls  # skip steps that overflow
  celer-train --sharding speed --name sp                # batches by each worker's measured speed
  celer-train --loader-cost-ms 5 --name slow            # a slow loader shows as data-wait
  celer-train --checkpoint-every 50 --name ck           # then Ctrl-C, and:
  celer-train --resume --name ck                        # on from the newest checkpoint
  celer-train --report-only --name ck                   # rebuild ck's report.html from its files
  celer-train --address 127.0.0.1:6380                  # on a cluster (celer start ...)
)";
}

/// CELER_TRAIN_INJECT_FAILURE=RANK:STEP[:exit]: that worker throws as it begins that step
/// (the first set of workers only), or with `exit` its worker process exits (on a cluster),
/// for tests of max_failures.
void read_injection(app::driver_options& o) {
  const char* spec = std::getenv("CELER_TRAIN_INJECT_FAILURE");
  if (spec == nullptr) return;
  int rank = -1;
  long long step = 0;
  char how[8] = {};
  const int got = std::sscanf(spec, "%d:%lld:%7[a-z]", &rank, &step, how);
  if (got < 2) return;
  o.fail_by_exit = got == 3 && std::string(how) == "exit";
  o.fail_rank = rank;
  o.fail_step = step;
}

/// CELER_TRAIN_SLOW_WORKER=RANK:MS: that worker's loader takes MS more per batch (the
/// others keep loader_cost_ms), for tests of the straggler option.
void read_slow_worker(app::driver_options& o) {
  const char* spec = std::getenv("CELER_TRAIN_SLOW_WORKER");
  if (spec == nullptr) return;
  int rank = -1;
  double ms = 0;
  if (std::sscanf(spec, "%d:%lf", &rank, &ms) != 2) return;
  o.slow_rank = rank;
  o.slow_ms = ms;
}

/// CELER_TRAIN_INJECT_OVERFLOW=RANK:STEP: that worker's gradient holds an inf at that step
/// (what an fp16 gradient that overflowed holds), for tests of loss_scale dynamic.
void read_overflow(app::driver_options& o) {
  const char* spec = std::getenv("CELER_TRAIN_INJECT_OVERFLOW");
  if (spec == nullptr) return;
  int rank = -1;
  long long step = 0;
  if (std::sscanf(spec, "%d:%lld", &rank, &step) != 2) return;
  o.overflow_rank = rank;
  o.overflow_step = step;
}

/// CELER_TRAIN_WORKER_SPEED=RANK:FRACTION[:STEP]: that worker computes at FRACTION
/// (0 < F <= 1) of its speed, as a slower device would, from STEP on (a device that
/// throttles mid-run; default: from the start): for tests and benchmarks of sharding: speed.
void read_worker_speed(app::driver_options& o) {
  const char* spec = std::getenv("CELER_TRAIN_WORKER_SPEED");
  if (spec == nullptr) return;
  int rank = -1;
  double fraction = 1;
  long long from = 0;
  const int got = std::sscanf(spec, "%d:%lf:%lld", &rank, &fraction, &from);
  if (got < 2 || !(fraction > 0 && fraction <= 1)) return;
  o.speed_rank = rank;
  o.speed_fraction = fraction;
  o.speed_from_step = got == 3 ? from : 0;
}

/// `dir` absolute and without a trailing '/': "out/digits/" -> "/cwd/out/digits".
std::string records_path(const std::string& dir) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(dir, ec);
  if (ec) p = dir;
  p = p.lexically_normal();
  if (!p.has_filename() && p.has_parent_path() && p != p.root_path()) p = p.parent_path();
  return p.string();
}

/// data: records:<dir>, before any worker starts: the directory, its manifest and every
/// shard's frame are sound, its samples are ones a trainer reads (load_records of one
/// sample), and the model can take their shape. invalid_argument naming what to change.
celer::expected<void> check_records(const app::train_config& cfg, const std::string& dir) {
  auto one = celer::actors::load_records(dir, /*limit=*/1);
  if (!one) return celer::error(one.error().code(), "data " + cfg.data + " cannot be read: " + one.error().message());
  const auto& shape = one->sample_shape;
  const bool flat_square = shape.size() == 1 && [&] {
    std::int64_t side = 1;
    while (side * side < shape[0]) ++side;
    return side * side == shape[0];
  }();
  std::string dims;
  for (auto d : shape) dims += (dims.empty() ? "" : "x") + std::to_string(d);
  if (cfg.model == "cnn" && shape.size() != 3 && !flat_square)
    return celer::error(celer::error_code::invalid_argument,
                        "key 'model' is 'cnn', but " + dir + " holds samples shaped " + dims +
                          ": a cnn reads CxHxW samples (e.g. f32:1x28x28) or a flat square (f32:64); use model: mlp");
  if (cfg.model == "cnn") {
    // Each conv block halves height and width (make_model in <celer/actors/torch/model.hpp>).
    std::int64_t side = shape.size() == 3 ? std::min(shape[1], shape[2]) : 1;
    if (flat_square) while (side * side < shape[0]) ++side;
    for (int i = 0; i < cfg.depth; ++i, side /= 2) {
      if (side < 2)
        return celer::error(celer::error_code::invalid_argument,
                            "key 'depth' is " + std::to_string(cfg.depth) + ": a cnn of that many blocks halves the " +
                              dims + " samples of " + dir + " to nothing; lower depth or use model: mlp");
    }
  }
  if (one->classes < 2)
    return celer::error(celer::error_code::invalid_argument,
                        "data " + cfg.data + " has " + std::to_string(one->classes) +
                          " class (classes in its manifest.json): a classifier needs at least 2");
  return {};
}

} // namespace

int main(int argc, char** argv) {
  // Worker processes run this binary too: they serve the trainer workers and never reach the CLI.
  celer::serve_if_worker();

  CLI::App cli{"celer-train: distributed training on celer. Trainer workers are actors, each with a\n"
               "replica of a LibTorch model (an MLP, a small CNN or a character-level transformer) and\n"
               "a shard of the data; their gradients are averaged by allreduce each step (synchronous\n"
               "data parallel), or pushed to parameter servers with bounded staleness (--mode async\n"
               "or hybrid).",
               "celer-train"};
  cli.footer(help_footer());
  cli.get_formatter()->column_width(34);
  std::string config_path, address;
  bool resume = false, print_config = false, report_only = false;
  double num_cpus = 0;
  app::train_config flags;  // only the fields of flags that were given are used
  cli.add_option("--config", config_path, "YAML config (default: the built-in config/train/digits-mlp.yaml)");
  cli.add_flag("--print-config", print_config,
               "Print the config this run would use (the file or the built-in default, after flags) as YAML and exit");
  cli.add_flag("--resume", resume, "Continue the run in the output directory from its newest checkpoint");
  cli.add_flag("--report-only", report_only, "Rebuild report.html from the run in the output directory, train nothing");
  // Every key of the config is a flag too (--num-workers for num_workers): config_keys().
  app::config_keys().add_flags(cli, flags);
  cli.add_option("--address", address, "HOST:PORT of a celer cluster (default: CELER_ADDRESS, else embedded)");
  cli.add_option("--num-cpus", num_cpus, "CPUs the embedded runtime offers (default: all)");
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return cli.exit(e) == 0 ? 0 : 2;
  }
  const std::string usage_hint = "\n(celer-train --help explains every key and flag)\n";

  // The config: run.json when resuming, else the file (or the built-in default).
  celer::expected<app::train_config> loaded = app::parse_config(app::default_config_yaml, "the built-in digits-mlp.yaml");
  if (!config_path.empty()) loaded = app::load_config_file(config_path);
  if (!loaded) {
    std::cerr << "celer-train: " << loaded.error().message() << usage_hint;
    return 2;
  }
  // Flags win over the file (and, for those that can change, over run.json on --resume,
  // where they are applied again below).
  app::config_keys().apply_flags(cli, flags, *loaded);
  if (print_config) {
    std::cout << "# celer-train config: " << (config_path.empty() ? "the built-in digits-mlp.yaml" : config_path)
              << ", after flags. Run it with: celer-train --config THIS_FILE\n"
              << app::config_keys().to_yaml(*loaded);
    return 0;
  }
  const std::string dir = app::output_dir(*loaded);
  if (report_only) {
    auto written = app::write_report(dir);
    if (!written) {
      std::cerr << "celer-train: " << written.error().message() << "\n";
      return 2;
    }
    std::cout << "celer-train: wrote " << *written << "\n";
    return 0;
  }
  if (resume) {
    std::ifstream in(dir + "/run.json");
    std::stringstream text;
    text << in.rdbuf();
    auto saved = in ? app::parse_config(text.str(), dir + "/run.json") : celer::expected<app::train_config>(
      celer::error(celer::error_code::not_found, "nothing to resume in " + dir + " (no run.json). Name the run "
                                                 "with --name or --output as when it was started."));
    if (!saved) {
      std::cerr << "celer-train: " << saved.error().message() << "\n";
      return 2;
    }
    saved->output = loaded->output;
    saved->name = loaded->name;
    loaded = std::move(*saved);
    app::config_keys().apply_flags(cli, flags, *loaded);
  }
  app::train_config cfg = std::move(*loaded);
  if (auto ok = app::validate(cfg); !ok) {
    const std::string source = resume ? dir + "/run.json" : config_path;
    std::cerr << "celer-train: " << (source.empty() ? "" : source + ": ") << ok.error().message() << usage_hint;
    return 2;
  }
  // records:<dir> as the workers will read it: absolute, so no worker's working directory
  // matters (and run.json names it so for --resume from elsewhere).
  if (cfg.data.starts_with("records:")) cfg.data = "records:" + records_path(cfg.data.substr(8));
  if (!resume && std::filesystem::exists(dir + "/run.json")) {
    std::cerr << "celer-train: " << dir << " already holds a run. Continue it with --resume, or choose another "
              << "--name or --output.\n";
    return 2;
  }

  // Embedded, the workers read the data from this machine: say now if it is not there, rather
  // than through every worker's failure.
  const char* cluster = std::getenv("CELER_ADDRESS");
  const bool embedded = address.empty() && (cluster == nullptr || *cluster == '\0');
  if (cfg.data.starts_with("records:")) {
    // On a cluster the workers may see a directory this machine does not; one this machine
    // sees is checked here too.
    const std::string records_dir = cfg.data.substr(8);
    if (embedded || std::filesystem::exists(records_dir)) {
      if (auto ok = check_records(cfg, records_dir); !ok) {
        std::cerr << "celer-train: " << ok.error().message() << usage_hint;
        return 2;
      }
    } else {
      std::cout << "celer-train: " << records_dir << " is not on this machine; the workers read it on theirs\n";
    }
  } else if (embedded) {
    const auto readable = [&]() -> celer::expected<void> {
      if (cfg.data == "fortunes") {
        if (auto t = celer::actors::load_fortunes(); !t) return t.error();
        return {};
      }
      auto data = cfg.data == "digits" ? celer::actors::load_digits() : celer::actors::load_fashion_mnist(true, 1);
      if (!data) return data.error();
      return {};
    }();
    if (!readable) {
      std::cerr << "celer-train: the " << cfg.data << " data cannot be read: " << readable.error().message() << "\n";
      return 2;
    }
  }

  app::driver_options options;
  options.resume = resume;
  options.stop_requested = &stop_requested;
  read_injection(options);
  read_slow_worker(options);
  read_overflow(options);
  read_worker_speed(options);
  try {
    celer::init(celer::init_options{.address = address, .num_cpus = num_cpus});
  } catch (const celer::exception& e) {
    std::cerr << "celer-train: cannot start celer" << (address.empty() ? "" : " on " + address) << ": " << e.what() << "\n";
    return 1;
  }
  options.where = !address.empty() ? "the cluster at " + address
                  : cluster != nullptr && *cluster != '\0' ? "the cluster at " + std::string(cluster)
                                                            : "embedded celer";
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  const int code = app::run_training(cfg, options, std::cout);
  celer::shutdown();
  // The report, from what the run left in its directory (the driver has closed the metrics
  // files): after a refused start (2) there is nothing new to draw.
  if (code != 2 && std::filesystem::exists(dir + "/run.json")) {
    const std::string status = code == 0     ? std::string()
                               : code == 130 ? "Stopped before the end (Ctrl-C or SIGTERM); --resume continues from the "
                                               "newest checkpoint, if the run saved any."
                                             : "The run failed (exit " + std::to_string(code) + "); the console output says why.";
    if (auto written = app::write_report(dir, status)) std::cout << "celer-train: report in " << *written << "\n";
    else std::cerr << "celer-train: no report: " << written.error().message() << "\n";
  }
  return code;
}
