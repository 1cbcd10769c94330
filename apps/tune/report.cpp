// report.html with inline SVG plots (report.hpp).
#include "report.hpp"

#include <celer/apps/html.hpp>
#include <celer/apps/line_plot.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace celer::tune_app {
namespace {

using apps::html_escape;

std::string num(double d, const char* format = "%.1f") { return apps::format_number(d, format); }

std::string metric_text(std::optional<double> v) { return v && !std::isnan(*v) ? num(*v, "%.4f") : "-"; }

/// Ten distinguishable colours (Tableau 10), by trial id.
const char* colour_of(tune::trial_id id) { return apps::palette_colour(static_cast<std::size_t>(id)); }

/// From red (worst) through yellow to green (best), t in [0, 1].
std::string ramp(double t) {
  t = std::clamp(t, 0.0, 1.0);
  const double stops[3][3] = {{215, 48, 39}, {254, 224, 139}, {26, 152, 80}};
  const int i = t < 0.5 ? 0 : 1;
  const double u = t < 0.5 ? t * 2 : (t - 0.5) * 2;
  char buf[16];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", static_cast<int>(stops[i][0] + u * (stops[i + 1][0] - stops[i][0])),
                static_cast<int>(stops[i][1] + u * (stops[i + 1][1] - stops[i][1])),
                static_cast<int>(stops[i][2] + u * (stops[i + 1][2] - stops[i][2])));
  return buf;
}

std::string tooltip(const trial_summary& t, const objective& o) {
  return trial_name(t.id) + " (" + std::string(to_string(t.state)) + "): best " + o.metric + " " +
         metric_text(t.best(o)) + "\n" + tune::to_string(t.params);
}

} // namespace

std::string learning_curves_svg(const report_input& in) {
  const auto& o = in.goal;
  apps::line_plot plot{.id = "learning-curves", .x_label = "epoch", .y_label = o.metric};
  if (o.metric.ends_with("accuracy")) plot.y_floor = 0.0, plot.y_ceiling = 1.0;
  // One line per trial, broken where the trial took a saved state (PBT, a restart): the
  // curve then goes on from that state's epoch. The best trial is drawn last, thicker.
  const auto* best = best_trial(in.trials, o);
  auto add = [&](const trial_summary& t, bool is_best) {
    auto& line = plot.series.emplace_back();
    line.tooltip = tooltip(t, o);
    line.css_class = "trial";
    line.colour = colour_of(t.id);
    line.stroke_width = is_best ? 3 : 1.5;
    line.opacity = is_best ? 1 : 0.75;
    for (const auto& r : t.results) {
      if (line.segments.empty() || !r.restored_why.empty()) line.segments.emplace_back();
      line.segments.back().push_back({static_cast<double>(r.epoch), o.of(r)});
    }
  };
  for (const auto& t : in.trials)
    if (&t != best) add(t, false);
  if (best) add(*best, true);
  return apps::render_svg(plot);
}

