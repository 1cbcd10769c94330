#pragma once
// What a person watches while the experiment runs, after Ray Tune's progress reporter: a
// status line and one row per trial (id, state, params, epochs, last and best metric).
// On a terminal the table is redrawn in place every progress_interval seconds, with the
// latest events under it; otherwise (a log file, a CI job) each event is one compact line,
// and the table is printed at the end.
//
//   progress p(std::cout, isatty(1), objective, {"lr", "width"}, "digits", 16);
//   p.event(12.3, "trial_0003 STOPPED at epoch 3: below the cutoff");
//   p.draw(trials, 12.3);                       // a terminal: redraw; else nothing
//   std::cout << p.table(trials, 0);            // the whole table, for the end
#include "experiment.hpp"

#include <deque>
#include <iosfwd>
#include <string>
#include <vector>

namespace celer::tune_app {

class progress {
public:
  progress(std::ostream& out, bool tty, objective o, std::vector<std::string> param_columns, std::string title,
           std::size_t num_samples);

  /// Something happened at `elapsed` seconds. Not a terminal: printed now, on one line,
  /// with the status line after it when `with_status` (a trial's state changed). A
  /// terminal: kept for the next draw.
  void event(double elapsed, const std::string& what, const std::vector<trial_summary>* status_of = nullptr);
  /// A terminal: draws the status line, the table and the latest events in place of the
  /// last drawing. Otherwise nothing.
  void draw(const std::vector<trial_summary>& trials, double elapsed);
  /// Ends the live drawing: a terminal's is erased, for the final table to take its place.
  void close();

  /// "== digits: 2 RUNNING, 5 TERMINATED | 7/16 trials | 1m02s | best val_accuracy 0.9806 (trial_0003) ==".
  [[nodiscard]] std::string status_line(const std::vector<trial_summary>& trials, double elapsed) const;
  /// The table; at most `max_rows` trials (0: all): running and pending first, then the best
  /// finished ones, and a line saying how many more there are.
  [[nodiscard]] std::string table(const std::vector<trial_summary>& trials, std::size_t max_rows) const;

private:
  std::ostream& out_;
  bool tty_;
  objective objective_;
  std::vector<std::string> columns_;
  std::string title_;
  std::size_t num_samples_;
  std::deque<std::string> recent_;
  std::size_t drawn_lines_ = 0;
};

} // namespace celer::tune_app
