// celer-train's report.html: written by a real run (CELER_TRAIN), rebuilt by --report-only
// from a directory's files, and rendered from records here. Part of celer_train_tests
// (train_test.cpp holds Catch's main).
#include <catch2/catch.hpp>

#include "train_harness.hpp"

#include "report.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

namespace {

using namespace celer_train_test;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;
namespace app = celer::train_app;

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

const std::string& shipped_config = celer_train_test::digits_config;

} // namespace

TEST_CASE("a finished run writes report.html: a plot for each curve, the final accuracy, nothing fetched, its name escaped",
          "[train][report]") {
  celer_train_test::scratch_dir s;
  std::string output;
  // A name with each character HTML must escape (and a quote for attributes).
  const int code = run_celer_train(s.dir, "--config \"" + shipped_config + "\" --name \"r<&>\\\"1\" --output run --max-steps 40 "
                                   "--eval-every 20 --progress-interval 100", output);
  INFO(output);
  REQUIRE(code == 0);
  CHECK_THAT(output, Contains("report in run/report.html"));
  const auto html = slurp(s.dir / "run" / "report.html");
  REQUIRE(!html.empty());
  CHECK(html.starts_with("<!DOCTYPE html>"));
  CHECK(html.ends_with("</html>\n"));
  // One <svg> a plot, each with its id and a line in it.
  const auto plots = app::report_plots();
  CHECK(plots.size() == 6);
  CHECK(count_of(html, "<svg") == plots.size());
  CHECK(count_of(html, "</svg>") == plots.size());
  for (const auto& id : plots) CHECK_THAT(html, Contains("<svg class=\"plot\" id=\"" + id + "\""));
  CHECK(count_of(html, "<polyline") >= plots.size());
  // The outcome as summary.json has it.
  const auto summary = nlohmann::json::parse(slurp(s.dir / "run" / "summary.json"));
  char accuracy[16];
  std::snprintf(accuracy, sizeof accuracy, "%.4f", summary.at("final_val_accuracy").get<double>());
  CHECK_THAT(html, Contains(std::string("final validation accuracy</th><td class=\"l\"><b>") + accuracy + "</b>"));
  CHECK_THAT(html, Contains("replicas equal") && Contains(summary.at("parameters_digests")[0].get<std::string>()));
  CHECK_THAT(html, Contains("data-wait") && Contains("allreduce") && Contains("validation accuracy"));
  // Self-contained: no script, no URL of any kind.
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("http") == std::string::npos);
  CHECK(html.find("url(") == std::string::npos);
  // The name, escaped wherever it appears (title, heading, the config table).
  CHECK_THAT(html, Contains("<title>celer-train: r&lt;&amp;&gt;&quot;1</title>"));
  CHECK(count_of(html, "r&lt;&amp;&gt;&quot;1") >= 3);
  CHECK(html.find("r<&>") == std::string::npos);
}

TEST_CASE("celer-train --report-only rebuilds the report from a run's files, and an unfinished run's report says so", "[train][report]") {
  celer_train_test::scratch_dir s;
  const fs::path run = s.dir / "cut";
  fs::create_directories(run);
  std::ofstream(run / "run.json") << R"({"name": "cut", "num_workers": 2, "lr": 0.002})";
  // Steps 1-4, then 3-5 again (workers replaced from step 2's checkpoint), a validation at
  // 4, and a last line cut short; no summary.json: the run never reached its end.
  std::ofstream metrics(run / "metrics.jsonl");
  for (int step : {1, 2, 3, 4, 3, 4, 5})
    metrics << R"({"step":)" << step << R"(,"wall_time":1.5,"loss":)" << 2.0 / step
            << R"(,"accuracy":0.5,"samples_per_s":30000,"bytes_sent":104488,"data_wait_s":0.0001,"compute_s":0.001,)"
            << R"("allreduce_s":0.0005,"grad_norm":null})" << "\n";
  metrics << R"({"step":4,"wall_time":1.5,"val_loss":0.4,"val_accuracy":0.8765})" << "\n" << R"({"step":5,"wall_ti)";
  metrics.close();

  std::string output;
  const int code = run_celer_train(s.dir, "--report-only --output cut", output);
  INFO(output);
  REQUIRE(code == 0);
  CHECK_THAT(output, Contains("wrote cut/report.html"));
  const auto html = slurp(run / "report.html");
  CHECK_THAT(html, Contains("has not finished") && Contains("after step 5"));
  CHECK_THAT(html, Contains("last validation accuracy</th><td class=\"l\"><b>0.8765</b> at step 4"));
  CHECK_THAT(html, Contains("1 of the 9 lines of metrics.jsonl are not metrics"));
  CHECK_THAT(html, Contains("<th class=\"l\">lr</th><td class=\"l\">0.002</td>"));
  CHECK(count_of(html, "<svg") == app::report_plots().size());
  // The steps went back once: each per-step line is drawn in two pieces. The loss plot holds
  // the training loss (2 pieces) and the validation loss (1).
  const auto loss = html.substr(html.find("id=\"loss\""), html.find("id=\"accuracy\"") - html.find("id=\"loss\""));
  CHECK(count_of(loss, "<polyline") == 3);
  // The gradient norms were null: that plot has no line, but is there.
  const auto norm = html.substr(html.find("id=\"grad-norm\""));
  CHECK(count_of(norm, "<polyline") == 0);

  // No run there: exit 2, saying so, and nothing written.
  const int none = run_celer_train(s.dir, "--report-only --output nowhere", output);
  CHECK(none == 2);
  CHECK_THAT(output, Contains("no run in nowhere"));
  CHECK(!fs::exists(s.dir / "nowhere"));
}