std::string parallel_coordinates_svg(const report_input& in) {
  const auto& params = in.space.parameters();
  const auto& o = in.goal;
  const double axes = static_cast<double>(params.size() + 1);
  const double left = 70, right = 90, top = 40, bottom = 40, h = 400;
  const double w = std::max(520.0, left + right + (axes - 1) * 120);
  const auto X = [&](std::size_t axis) { return axes <= 1 ? left : left + static_cast<double>(axis) * (w - left - right) / (axes - 1); };
  const auto Y = [&](double u) { return top + (1 - u) * (h - top - bottom); };  // u in [0, 1], 1 at the top

  apps::value_range metric;
  for (const auto& t : in.trials)
    if (auto b = t.best(o)) metric.add(*b);
  metric.settle();
  const auto metric_u = [&](double v) { return (v - metric.low) / (metric.high - metric.low); };
  // Where a value sits on its parameter's axis, in [0, 1].
  const auto place = [&](const tune::parameter& p, const tune::value& v) -> std::optional<double> {
    if (!p.numeric()) {
      const auto i = p.index_of(v);
      if (!i) return std::nullopt;
      return p.choices.size() == 1 ? 0.5 : static_cast<double>(*i) / static_cast<double>(p.choices.size() - 1);
    }
    if (std::holds_alternative<std::string>(v)) return std::nullopt;
    const double x = std::holds_alternative<double>(v) ? std::get<double>(v) : static_cast<double>(std::get<std::int64_t>(v));
    const double u = p.log() ? (std::log(x) - std::log(p.low)) / (std::log(p.high) - std::log(p.low))
                             : (x - p.low) / (p.high - p.low);
    return std::clamp(u, 0.0, 1.0);
  };

  std::string s = "<svg class=\"plot\" id=\"parallel-coordinates\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(w, "%.0f") +
                  "\" height=\"" + num(h, "%.0f") + "\" viewBox=\"0 0 " + num(w, "%.0f") + " " + num(h, "%.0f") + "\">\n";
  // Lines first (worst first, so the best lie on top), then the axes over them.
  std::vector<const trial_summary*> order;
  for (const auto& t : in.trials)
    if (t.best(o)) order.push_back(&t);
  std::sort(order.begin(), order.end(), [&](auto* a, auto* b) { return o.better(*b->best(o), *a->best(o)); });
  for (std::size_t k = 0; k < order.size(); ++k) {
    const auto* t = order[k];
    const double value = *t->best(o);
    // Coloured by rank, not by value: a few failed trials far below would turn every other
    // line the same green.
    const double goodness = order.size() < 2 ? 1.0 : static_cast<double>(k) / static_cast<double>(order.size() - 1);
    std::string points;
    for (std::size_t i = 0; i < params.size(); ++i) {
      const auto* v = t->params.find(params[i].name);
      const auto u = v ? place(params[i], *v) : std::nullopt;
      if (u) points += num(X(i)) + "," + num(Y(*u)) + " ";
    }
    points += num(X(params.size())) + "," + num(Y(metric_u(value)));
    s += "<polyline fill=\"none\" stroke=\"" + ramp(goodness) + "\" stroke-width=\"1.8\" opacity=\"0.85\" points=\"" +
         points + "\"><title>" + html_escape(tooltip(*t, o)) + "</title></polyline>\n";
  }
  const auto axis = [&](std::size_t i, const std::string& name, const std::string& high, const std::string& low) {
    s += "<line x1=\"" + num(X(i)) + "\" x2=\"" + num(X(i)) + "\" y1=\"" + num(Y(1)) + "\" y2=\"" + num(Y(0)) +
         "\" stroke=\"#333\" stroke-width=\"1.2\"/>";
    s += "<text x=\"" + num(X(i)) + "\" y=\"" + num(top - 22) + "\" text-anchor=\"middle\" font-size=\"12\" font-weight=\"bold\">" +
         html_escape(name) + "</text>";
    if (!high.empty())
      s += "<text x=\"" + num(X(i)) + "\" y=\"" + num(top - 6) + "\" text-anchor=\"middle\" font-size=\"10\">" + html_escape(high) + "</text>";
    if (!low.empty())
      s += "<text x=\"" + num(X(i)) + "\" y=\"" + num(h - bottom + 16) + "\" text-anchor=\"middle\" font-size=\"10\">" + html_escape(low) + "</text>";
    s += "\n";
  };
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto& p = params[i];
    if (p.numeric()) {
      const char* f = p.integral() ? "%.0f" : "%.3g";
      axis(i, p.name + (p.log() ? " (log)" : ""), num(p.high, f), num(p.low, f));
    } else {
      axis(i, p.name, "", "");
      for (const auto& c : p.choices) {
        const double u = *place(p, c);
        s += "<text x=\"" + num(X(i) + 5) + "\" y=\"" + num(Y(u) + 4) + "\" font-size=\"10\">" + html_escape(format_value(c)) + "</text>\n";
      }
    }
  }
  axis(params.size(), "best " + o.metric, num(metric.high, "%.4f"), num(metric.low, "%.4f"));
  return s + "</svg>\n";
}

std::vector<std::string> run_summary(const experiment_config& cfg, const std::vector<trial_summary>& trials,
                                     int concurrency, const std::string& where, double seconds) {
  std::size_t epochs = 0;
  for (const auto& t : trials) epochs += t.results.size();
  const auto& s = cfg.scheduler;
  std::string scheduler = s.name;
  if (s.name == "asha")
    scheduler += " (grace_period " + std::to_string(s.grace_period) + ", reduction_factor " +
                 format_value(s.reduction_factor) + ")";
  if (s.name == "median") scheduler += " (grace_period " + std::to_string(s.grace_period) + ")";
  if (s.name == "pbt") scheduler += " (perturbation_interval " + std::to_string(s.perturbation_interval) + ")";
  const bool synthetic = cfg.data == "synthetic";
  std::vector<std::string> lines = {
    synthetic ? "data: synthetic (no model: Halton points, a known learning curve, cost_ms of CPU per iteration)"
              : "data: " + cfg.data + (cfg.limit > 0 ? " (first " + std::to_string(cfg.limit) + " samples)" : "") +
                  ", 20% of each class held out for validation",
    "searcher: " + cfg.searcher.name + " (seed " + std::to_string(cfg.seed) + "), scheduler: " + scheduler,
    std::to_string(trials.size()) + " of " + std::to_string(planned_trials(cfg)) + " trials, up to " +
      std::to_string(cfg.max_epochs) + " epochs each, " + std::to_string(concurrency) + " at once, " +
      format_value(cfg.cpus_per_trial) + " CPU" +
      (cfg.gpus_per_trial > 0 ? " and " + format_value(cfg.gpus_per_trial) + " GPU" : std::string()) + " per trial, on " +
      where,
    std::to_string(epochs) + " epochs in all; this run took " + format_duration(seconds)};
  if (synthetic)
    lines.push_back("tuning overhead (ray_tune_synthetic.py's measure): " +
                    to_string(synthetic_overhead(trials, seconds, concurrency * cfg.cpus_per_trial)));
  return lines;
}

