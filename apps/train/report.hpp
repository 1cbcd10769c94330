#pragma once
// report.html for a celer-train run: one self-contained page (inline SVG and CSS, no scripts,
// nothing fetched) with the configuration, the outcome, and the curves against step —
// training and validation loss, accuracy, samples/s, the step's time split (data-wait,
// compute, allreduce), bytes sent and gradient norm. Everything comes from the output
// directory (run.json, metrics.jsonl, summary.json), so a report can be rebuilt from any
// run's directory (celer-train --report-only).
//
//   auto run = celer::train_app::read_run("celer_results/digits-mlp");
//   if (run) std::string html = celer::train_app::render_report(*run);
//   auto path = celer::train_app::write_report("celer_results/digits-mlp");   // or in one call
//
// No runtime calls, no LibTorch.
#include <celer/error.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace celer::train_app {

/// One step's line of metrics.jsonl (a figure the line lacks, or null, is NaN).
struct step_record {
  std::int64_t step = 0;
  double loss = 0;
  double accuracy = 0;
  double samples_per_s = 0;
  double bytes_sent = 0;
  double data_wait_s = 0;
  double compute_s = 0;
  double allreduce_s = 0;
  double grad_norm = 0;
  /// batch_size_policy noise_scale: the step's samples over all workers and the noise
  /// scale estimate (NaN where the line has none).
  double batch_size = 0;
  double noise_scale = 0;
};

/// One validation's line of metrics.jsonl.
struct validation_record {
  std::int64_t step = 0;
  double loss = 0;
  double accuracy = 0;
};

/// summary.json: how a run that reached its last step ended.
struct run_outcome {
  std::int64_t steps = 0;
  double epochs = 0;
  int num_workers = 0;
  double final_val_accuracy = 0;
  double final_val_loss = 0;
  double samples_per_s = 0;
  double train_seconds = 0;
  double seconds = 0;
  std::vector<std::string> digests;
  bool replicas_equal = false;
};

/// What a run's output directory holds.
struct run_record {
  std::string dir;
  std::string name;
  /// run.json's keys and values (strings without their quotes), in its order.
  std::vector<std::pair<std::string, std::string>> config;
  /// In file order: a resumed run, or one whose workers were replaced, logs some steps again
  /// (the step numbers go back).
  std::vector<step_record> steps;
  std::vector<validation_record> validations;
  /// None when summary.json is missing (a run stopped or failed before its end).
  std::optional<run_outcome> outcome;
  /// How the run ended when the caller knows better than the files (Ctrl-C, a failure);
  /// shown at the top. Empty: from the files.
  std::string status;
  /// What could not be read (a torn last line of metrics.jsonl, ...), shown in the report.
  std::vector<std::string> notes;
};

/// Reads run.json, metrics.jsonl and summary.json (if there) in `dir`. not_found when there
/// is no run.json (no run there); invalid_argument naming the file when one is not JSON. A
/// metrics line that does not parse is skipped with a note.
[[nodiscard]] expected<run_record> read_run(const std::string& dir);

/// The whole page.
[[nodiscard]] std::string render_report(const run_record& run);

/// The <svg> ids of the plots render_report draws, in order.
[[nodiscard]] std::vector<std::string> report_plots();

/// Reads `dir` and writes `dir`/report.html (through a temporary file and a rename, so a
/// reader never sees half a page), with `status` at the top; the file's path.
[[nodiscard]] expected<std::string> write_report(const std::string& dir, const std::string& status = {});

} // namespace celer::train_app
