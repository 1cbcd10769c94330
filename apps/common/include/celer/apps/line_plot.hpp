#pragma once
/// SVG line plots for the apps' report.html pages: one <svg> element, drawn here from the
/// points, with its grid, ticks, axis labels, an optional legend and a tooltip per line, for
/// pages that must open with nothing fetched and nothing run (no scripts, no external files).
///
///   celer::apps::line_plot p{.id = "loss", .x_label = "step", .y_label = "loss"};
///   auto& train = p.series.emplace_back();
///   train.name = "training loss";                 // in the legend
///   train.segments = {{{1, 2.3}, {2, 2.1}, {3, 1.9}}};
///   std::string svg = celer::apps::render_svg(p);
///
/// celer-tune draws its learning curves with it and celer-train its training curves.
/// Standard C++ only: no runtime, no LibTorch.

#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace celer::apps {

/// The interval a set of values spans, grown value by value (NaN is left out).
struct value_range {
  double low = std::numeric_limits<double>::infinity();
  double high = -std::numeric_limits<double>::infinity();
  void add(double v);
  /// No value added yet.
  [[nodiscard]] bool empty() const { return !(low <= high); }
  /// [0, 1] when empty, and widened by 0.5 each way when flat, so that a single value sits in
  /// the middle.
  void settle();
};

struct plot_point {
  double x = 0;
  double y = 0;
};

/// One line of a plot, drawn in one colour as one SVG group (<g>) holding a polyline per
/// segment: a line breaks between segments (a run that went back to a checkpoint, a trial
/// that took a saved state). A point whose y is NaN is skipped, joining its neighbours; its
/// x still counts in the x axis' range.
struct plot_series {
  /// The legend's text; empty: the series is not in the legend.
  std::string name;
  /// Shown on hover (the group's <title>); empty: none.
  std::string tooltip;
  /// The group's class attribute.
  std::string css_class = "series";
  std::string colour = "#4e79a7";
  double stroke_width = 1.5;
  double opacity = 0.75;
  /// A dot at each point too (for series of a few points, such as validations).
  bool markers = false;
  std::vector<std::vector<plot_point>> segments;
};

/// A plot: its size, axes and lines, drawn in the order given (the last on top).
struct line_plot {
  /// The <svg>'s id (class "plot").
  std::string id;
  std::string x_label;
  std::string y_label;
  double width = 760;
  double height = 400;
  /// printf format of the y ticks (6 of them, from the bottom of the axis to its top).
  std::string y_tick_format = "%.3f";
  /// Bounds the y axis does not pass after its 5% padding (accuracies: 0 and 1).
  std::optional<double> y_floor;
  std::optional<double> y_ceiling;
  /// x ticks at whole numbers: 1, 2 or 5 × 10^k apart (about 8 of them) when true; else
  /// ceil(span / 10) apart from the lowest x (celer-tune's epochs).
  bool round_x_ticks = false;
  /// Write the SVG namespace (xmlns="http://www.w3.org/2000/svg"), which an SVG saved as
  /// its own file needs; an <svg> inline in an HTML5 page does not.
  bool xmlns = true;
  std::vector<plot_series> series;
};

/// The plot as one <svg> element, ending in a newline. Text is HTML-escaped.
[[nodiscard]] std::string render_svg(const line_plot& plot);

/// The i-th of ten distinguishable colours (Tableau 10), cycling: "#4e79a7", "#f28e2b", ...
[[nodiscard]] const char* palette_colour(std::size_t i);

} // namespace celer::apps
