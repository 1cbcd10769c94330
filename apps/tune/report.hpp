#pragma once
// report.html: one self-contained page (inline SVG and CSS, no scripts, no external
// resources) that a person opens after the run: the best trial and its config, learning
// curves (the metric per epoch per trial, drawn by <celer/apps/line_plot.hpp>), a
// parallel-coordinates plot of the searched params against each trial's best metric (drawn
// here), and the table of trials.
//
//   report_input in{.title = "digits", .goal = o, .space = space, .trials = trials};
//   std::string html = render_report(in);
#include "config.hpp"
#include "experiment.hpp"

#include <string>
#include <vector>

namespace celer::tune_app {

struct report_input {
  std::string title;
  /// Lines describing the run (searcher, scheduler, samples, epochs, data), shown as is.
  std::vector<std::string> summary;
  objective goal;
  /// The searched parameters: the parallel coordinates' axes (bounds, log scale, choices).
  tune::search_space space;
  std::vector<trial_summary> trials;
  /// Where the best trial's newest checkpoint is ("" if none).
  std::string best_checkpoint;
};

/// The lines report_input::summary holds: the data, the searcher and scheduler, the trials
/// and their resources, where they ran, the epochs and the time.
[[nodiscard]] std::vector<std::string> run_summary(const experiment_config& cfg, const std::vector<trial_summary>& trials,
                                                   int concurrency, const std::string& where, double seconds);

/// The whole page.
[[nodiscard]] std::string render_report(const report_input& in);

/// The learning-curves plot alone (an <svg> element), for tests and reuse.
[[nodiscard]] std::string learning_curves_svg(const report_input& in);
/// The parallel-coordinates plot alone (an <svg> element).
[[nodiscard]] std::string parallel_coordinates_svg(const report_input& in);

} // namespace celer::tune_app