std::string render_report(const report_input& in) {
  const auto& o = in.goal;
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>celer-tune: " +
                     html_escape(in.title) + "</title>\n<style>\n"
                     "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}\n"
                     "h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em}\n"
                     "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}\n"
                     "th{background:#f4f4f4}td.l,th.l{text-align:left}tr.best{background:#eaf6ea}\n"
                     "pre{background:#f6f6f6;padding:1em;overflow-x:auto}.plot{border:1px solid #eee;background:#fff}\n"
                     ".ERROR{color:#b00}.STOPPED{color:#777}\n</style></head><body>\n";
  html += "<h1>celer-tune: " + html_escape(in.title) + "</h1>\n<ul>\n";
  for (const auto& line : in.summary) html += "<li>" + html_escape(line) + "</li>\n";
  html += "</ul>\n";
  const auto* best = best_trial(in.trials, o);
  if (best) {
    const auto i = *best->best_index(o);
    html += "<h2>Best trial</h2>\n<p>" + html_escape(trial_name(best->id)) + ": " + html_escape(o.metric) + " <b>" +
            metric_text(best->best(o)) + "</b> at epoch " + std::to_string(best->results[i].epoch) + " (" +
            std::string(to_string(best->state)) + ")" +
            (in.best_checkpoint.empty() ? "" : ", checkpoint <code>" + html_escape(in.best_checkpoint) + "</code>") + "</p>\n<pre>" +
            html_escape(best->params.to_json()) + "</pre>\n";
  } else {
    html += "<h2>Best trial</h2>\n<p>No trial reported a result.</p>\n";
  }
  html += "<h2>Learning curves</h2>\n<p>" + html_escape(o.metric) +
          " per epoch, one line per trial (hover for its params); the best is the thick line. A line breaks where "
          "its trial took a saved state (PBT's exploit, a restart).</p>\n" +
          learning_curves_svg(in);
  html += "<h2>Parameters against the metric</h2>\n<p>One line per trial through its params to its best " +
          html_escape(o.metric) + "; coloured by rank, green the best, red the worst.</p>\n" + parallel_coordinates_svg(in);

  html += "<h2>Trials</h2>\n<table><tr><th class=\"l\">trial</th><th class=\"l\">state</th>";
  for (const auto& p : in.space.parameters()) html += "<th>" + html_escape(p.name) + "</th>";
  html += "<th>epochs</th><th>best</th><th>last</th><th class=\"l\">reason</th></tr>\n";
  for (const auto& t : in.trials) {
    html += std::string("<tr") + (&t == best ? " class=\"best\"" : "") + "><td class=\"l\">" + trial_name(t.id) +
            "</td><td class=\"l " + std::string(to_string(t.state)) + "\">" + std::string(to_string(t.state)) + "</td>";
    for (const auto& p : in.space.parameters()) {
      const auto* v = t.params.find(p.name);
      html += "<td>" + (v ? html_escape(format_value(*v)) : "-") + "</td>";
    }
    html += "<td>" + std::to_string(t.results.size()) + "</td><td>" + metric_text(t.best(o)) + "</td><td>" +
            metric_text(t.last(o)) + "</td><td class=\"l\">" + html_escape(t.reason) + "</td></tr>\n";
  }
  html += "</table>\n<p>Files: <code>results.csv</code>, <code>best_config.json</code>, <code>experiment.json</code>, "
          "<code>trial_NNNN/</code> (params.json, result.jsonl, checkpoints).</p>\n</body></html>\n";
  return html;
}

} // namespace celer::tune_app
