// report.html for a celer-train run (report.hpp).
#include "report.hpp"

#include "text.hpp"

#include <celer/apps/html.hpp>
#include <celer/apps/line_plot.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <string_view>

namespace celer::train_app {
namespace {

namespace fs = std::filesystem;
using apps::html_escape;
using json = nlohmann::json;

constexpr double nan = std::numeric_limits<double>::quiet_NaN();

/// A series longer than this is drawn from the means of consecutive buckets of points, so
/// that a long run's page stays small (a point costs ~12 bytes per line).
constexpr std::size_t max_points = 1000;

expected<std::string> read_file(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return error(error_code::not_found, "cannot read " + p.string());
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// A figure of a metrics line (or of summary.json): NaN when it is missing or not a number (non-finite values
/// are written as null).
double figure(const json& line, const char* key) {
  const auto it = line.find(key);
  return it != line.end() && it->is_number() ? it->get<double>() : nan;
}

double zero_if_nan(double v) { return std::isnan(v) ? 0 : v; }


std::string seconds_text(double s) {
  if (std::isnan(s)) return "-";
  if (s < 60) return fixed(s, 1) + " s";
  return std::to_string(static_cast<long long>(s) / 60) + " min " + fixed(std::fmod(s, 60.0), 0) + " s";
}

/// Splits records into runs of rising steps: a resumed run or replaced workers log steps
/// again, and the line breaks there rather than going back across the plot.
template <class Record>
std::vector<std::vector<const Record*>> rising_runs(const std::vector<Record>& records) {
  std::vector<std::vector<const Record*>> runs;
  for (const auto& r : records) {
    if (runs.empty() || r.step <= runs.back().back()->step) runs.emplace_back();
    runs.back().push_back(&r);
  }
  return runs;
}

/// Consecutive points averaged `every` at a time (1: as they are).
std::vector<apps::plot_point> thinned(std::vector<apps::plot_point> points, std::size_t every) {
  if (every <= 1) return points;
  std::vector<apps::plot_point> out;
  for (std::size_t i = 0; i < points.size(); i += every) {
    const std::size_t end = std::min(points.size(), i + every);
    double x = 0, y = 0;
    std::size_t n = 0;
    for (std::size_t k = i; k < end; ++k) {
      x += points[k].x;
      if (!std::isnan(points[k].y)) y += points[k].y, ++n;
    }
    out.push_back({x / static_cast<double>(end - i), n > 0 ? y / static_cast<double>(n) : nan});
  }
  return out;
}

/// A series of `records` against step, `value` of each; split where the steps go back.
template <class Record>
apps::plot_series series_of(const std::vector<Record>& records, const std::function<double(const Record&)>& value,
                            std::string name, std::size_t colour, std::size_t every) {
  apps::plot_series s;
  s.name = std::move(name);
  s.tooltip = s.name;
  s.colour = apps::palette_colour(colour);
  for (const auto& run : rising_runs(records)) {
    std::vector<apps::plot_point> points;
    points.reserve(run.size());
    for (const auto* r : run) points.push_back({static_cast<double>(r->step), value(*r)});
    s.segments.push_back(thinned(std::move(points), every));
  }
  return s;
}

struct plot_page {
  apps::line_plot plot;
  std::string title;
  std::string caption;
};

std::vector<plot_page> plots_of(const run_record& run) {
  const std::size_t every = (run.steps.size() + max_points - 1) / max_points;
  using step_value = std::function<double(const step_record&)>;
  using val_value = std::function<double(const validation_record&)>;
  const auto steps = [&](step_value v, std::string name, std::size_t colour) {
    auto s = series_of<step_record>(run.steps, v, std::move(name), colour, every);
    s.stroke_width = 1.2;
    return s;
  };
  const auto validations = [&](val_value v, std::string name, std::size_t colour) {
    auto s = series_of<validation_record>(run.validations, v, std::move(name), colour, 1);
    s.stroke_width = 2;
    s.opacity = 1;
    s.markers = true;
    return s;
  };
  const auto plot = [](std::string id, std::string y_label, std::string y_format) {
    return apps::line_plot{.id = std::move(id), .x_label = "step", .y_label = std::move(y_label), .width = 760,
                           .height = 320, .y_tick_format = std::move(y_format), .round_x_ticks = true, .xmlns = false};
  };
  const std::string per_point =
    every > 1 ? " Each point is the mean of " + std::to_string(every) + " steps (" + std::to_string(run.steps.size()) +
                  " steps logged)."
              : "";
  std::vector<plot_page> pages;

  auto loss = plot("loss", "loss", "%.3f");
  loss.y_floor = 0.0;
  loss.series = {steps([](const step_record& r) { return r.loss; }, "training loss (each step's batches)", 0),
                 validations([](const validation_record& r) { return r.loss; }, "validation loss", 1)};
  pages.push_back({std::move(loss), "Loss",
                   "Cross-entropy of each step's batches over all workers, and on the validation split (rank 0, at "
                   "each validation)." + per_point});

  auto accuracy = plot("accuracy", "accuracy", "%.3f");
  accuracy.y_floor = 0.0;
  accuracy.y_ceiling = 1.0;
  accuracy.series = {steps([](const step_record& r) { return r.accuracy; }, "training accuracy (each step's batches)", 0),
                     validations([](const validation_record& r) { return r.accuracy; }, "validation accuracy", 1)};
  pages.push_back({std::move(accuracy), "Accuracy",
                   "The share of predictions right: a sample's class, or for text each next character." + per_point});

  auto rate = plot("samples-per-s", "samples/s", "%.0f");
  rate.y_floor = 0.0;
  rate.series = {steps([](const step_record& r) { return r.samples_per_s; }, "", 0)};
  pages.push_back({std::move(rate), "Samples per second",
                   "Samples trained per second over all workers, timed by the driver per actor call (steps_per_call "
                   "steps share a figure; validation and checkpoints excluded)." + per_point});

  auto time = plot("step-time", "ms per step", "%.2f");
  time.y_floor = 0.0;
  time.series = {steps([](const step_record& r) { return 1e3 * r.data_wait_s; }, "data-wait", 3),
                 steps([](const step_record& r) { return 1e3 * r.compute_s; }, "compute", 0),
                 steps([](const step_record& r) { return 1e3 * r.allreduce_s; }, "allreduce", 2)};
  pages.push_back({std::move(time), "Where a step's time goes",
                   "Per step, averaged over the workers: waiting for the data loader, computing (forward, backward, "
                   "the optimiser step) and in the allreduce (waiting for the slowest peer included)." + per_point});

  auto sent = plot("bytes-sent", "KB sent per step", "%.1f");
  sent.y_floor = 0.0;
  sent.series = {steps([](const step_record& r) { return r.bytes_sent / 1e3; }, "", 4)};
  pages.push_back({std::move(sent), "Bytes sent per step",
                   "What each worker sent per step (the collective group's counters): 2(n-1)/n of the gradient for "
                   "a ring allreduce, far less with compression." + per_point});

  auto norm = plot("grad-norm", "gradient norm", "%.3f");
  norm.y_floor = 0.0;
  norm.series = {steps([](const step_record& r) { return r.grad_norm; }, "", 6)};
  pages.push_back({std::move(norm), "Gradient norm",
                   "The L2 norm of the averaged gradient, before clipping." + per_point});

  // batch_size_policy noise_scale only: the batch and the estimate that grew it.
  if (std::any_of(run.steps.begin(), run.steps.end(), [](const step_record& r) { return !std::isnan(r.batch_size); })) {
    double largest = 0;
    for (const auto& r : run.steps)
      if (!std::isnan(r.batch_size)) largest = std::max(largest, r.batch_size);
    // An estimate whose |G|^2 is near 0 runs off to huge values: drawn, it would flatten
    // the batch's line, so estimates above 4x the largest batch are left out.
    const double cap = 4 * largest;
    auto batch = plot("batch-size", "samples per step", "%.0f");
    batch.y_floor = 0.0;
    batch.series = {steps([](const step_record& r) { return r.batch_size; }, "batch size (all workers)", 0),
                    steps([cap](const step_record& r) { return r.noise_scale > cap ? nan : r.noise_scale; },
                          "noise scale B_simple", 1)};
    pages.push_back({std::move(batch), "Batch size and gradient noise scale",
                     "batch_size_policy noise_scale: the batch doubles while the noise scale (averaged over recent "
                     "steps) exceeds it, up to max_batch_size. Estimates above 4x the largest batch are left out." +
                       per_point});
  }
  return pages;
}

/// Means over the logged steps, for the header.
struct step_means {
  double data_wait = nan, compute = nan, allreduce = nan, bytes = nan;
};
step_means means_of(const std::vector<step_record>& steps) {
  step_means m;
  if (steps.empty()) return m;
  double w = 0, c = 0, a = 0, b = 0;
  for (const auto& s : steps) w += s.data_wait_s, c += s.compute_s, a += s.allreduce_s, b += s.bytes_sent;
  const auto n = static_cast<double>(steps.size());
  return {w / n, c / n, a / n, b / n};
}

/// One line saying what was trained, from run.json: "Model: mlp (depth 2, width 128) on digits:
/// 2 workers x 32 samples a step, adam lr 0.002, compression none".
std::string run_line(const run_record& run) {
  const auto get = [&](std::string_view key) -> std::string {
    for (const auto& [k, v] : run.config)
      if (k == key) return v;
    return "?";
  };
  std::string line = "Model: " + get("model") + " (depth " + get("depth") + ", width " + get("width") + ", dropout " +
                     get("dropout") + ") on " + get("data") + (get("limit") != "0" ? " (first " + get("limit") + " samples)" : "") +
                     ": " + get("num_workers") + " workers x " + get("batch_size") + " samples" +
                     (get("accumulate_steps") != "1" ? " x " + get("accumulate_steps") + " micro-batches" : "") + " a step, " +
                     get("cpus_per_worker") + " CPU each; " + get("optimizer") + " lr " + get("lr") + ", compression " +
                     get("compression") + ", seed " + get("seed") + ".";
  return line;
}

std::string row(const std::string& key, const std::string& value_html) {
  return "<tr><th class=\"l\">" + html_escape(key) + "</th><td class=\"l\">" + value_html + "</td></tr>\n";
}

} // namespace

std::vector<std::string> report_plots() {
  std::vector<std::string> ids;
  for (const auto& p : plots_of(run_record{})) ids.push_back(p.plot.id);
  return ids;
}

expected<run_record> read_run(const std::string& dir) {
  run_record run;
  run.dir = dir;
  const fs::path root(dir);
  auto config_text = read_file(root / "run.json");
  if (!config_text) {
    return error(error_code::not_found, "no run in " + dir + " (no run.json). Name the run with --name or --output as "
                                        "when it was started.");
  }
  const auto config = nlohmann::ordered_json::parse(*config_text, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object())
    return error(error_code::invalid_argument, (root / "run.json").string() + " is not a JSON object");
  for (const auto& [key, value] : config.items()) {
    run.config.emplace_back(key, value.is_string() ? value.get<std::string>() : value.dump());
    if (key == "name" && value.is_string()) run.name = value.get<std::string>();
  }

  if (auto metrics = read_file(root / "metrics.jsonl")) {
    std::istringstream in(*metrics);
    std::size_t number = 0, bad = 0;
    for (std::string text; std::getline(in, text);) {
      ++number;
      if (text.empty()) continue;
      const auto line = json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (line.is_discarded() || !line.is_object() || !line.contains("step") || !line.at("step").is_number_integer()) {
        ++bad;
        continue;
      }
      const auto step = line.at("step").get<std::int64_t>();
      if (line.contains("val_accuracy") || line.contains("val_loss")) {
        run.validations.push_back({.step = step, .loss = figure(line, "val_loss"), .accuracy = figure(line, "val_accuracy")});
      }
      if (line.contains("loss")) {
        run.steps.push_back({.step = step,
                             .loss = figure(line, "loss"),
                             .accuracy = figure(line, "accuracy"),
                             .samples_per_s = figure(line, "samples_per_s"),
                             .bytes_sent = figure(line, "bytes_sent"),
                             .data_wait_s = figure(line, "data_wait_s"),
                             .compute_s = figure(line, "compute_s"),
                             .allreduce_s = figure(line, "allreduce_s"),
                             .grad_norm = figure(line, "grad_norm"),
                             .batch_size = figure(line, "batch_size"),
                             .noise_scale = figure(line, "noise_scale")});
      }
    }
    if (bad > 0)
      run.notes.push_back(std::to_string(bad) + " of the " + std::to_string(number) +
                          " lines of metrics.jsonl are not metrics (a line cut short when a process died?): left out");
  } else {
    run.notes.push_back("no metrics.jsonl: the run logged no step");
  }

  if (auto text = read_file(root / "summary.json")) {
    const auto s = json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (s.is_discarded() || !s.is_object()) {
      run.notes.push_back("summary.json is not a JSON object: left out");
    } else {
      run_outcome o;
      o.steps = static_cast<std::int64_t>(std::llround(zero_if_nan(figure(s, "steps"))));
      o.epochs = figure(s, "epochs");
      o.num_workers = static_cast<int>(std::lround(zero_if_nan(figure(s, "num_workers"))));
      o.final_val_accuracy = figure(s, "final_val_accuracy");
      o.final_val_loss = figure(s, "final_val_loss");
      o.samples_per_s = figure(s, "samples_per_s");
      o.train_seconds = figure(s, "train_seconds");
      o.seconds = figure(s, "seconds");
      if (s.contains("parameters_digests") && s.at("parameters_digests").is_array())
        for (const auto& d : s.at("parameters_digests"))
          if (d.is_string()) o.digests.push_back(d.get<std::string>());
      o.replicas_equal = s.contains("replicas_equal") && s.at("replicas_equal").is_boolean() && s.at("replicas_equal").get<bool>();
      run.outcome = std::move(o);
    }
  }
  return run;
}

std::string render_report(const run_record& run) {
  const std::string title = "celer-train: " + (run.name.empty() ? run.dir : run.name);
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>" + html_escape(title) +
                     "</title>\n<style>\n"
                     "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}\n"
                     "h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em}\n"
                     "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}\n"
                     "th{background:#f4f4f4}td.l,th.l{text-align:left}.plot{border:1px solid #eee;background:#fff}\n"
                     ".bad{color:#b00;font-weight:bold}.good{color:#161}.note{color:#775}\n"
                     "</style></head><body>\n<h1>" + html_escape(title) + "</h1>\n<p>" + html_escape(run_line(run)) +
                     " Output in <code>" + html_escape(run.dir) + "</code>.</p>\n";

  const std::int64_t last_step = run.steps.empty() ? 0 : run.steps.back().step;
  if (!run.status.empty()) html += "<p class=\"bad\">" + html_escape(run.status) + "</p>\n";
  else if (!run.outcome)
    html += "<p class=\"bad\">The run has not finished (no summary.json): it stopped or failed after step " +
            std::to_string(last_step) + ", or is still running. <code>celer-train --resume</code> continues it "
            "from its newest checkpoint, if it saved any.</p>\n";
  for (const auto& note : run.notes) html += "<p class=\"note\">" + html_escape(note) + "</p>\n";

  // The outcome.
  html += "<h2>Outcome</h2>\n<table>\n";
  if (const auto& o = run.outcome) {
    if (o->steps != last_step && !run.steps.empty())
      html += "<tr><td class=\"l note\" colspan=\"2\">summary.json describes step " + std::to_string(o->steps) +
              "; the metrics go on to step " + std::to_string(last_step) + " (a later part of the run did not finish)</td></tr>\n";
    html += row("final validation accuracy", "<b>" + fixed(o->final_val_accuracy, 4) + "</b>");
    html += row("final validation loss", fixed(o->final_val_loss, 4));
    html += row("steps (epochs)", std::to_string(o->steps) + " (" + fixed(o->epochs, 1) + ")");
    html += row("workers", std::to_string(o->num_workers));
    html += row("samples/s", fixed(o->samples_per_s, 0) + " (samples trained / seconds in training calls)");
    html += row("time", seconds_text(o->train_seconds) + " training, " + seconds_text(o->seconds) + " in all");
    std::string digests;
    for (const auto& d : o->digests) digests += (digests.empty() ? "" : " ") + html_escape(d);
    html += row("replicas equal",
                o->replicas_equal ? "<span class=\"good\">yes</span>: every worker's parameter digest is <code>" +
                                      html_escape(o->digests.empty() ? std::string() : o->digests.front()) + "</code>"
                                  : "<span class=\"bad\">NO</span>: parameter digests <code>" + digests + "</code>");
  } else {
    if (!run.validations.empty())
      html += row("last validation accuracy", "<b>" + fixed(run.validations.back().accuracy, 4) + "</b> at step " +
                                                std::to_string(run.validations.back().step));
    html += row("steps logged", std::to_string(run.steps.size()) + " (the last step " + std::to_string(last_step) + ")");
  }
  const auto m = means_of(run.steps);
  html += row("mean step time", "data-wait " + fixed(1e3 * m.data_wait, 2) + " ms, compute " + fixed(1e3 * m.compute, 2) +
                                  " ms, allreduce " + fixed(1e3 * m.allreduce, 2) + " ms (per worker, over the steps logged)");
  html += row("sent per step", bytes_text(m.bytes) + " by each worker");
  html += "</table>\n";

  for (const auto& page : plots_of(run))
    html += "<h2>" + html_escape(page.title) + "</h2>\n<p>" + html_escape(page.caption) + "</p>\n" + apps::render_svg(page.plot);

  html += "<h2>Configuration</h2>\n<p>From run.json (<code>celer-train --resume</code> reads it).</p>\n<table>\n";
  for (const auto& [key, value] : run.config) html += "<tr><th class=\"l\">" + html_escape(key) + "</th><td class=\"l\">" + html_escape(value) + "</td></tr>\n";
  html += "</table>\n<p>Files: <code>metrics.jsonl</code>, <code>summary.json</code>, <code>run.json</code>, "
          "<code>tensorboard/</code>, <code>checkpoints/</code> (with checkpoint_every). "
          "<code>celer-train --report-only --output DIR</code> rebuilds this page.</p>\n</body></html>\n";
  return html;
}

expected<std::string> write_report(const std::string& dir, const std::string& status) {
  auto run = read_run(dir);
  if (!run) return run.error();
  run->status = status;
  const fs::path path = fs::path(dir) / "report.html";
  const fs::path temporary = fs::path(dir) / "report.html.tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << render_report(*run);
    out.close();
    if (!out) return error(error_code::unavailable, "cannot write " + temporary.string());
  }
  std::error_code ec;
  fs::rename(temporary, path, ec);
  if (ec) return error(error_code::unavailable, "cannot write " + path.string() + ": " + ec.message());
  return path.string();
}

} // namespace celer::train_app
