// celer-tune: hyperparameter tuning with trials as celer actors (apps/tune/README.md).
//
//   celer-tune                                   # the default: config/tune/digits.yaml
//   celer-tune --config config/tune/fashion_mnist.yaml --num-samples 32
//   celer-tune --resume --name digits            # continue an interrupted experiment
//   celer-tune --address 10.0.0.1:6380 ...       # on a cluster
#include "config.hpp"
#include "default_config.hpp"
#include "driver.hpp"
#include "experiment_dir.hpp"

#include <celer/actors/data.hpp>
#include <celer/celer.hpp>

#include <CLI/CLI.hpp>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <optional>

#include <unistd.h>

namespace {

namespace app = celer::tune_app;

std::atomic<bool> stop_requested{false};

extern "C" void on_stop_signal(int) {
  // The first Ctrl-C stops cleanly (running trials are left for --resume); a second one ends
  // the process at once.
  stop_requested.store(true);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

std::string help_footer() {
  return R"(
CONFIGURATION (YAML)
  A config is a YAML mapping; every key but the nested ones is also a flag above
  (num_samples is --num-samples; --searcher and --scheduler give a name), and flags win over
  the file. With no --config, the built-in config/tune/digits.yaml is used. --print-config
  prints the config a run would use, after flags: a starting point for your own.

    name: digits                # the output directory is ./celer_results/<name>
    data: digits                # digits | fashion-mnist | synthetic (no model, see below)
    metric: val_accuracy        # val_accuracy | val_loss | train_accuracy | train_loss
                                #   (synthetic: score)
    num_samples: 48             # trials (grid: passes over the grid)
    max_epochs: 27
    searcher: tpe               # random | grid | tpe, or {name: tpe, n_startup_trials: 10}
    scheduler:                  # fifo | asha | median | pbt
      name: asha
      grace_period: 1           # asha, median: no stop before this epoch
      reduction_factor: 3       # asha: the top 1/3 at each rung goes on
      # median: min_samples_required, use_running_mean
      # pbt: perturbation_interval, burn_in_period, quantile_fraction,
      #      resample_probability, mutations: [lr, weight_decay]
    cpus_per_trial: 1           # fractions allowed
    gpus_per_trial: 0           # fractions share a GPU
    gpu_memory_gb: 0            # the least GPU memory a trial needs, and per batch size:
    gpu_memory_gb_by_batch: {}  #   {256: 8} asks 8 GB for trials with batch_size >= 256
    max_failures: 1             # restarts from the last checkpoint before a trial is ERROR
    checkpoint_every: 1         # epochs between checkpoints (0: none)
    keep_checkpoints: 2
    search_space:
      lr: {loguniform: [1.0e-4, 3.0e-2]}
      width: {choice: [32, 64, 128, 256]}
      depth: {int: [1, 3]}      # int: both bounds included
      dropout: {uniform: [0.0, 0.3]}
      batch_size: {grid_search: [32, 128]}
      optimizer: {choice: [adam, sgd]}
      model: mlp                # a fixed value: every trial gets it

  Distributions: uniform, loguniform: [low, high] reals; int, log_int: [low, high] whole
  numbers, both included; randint: [low, high) as Ray's tune.randint; choice: [...] one of
  the values; grid_search: [...] every value (the grid searcher runs each combination).

  Parameters a trial has (those the space leaves out take their default):
)" + app::parameter_help() + "\n  Every key:\n" + app::config_keys().help() +
         R"(
OUTPUT (--output, default ./celer_results/<name>)
  report.html          learning curves and parameters against the metric; open it in a browser
  results.csv          one row per trial: params, state, epochs, best and last metric
  best_config.json     the best trial's params, metric and checkpoint
  experiment.json      the configuration used (--resume reads it)
  trial_NNNN/          params.json, status.json, result.jsonl (a line per epoch),
                       checkpoints/ (the newest keep_checkpoints, a checkpoint archive
                       that celer::checkpoint::restore reads)

  Ctrl-C stops cleanly; --resume with the same --name or --output continues: finished
  trials stay finished, running ones go on from their last checkpoint.

EXAMPLES
  celer-tune                                            # digits, TPE + ASHA, ~2 minutes
  celer-tune --scheduler fifo --name digits-fifo        # the same without early stopping
  celer-tune --config config/tune/digits_pbt.yaml       # population based training
  celer-tune --config config/tune/synthetic.yaml        # no model: tuning's own cost, as
                                                        #   bench/peers/ray_tune_synthetic.py
  celer-tune --config config/tune/fashion_mnist.yaml --limit 20000
  celer-tune --resume --name digits                     # continue after Ctrl-C or a crash
  celer-tune --address 127.0.0.1:6380                   # on a cluster (celer start ...)
)";
}

/// CELER_TUNE_INJECT_FAILURE=TRIAL:EPOCH[:TIMES] (the trial throws) or TRIAL:EPOCH:exit (its
/// worker process exits, on a cluster), for tests.
void read_injection(app::driver_options& o) {
  const char* spec = std::getenv("CELER_TUNE_INJECT_FAILURE");
  if (spec == nullptr) return;
  long long trial = -1, epoch = 0;
  int times = 1;
  char how[8] = {};
  if (std::sscanf(spec, "%lld:%lld:%7[a-z]", &trial, &epoch, how) == 3 && std::string(how) == "exit") {
    o.fail_by_exit = true;
  } else if (std::sscanf(spec, "%lld:%lld:%d", &trial, &epoch, &times) < 2) {
    return;
  }
  o.fail_trial = trial;
  o.fail_epoch = epoch;
  o.fail_times = times;
}

} // namespace