TEST_CASE("the report escapes every text from the run's files and marks replicas that differ", "[train][report]") {
  app::run_record run;
  run.name = "<b>&name\"";
  run.config = {{"name", "<b>&name\""}, {"data", "x</td><script>"}};
  run.notes = {"a <note> & more"};
  run.outcome = app::run_outcome{.steps = 0, .num_workers = 2, .final_val_accuracy = 0.5,
                                 .digests = {"<aaaa>", "bbbb"}, .replicas_equal = false};
  const auto html = app::render_report(run);
  CHECK(html.find("<b>&name") == std::string::npos);
  CHECK(html.find("<script>") == std::string::npos);
  CHECK(html.find("<note>") == std::string::npos);
  CHECK_THAT(html, Contains("&lt;b&gt;&amp;name&quot;") && Contains("x&lt;/td&gt;&lt;script&gt;") &&
                     Contains("a &lt;note&gt; &amp; more"));
  CHECK_THAT(html, Contains("<span class=\"bad\">NO</span>: parameter digests <code>&lt;aaaa&gt; bbbb</code>"));
  // No steps logged: the plots are drawn empty, not left out.
  CHECK(count_of(html, "<svg") == app::report_plots().size());
  CHECK(count_of(html, "<polyline") == 0);
}

TEST_CASE("a run stopped by SIGINT writes a report that says so, and the report of its resumed run covers every step",
          "[train][report]") {
  celer_train_test::scratch_dir s;
  std::string output;
  // Many epochs, checkpoints every 20 steps; SIGINT once the first progress line is out.
  const int stopped = run_script(s.dir, "\"$CELER_TRAIN\" --config \"" + shipped_config + "\" --output run --epochs 1000 "
                                 "--checkpoint-every 20 --progress-interval 100 > \"$LOG\" 2>&1 & p=$!; "
                                 "for i in $(seq 600); do grep -q \"^step \" \"$LOG\" && break; sleep 0.1; done; "
                                 "kill -INT $p; wait $p", output);
  INFO(output);
  REQUIRE(stopped == 130);
  CHECK_THAT(output, Contains("stopped at step") && Contains("report in run/report.html"));
  const auto html = slurp(s.dir / "run" / "report.html");
  CHECK_THAT(html, Contains("Stopped before the end (Ctrl-C or SIGTERM)"));
  CHECK(count_of(html, "<svg") == app::report_plots().size());

  const auto at = output.find("stopped at step ");
  REQUIRE(at != std::string::npos);
  const long long step = std::stoll(output.substr(at + 16));
  const int resumed = run_celer_train(s.dir, "--output run --resume --max-steps " + std::to_string(step + 20) +
                                      " --progress-interval 100", output);
  INFO(output);
  REQUIRE(resumed == 0);
  const auto again = slurp(s.dir / "run" / "report.html");
  CHECK(again.find("Stopped before the end") == std::string::npos);
  CHECK(again.find("has not finished") == std::string::npos);
  CHECK_THAT(again, Contains("steps (epochs)</th><td class=\"l\">" + std::to_string(step + 20) + " ("));
  // Steps 1 to step + 20 in one rising line: the training loss is one polyline.
  const auto loss = again.substr(again.find("id=\"loss\""), again.find("id=\"accuracy\"") - again.find("id=\"loss\""));
  CHECK(count_of(loss, "<polyline") == 2);  // the training loss and the validation loss
}
