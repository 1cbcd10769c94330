#pragma once
// The experiment directory a person opens afterwards, and --resume reads back:
//
//   <root>/experiment.json              the configuration used (every field)
//   <root>/trial_NNNN/params.json       the params the trial started with
//   <root>/trial_NNNN/status.json       its state, reason, failures and current params
//   <root>/trial_NNNN/result.jsonl      one line per epoch
//   <root>/trial_NNNN/checkpoints/      saved states: a checkpoint archive (checkpoint_store.hpp)
//   <root>/results.csv                  one row per trial
//   <root>/best_config.json             the best trial's params and metric
//   <root>/report.html                  learning curves and parallel coordinates (report.hpp)
//
// Files that are rewritten are written to a temporary name and renamed; result lines are
// appended whole. One owner (the driver's thread).
#include "experiment.hpp"

#include <celer/error.hpp>

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace celer::tune_app {

/// Writes `content` to `path` through a temporary file and a rename.
[[nodiscard]] expected<void> write_file_atomically(const std::filesystem::path& path, std::string_view content);

class experiment_dir {
public:
  explicit experiment_dir(std::filesystem::path root) : root_(std::move(root)) {}

  [[nodiscard]] const std::filesystem::path& root() const noexcept { return root_; }
  [[nodiscard]] std::filesystem::path trial_dir(tune::trial_id id) const { return root_ / trial_name(id); }
  /// Whether an experiment was started here (experiment.json exists).
  [[nodiscard]] bool holds_experiment() const;
  /// The experiment.json text.
  [[nodiscard]] expected<std::string> read_config() const;

  /// Makes the directory and writes experiment.json.
  [[nodiscard]] expected<void> create(std::string_view config_json) const;

  [[nodiscard]] expected<void> write_params(tune::trial_id id, const tune::params& p) const;
  /// status.json: state, reason, failures, current params, epochs.
  [[nodiscard]] expected<void> write_status(const trial_summary& t) const;
  [[nodiscard]] expected<void> append_result(tune::trial_id id, const epoch_result& r) const;
  /// Keeps the first `lines` lines of the trial's result.jsonl.
  [[nodiscard]] expected<void> truncate_results(tune::trial_id id, std::size_t lines) const;

  /// Every trial found here, by id, from its params.json, status.json and result.jsonl (a
  /// torn last line, from a run killed while writing it, is dropped). A trial without a
  /// status is PENDING.
  [[nodiscard]] expected<std::vector<trial_summary>> read_trials() const;

  /// results.csv: one row per trial, columns trial, state, the params, epochs, best and
  /// last metric, best epoch, failures, reason.
  [[nodiscard]] expected<void> write_results_csv(const std::vector<trial_summary>& trials, const objective& o) const;
  /// best_config.json: the best trial's id, metric, epoch, params and newest checkpoint
  /// (a path relative to the experiment directory).
  [[nodiscard]] expected<void> write_best_config(const trial_summary& best, const objective& o,
                                                 const std::string& checkpoint) const;

private:
  std::filesystem::path root_;
};

} // namespace celer::tune_app