int main(int argc, char** argv) {
  // Worker processes run this binary too: they serve trials and never reach the CLI.
  celer::serve_if_worker();

  CLI::App cli{"celer-tune: hyperparameter tuning on celer. Each trial is an actor that trains a model\n"
               "(an MLP or a small CNN, LibTorch) on the digits or Fashion-MNIST; a searcher picks each\n"
               "trial's params and a scheduler stops the poor ones early, as in Ray Tune.",
               "celer-tune"};
  cli.footer(help_footer());
  cli.get_formatter()->column_width(34);
  std::string config_path, address;
  bool resume = false, print_config = false;
  double num_cpus = 0;
  app::experiment_config flags;  // only the fields of flags that were given are used
  cli.add_option("--config", config_path, "YAML config (default: the built-in config/tune/digits.yaml)");
  cli.add_flag("--print-config", print_config,
               "Print the config this experiment would use (the file or the built-in default, after flags) as YAML "
               "and exit");
  // Every key of the config is a flag too (--num-samples for num_samples): config_keys().
  app::config_keys().add_flags(cli, flags);
  cli.add_flag("--resume", resume, "Continue the experiment in the output directory");
  cli.add_option("--address", address, "HOST:PORT of a celer cluster (default: CELER_ADDRESS, else embedded)");
  cli.add_option("--num-cpus", num_cpus, "CPUs the embedded runtime offers (default: all)");
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return cli.exit(e) == 0 ? 0 : 2;
  }
  const std::string usage_hint = "\n(celer-tune --help explains every key and flag)\n";

  // The config: experiment.json when resuming, else the file (or the built-in default).
  celer::expected<app::experiment_config> loaded = app::parse_config(app::default_config_yaml, "the built-in digits.yaml");
  if (!config_path.empty()) loaded = app::load_config_file(config_path);
  if (!loaded) {
    std::cerr << "celer-tune: " << loaded.error().message() << usage_hint;
    return 2;
  }
  // Flags win over the file; a resumed experiment keeps what it started with but for the
  // keys that may change (more trials, other concurrency, more patience).
  app::config_keys().apply_flags(cli, flags, *loaded);
  if (print_config) {
    std::cout << "# celer-tune config: " << (config_path.empty() ? "the built-in digits.yaml" : config_path)
              << ", after flags. Run it with: celer-tune --config THIS_FILE\n"
              << app::config_keys().to_yaml(*loaded);
    return 0;
  }
  if (resume) {
    const std::string dir = app::output_dir(*loaded);
    auto text = app::experiment_dir(dir).read_config();
    if (!text) {
      std::cerr << "celer-tune: nothing to resume in " << dir << " (no experiment.json). Name the experiment with "
                << "--name or --output as when it was started." << "\n";
      return 2;
    }
    auto saved = app::parse_config(*text, dir + "/experiment.json");
    if (!saved) {
      std::cerr << "celer-tune: " << saved.error().message() << "\n";
      return 2;
    }
    saved->output = loaded->output;
    saved->name = loaded->name;
    loaded = std::move(*saved);
    // --config may still name the experiment (its name); nothing else of it is read.
    for (const auto& fixed : app::config_keys().apply_flags_on_resume(cli, flags, *loaded))
      std::cerr << "celer-tune: " << fixed << " is ignored with --resume: the experiment keeps the config in "
                << dir << "/experiment.json\n";
  }
  app::experiment_config cfg = std::move(*loaded);
  if (auto ok = app::validate(cfg); !ok) {
    const std::string source = resume ? app::output_dir(cfg) + "/experiment.json" : config_path;
    std::cerr << "celer-tune: " << (source.empty() ? "" : source + ": ") << ok.error().message() << usage_hint;
    return 2;
  }
  const std::string dir = app::output_dir(cfg);
  if (!resume && app::experiment_dir(dir).holds_experiment()) {
    std::cerr << "celer-tune: " << dir << " already holds an experiment. Continue it with --resume, or choose "
              << "another --name or --output.\n";
    return 2;
  }

  // Embedded, the trials read the data from this machine: say now if it is not there, rather
  // than through every trial's failure. (A cluster's nodes have their own files; synthetic
  // trials read none.)
  const char* cluster = std::getenv("CELER_ADDRESS");
  if (cfg.data != "synthetic" && address.empty() && (cluster == nullptr || *cluster == '\0')) {
    auto data = cfg.data == "digits" ? celer::actors::load_digits() : celer::actors::load_fashion_mnist(true, 1);
    if (!data) {
      std::cerr << "celer-tune: the " << cfg.data << " data cannot be read: " << data.error().message() << "\n";
      return 2;
    }
  }

  app::driver_options options;
  options.resume = resume;
  const char* term = std::getenv("TERM");
  options.tty = ::isatty(STDOUT_FILENO) == 1 && term != nullptr && std::string(term) != "dumb";
  options.stop_requested = &stop_requested;
  read_injection(options);
  try {
    celer::init(celer::init_options{.address = address, .num_cpus = num_cpus});
  } catch (const celer::exception& e) {
    std::cerr << "celer-tune: cannot start celer" << (address.empty() ? "" : " on " + address) << ": " << e.what() << "\n";
    return 1;
  }
  options.where = !address.empty() ? "the cluster at " + address
                  : cluster != nullptr && *cluster != '\0' ? "the cluster at " + std::string(cluster)
                                                            : "embedded celer";
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  const int code = app::run_experiment(cfg, options, std::cout);
  celer::shutdown();
  return code;
}
