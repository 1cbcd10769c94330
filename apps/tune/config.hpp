#pragma once
// An experiment's configuration: read from YAML (config/tune/*.yaml), overridden by flags,
// checked with errors that name the key and list the valid ones, written back as
// experiment.json (which --resume reads with the same reader: JSON is YAML).
//
//   auto cfg = celer::tune_app::load_config_file("config/tune/digits.yaml");
//   if (!cfg) { std::cerr << cfg.error().message() << "\n"; return 2; }
//   cfg->num_samples = 32;                          // a flag overrides the file
//   if (auto ok = celer::tune_app::validate(*cfg); !ok) ...
//   auto space = celer::tune_app::make_search_space(*cfg);   // what the searcher draws
//
// No runtime calls, no LibTorch: the driver, the tests and --help share it.
#include <celer/actors/tune.hpp>
#include <celer/apps/config_schema.hpp>
#include <celer/error.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace celer::tune_app {

/// One hyperparameter as the YAML declares it: a distribution (`{loguniform: [1e-4, 0.1]}`)
/// or a fixed value (`model: mlp`).
struct param_spec {
  std::string name;
  /// "uniform", "loguniform", "int", "log_int", "randint", "choice", "grid_search" or "fixed".
  std::string kind;
  /// The bounds (two numbers), the choices, or the one fixed value.
  std::vector<tune::value> values;
};

/// The searcher and its settings (`searcher: tpe` or `searcher: {name: tpe, ...}`).
struct searcher_config {
  std::string name = "tpe";
  /// TPE: trials drawn at random before the model takes over; multivariate or not.
  std::size_t n_startup_trials = 10;
  bool multivariate = true;
};

/// The trial scheduler and its settings (`scheduler: asha` or `scheduler: {name: asha, ...}`).
struct scheduler_config {
  std::string name = "asha";
  /// ASHA and median stopping: no trial stops before this epoch.
  std::int64_t grace_period = 1;
  /// ASHA: a trial at a rung goes on only if in the top 1/reduction_factor there.
  double reduction_factor = 3;
  /// Median stopping: how many other trials must have reached an epoch first.
  std::size_t min_samples_required = 3;
  bool use_running_mean = false;
  /// PBT: exploit/explore every this many epochs, not before burn_in_period.
  std::int64_t perturbation_interval = 4;
  std::int64_t burn_in_period = 0;
  double quantile_fraction = 0.25;
  double resample_probability = 0.25;
  /// PBT: the parameters explore may change (those a running trial can take on).
  std::vector<std::string> mutations = {"lr", "weight_decay"};
};

/// Everything one experiment needs. Every field is a YAML key of the same name, declared in
/// config_keys() (config.cpp) with its help; the flat ones and the searcher's and scheduler's
/// names are flags too (`--num-samples` for num_samples).
struct experiment_config {
  std::string name = "digits";
  /// "digits" or "fashion-mnist" (a model trial trains on it), or "synthetic" (no model: a
  /// known learning curve at a fixed cost per iteration, synthetic.hpp). It decides which
  /// parameters the search space may name and which metrics there are.
  std::string data = "digits";
  /// Use only the first `limit` samples (0: all).
  std::size_t limit = 0;
  /// A figure the trials report: val_accuracy, val_loss, train_accuracy or train_loss
  /// (accuracies are maximised, losses minimised); synthetic trials' score (maximised). Left
  /// out of a config: the data's first (val_accuracy, score).
  std::string metric = "val_accuracy";
  std::size_t num_samples = 16;
  /// Trials running at once; 0: as many as the cluster's CPUs (and GPUs) allow.
  int max_concurrent = 0;
  std::int64_t max_epochs = 27;
  std::uint64_t seed = 1;
  searcher_config searcher;
  scheduler_config scheduler;
  double cpus_per_trial = 1;
  /// Fractions share a device.
  double gpus_per_trial = 0;
  /// The least memory (GB) of the GPU a trial is given; gpu_memory_gb_by_batch raises it
  /// for trials whose batch_size is at least the key.
  double gpu_memory_gb = 0;
  std::map<std::int64_t, double> gpu_memory_gb_by_batch;
  /// Failures (exceptions, dead workers) a trial survives, restarting from its checkpoint.
  int max_failures = 1;
  /// Epochs between checkpoints; 0: none, but those PBT copies (a trial that fails, or that
  /// --resume continues, starts again from epoch 1).
  std::int64_t checkpoint_every = 1;
  /// Checkpoints kept per trial (PBT also keeps the ones others may copy).
  int keep_checkpoints = 2;
  /// Seconds between redraws of the progress table.
  double progress_interval = 3;
  /// The experiment directory; empty: ./celer_results/<name>.
  std::string output;
  std::vector<param_spec> search_space;
};

/// Every key of the config, declared once: the YAML reader (nested sections: searcher,
/// scheduler, gpu_memory_gb_by_batch, search_space, read by their own readers), the flags
/// (--num-samples; --searcher and --scheduler name the section's choice), what a resumed
/// experiment keeps, --help's list, --print-config and experiment.json.
[[nodiscard]] const apps::config_schema<experiment_config>& config_keys();

/// The trainable parameters a search space may name, with what each takes, and the metrics,
/// for each kind of data.
[[nodiscard]] std::string parameter_help();

/// Reads YAML text (or JSON); `source` names it in errors. invalid_argument naming the key
/// (and the valid keys) for anything unknown or malformed.
[[nodiscard]] expected<experiment_config> parse_config(std::string_view text, std::string_view source);
/// Reads a YAML file; not_found when it cannot be read.
[[nodiscard]] expected<experiment_config> load_config_file(const std::string& path);

/// Checks the whole configuration (after flags): ranges, names, the search space, the
/// scheduler's settings against the space. invalid_argument saying what to change.
[[nodiscard]] expected<void> validate(const experiment_config& cfg);

/// The configuration as JSON (experiment.json), every field spelt out; parse_config reads it.
[[nodiscard]] std::string to_json(const experiment_config& cfg);

/// The experiment directory: `output`, or ./celer_results/<name>.
[[nodiscard]] std::string output_dir(const experiment_config& cfg);

/// The searched parameters (not the fixed ones), for the searcher and the table.
[[nodiscard]] tune::search_space make_search_space(const experiment_config& cfg);
/// The fixed parameters and the defaults of those the space leaves out: merged into every
/// trial's params so that params.json says everything the trial ran with.
[[nodiscard]] tune::params fixed_params(const experiment_config& cfg);
/// How many trials the experiment runs: num_samples, or for the grid searcher num_samples
/// passes over every combination of the grid_search parameters.
[[nodiscard]] std::size_t planned_trials(const experiment_config& cfg);
/// Whether larger values of the metric are better (the metric's own way, config.cpp's list).
[[nodiscard]] tune::direction metric_mode(const experiment_config& cfg);

[[nodiscard]] expected<std::unique_ptr<tune::searcher>> make_searcher(const experiment_config& cfg);
[[nodiscard]] expected<std::unique_ptr<tune::scheduler>> make_scheduler(const experiment_config& cfg);

/// The GPU memory (GB) a trial with these params asks for.
[[nodiscard]] double gpu_memory_for(const experiment_config& cfg, const tune::params& p);

} // namespace celer::tune_app
