// SVG line plots (line_plot.hpp).
#include <celer/apps/html.hpp>
#include <celer/apps/line_plot.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace celer::apps {
namespace {

std::string num(double d, const char* format = "%.1f") { return format_number(d, format); }

/// A width or opacity as an attribute: "3", "1.5", "0.75".
std::string attribute(double d) { return format_number(d, "%g"); }

/// Ticks 1, 2 or 5 × 10^k apart, about eight over `span`; at least 1.
double round_step(double span) {
  const double raw = span / 8;
  if (!(raw > 1)) return 1;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double r = raw / magnitude;
  return (r < 1.5 ? 1 : r < 3.5 ? 2 : r < 7.5 ? 5 : 10) * magnitude;
}

bool has_legend(const line_plot& p) {
  return std::any_of(p.series.begin(), p.series.end(), [](const auto& s) { return !s.name.empty(); });
}

} // namespace

void value_range::add(double v) {
  if (std::isnan(v)) return;
  low = std::min(low, v);
  high = std::max(high, v);
}

void value_range::settle() {
  if (empty()) low = 0, high = 1;
  if (high - low < 1e-12) low -= 0.5, high += 0.5;
}

const char* palette_colour(std::size_t i) {
  static const char* palette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                  "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  return palette[i % 10];
}

std::string render_svg(const line_plot& p) {
  const bool legend = has_legend(p);
  const double w = p.width, h = p.height, left = 60, right = 20, top = legend ? 38 : 20, bottom = 50;
  value_range xs, ys;
  for (const auto& series : p.series)
    for (const auto& segment : series.segments)
      for (const auto& pt : segment) xs.add(pt.x), ys.add(pt.y);
  if (xs.empty()) xs.low = 1, xs.high = 2;
  if (xs.high - xs.low < 1) xs.high = xs.low + 1;
  ys.settle();
  const double pad = (ys.high - ys.low) * 0.05;
  ys.low -= pad, ys.high += pad;
  if (p.y_ceiling) ys.high = std::min(ys.high, *p.y_ceiling);
  if (p.y_floor) ys.low = std::max(ys.low, *p.y_floor);
  const auto X = [&](double x) { return left + (x - xs.low) / (xs.high - xs.low) * (w - left - right); };
  const auto Y = [&](double v) { return top + (ys.high - v) / (ys.high - ys.low) * (h - top - bottom); };

  std::string s = "<svg class=\"plot\" id=\"" + html_escape(p.id) + "\"" +
                  (p.xmlns ? " xmlns=\"http://www.w3.org/2000/svg\"" : "") + " width=\"" + num(w, "%.0f") +
                  "\" height=\"" + num(h, "%.0f") + "\" viewBox=\"0 0 " + num(w, "%.0f") + " " + num(h, "%.0f") + "\">\n";
  // Grid, ticks and axes.
  for (int i = 0; i <= 5; ++i) {
    const double v = ys.low + (ys.high - ys.low) * i / 5;
    s += "<line x1=\"" + num(left) + "\" x2=\"" + num(w - right) + "\" y1=\"" + num(Y(v)) + "\" y2=\"" + num(Y(v)) +
         "\" stroke=\"#e5e5e5\"/><text x=\"" + num(left - 6) + "\" y=\"" + num(Y(v) + 4) +
         "\" text-anchor=\"end\" font-size=\"11\">" + num(v, p.y_tick_format.c_str()) + "</text>\n";
  }
  if (p.round_x_ticks) {
    const double step = round_step(xs.high - xs.low);
    for (double x = std::ceil(xs.low / step) * step; x <= xs.high + 1e-9; x += step) {
      s += "<text x=\"" + num(X(x)) + "\" y=\"" + num(h - bottom + 16) + "\" text-anchor=\"middle\" font-size=\"11\">" +
           num(x, "%.0f") + "</text>\n";
    }
  } else {
    const auto span = static_cast<std::int64_t>(xs.high - xs.low);
    const std::int64_t step = std::max<std::int64_t>(1, (span + 9) / 10);
    for (auto x = static_cast<std::int64_t>(xs.low); x <= static_cast<std::int64_t>(xs.high); x += step) {
      s += "<text x=\"" + num(X(static_cast<double>(x))) + "\" y=\"" + num(h - bottom + 16) +
           "\" text-anchor=\"middle\" font-size=\"11\">" + std::to_string(x) + "</text>\n";
    }
  }
  s += "<line x1=\"" + num(left) + "\" x2=\"" + num(left) + "\" y1=\"" + num(top) + "\" y2=\"" + num(h - bottom) +
       "\" stroke=\"#333\"/><line x1=\"" + num(left) + "\" x2=\"" + num(w - right) + "\" y1=\"" + num(h - bottom) +
       "\" y2=\"" + num(h - bottom) + "\" stroke=\"#333\"/>\n";
  s += "<text x=\"" + num((left + w - right) / 2) + "\" y=\"" + num(h - 12) +
       "\" text-anchor=\"middle\" font-size=\"12\">" + html_escape(p.x_label) + "</text>\n";
  s += "<text x=\"14\" y=\"" + num((top + h - bottom) / 2) + "\" text-anchor=\"middle\" font-size=\"12\" transform=\"rotate(-90 14 " +
       num((top + h - bottom) / 2) + ")\">" + html_escape(p.y_label) + "</text>\n";
  // The legend, in a row above the plot: a short line of each named series' colour and its name.
  if (legend) {
    double x = left;
    for (const auto& series : p.series) {
      if (series.name.empty()) continue;
      s += "<line x1=\"" + num(x) + "\" x2=\"" + num(x + 18) + "\" y1=\"14.0\" y2=\"14.0\" stroke=\"" +
           html_escape(series.colour) + "\" stroke-width=\"3\"/><text x=\"" + num(x + 24) +
           "\" y=\"18.0\" font-size=\"11\">" + html_escape(series.name) + "</text>\n";
      x += 24 + 6.5 * static_cast<double>(series.name.size()) + 18;  // ~6.5 px a character at 11 px
    }
  }
  // The lines.
  for (const auto& series : p.series) {
    const bool any = std::any_of(series.segments.begin(), series.segments.end(), [](const auto& g) { return !g.empty(); });
    if (!any) continue;
    s += "<g class=\"" + html_escape(series.css_class) + "\">";
    if (!series.tooltip.empty()) s += "<title>" + html_escape(series.tooltip) + "</title>";
    const std::string colour = html_escape(series.colour);
    for (const auto& segment : series.segments) {
      std::string points, dots;
      for (const auto& pt : segment) {
        if (std::isnan(pt.y)) continue;
        points += num(X(pt.x)) + "," + num(Y(pt.y)) + " ";
        if (series.markers)
          dots += "<circle cx=\"" + num(X(pt.x)) + "\" cy=\"" + num(Y(pt.y)) + "\" r=\"3\" fill=\"" + colour + "\"/>";
      }
      if (points.empty()) continue;
      s += "<polyline fill=\"none\" stroke=\"" + colour + "\" stroke-width=\"" + attribute(series.stroke_width) +
           "\" opacity=\"" + attribute(series.opacity) + "\" points=\"" + points + "\"/>" + dots;
    }
    s += "</g>\n";
  }
  return s + "</svg>\n";
}

} // namespace celer::apps
