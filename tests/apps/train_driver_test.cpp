// celer-train's driver, its pieces on their own (no workers, no runtime): the metrics files
// every step is written to, the record of failures and recoveries that summary.json's
// `recoveries` comes from, and what noise_scale and dynamic loss scaling add to a step's
// figures and to the summary.
#include <catch2/catch.hpp>

#include "batch_growth.hpp"
#include "loss_scale_record.hpp"
#include "metrics_files.hpp"
#include "recovery_log.hpp"
#include "train_harness.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace celer_train_test;
using namespace celer::train_app;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

bool has(const std::vector<celer::trainer::scalar>& figures, const std::string& tag, double value) {
  return std::any_of(figures.begin(), figures.end(), [&](const auto& f) { return f.tag == tag && f.value == value; });
}

step_total step_of(std::int64_t step, std::int64_t batch, double noise_scale) {
  step_total t;
  t.step = step;
  t.batch_size = batch;
  t.noise_scale = noise_scale;
  t.lr = 0.01;
  return t;
}

} // namespace

TEST_CASE("the metrics files take each step's figures and mode, and a resumed run appends to them", "[train][driver]") {
  scratch_dir d;
  const std::vector<celer::trainer::scalar> figures = {{"loss", 0.5}, {"samples_per_s", 1000}};
  {
    auto files = metrics_files::open(d.dir.string(), /*append=*/false);
    REQUIRE(files);
    REQUIRE(files->write(1, "sync", figures));
    REQUIRE(files->write(2, "async", figures));
    files->close();
  }
  {
    auto files = metrics_files::open(d.dir.string(), /*append=*/true);
    REQUIRE(files);
    REQUIRE(files->write(3, "sync", figures));
    files->close();
  }
  const auto lines = jsonl(d.dir / "metrics.jsonl");
  REQUIRE(lines.size() == 3);
  CHECK(lines[0].at("step") == 1);
  CHECK(lines[1].at("mode") == "async");
  CHECK(lines[2].at("loss") == 0.5);
  std::size_t event_files = 0;
  for (const auto& f : fs::directory_iterator(d.dir / "tensorboard")) {
    auto read = celer::trainer::read_event_file(f.path().string());
    REQUIRE(read);
    event_files += 1;
  }
  CHECK(event_files == 2);  // one per run, as TensorBoard takes them

  std::ofstream(d.dir / "file") << "x";
  CHECK_FALSE(metrics_files::open((d.dir / "file").string(), /*append=*/false));  // no directory there
}

TEST_CASE("the recovery log counts failures and records how each was recovered from, with its times", "[train][driver]") {
  const recovery_log::clock::time_point t0{std::chrono::hours(1)};
  recovery_log log(t0);
  CHECK(log.failures() == 0);
  nlohmann::ordered_json none;
  log.summarise(none);
  CHECK_FALSE(none.contains("recoveries"));

  log.call_began(t0 + 10s);
  log.failure_seen(t0 + 12s);
  CHECK(log.count_failure() == 1);
  const auto took = log.by_peers(1, {1}, 29, t0 + 15s);
  CHECK(took.seconds == Approx(3));
  CHECK(took.seen_after_call_began == Approx(2));
  CHECK(log.count_failure() == 2);
  log.by_checkpoint(2, 20, t0 + 20s);
  log.by_servers(3, 0, 40, 1.5);
  CHECK(log.failures() == 2);

  nlohmann::ordered_json summary;
  log.summarise(summary);
  const auto& r = summary.at("recoveries");
  REQUIRE(r.size() == 3);
  CHECK(r[0] == nlohmann::json{{"failure", 1}, {"how", "peers"}, {"replaced", {1}}, {"step", 29}, {"seconds", 3.0},
                               {"seen_after_call_began_s", 2.0}});
  CHECK(r[1] == nlohmann::json{{"failure", 2}, {"how", "checkpoint"}, {"step", 20}, {"seconds", 8.0}});
  CHECK(r[2] == nlohmann::json{{"failure", 3}, {"how", "servers"}, {"replaced", {0}}, {"step", 40}, {"seconds", 1.5}});
}

TEST_CASE("noise_scale adds each step's batch, noise scale and lr, says when the batch grows, and sums up",
          "[train][driver]") {
  train_config cfg;
  cfg.batch_size_policy = "noise_scale";
  cfg.batch_size_lr_scaling = "sqrt";
  batch_growth batch(cfg);
  std::ostringstream out;
  std::vector<celer::trainer::scalar> first;
  batch.note(step_of(1, 64, -1), first, out);
  CHECK(has(first, "batch_size", 64));
  CHECK_FALSE(std::any_of(first.begin(), first.end(), [](const auto& f) { return f.tag == "noise_scale"; }));
  CHECK(has(first, "lr", 0.01));
  std::vector<celer::trainer::scalar> second;
  batch.note(step_of(2, 64, 300), second, out);
  CHECK(has(second, "noise_scale", 300));
  CHECK(out.str().empty());
  std::vector<celer::trainer::scalar> third;
  batch.note(step_of(3, 128, 310), third, out);
  CHECK_THAT(out.str(), Contains("step 3: the batch grows from 64 to 128 samples a step (noise scale 300 > 64), lr 0.01000"));

  nlohmann::ordered_json summary;
  batch.summarise(summary);
  CHECK(summary.at("final_batch_size") == 128);
  CHECK(summary.at("final_noise_scale") == 310.0);

  train_config fixed_batch;
  batch_growth off(fixed_batch);
  std::vector<celer::trainer::scalar> none;
  off.note(step_of(1, 64, 300), none, out);
  nlohmann::ordered_json empty;
  off.summarise(empty);
  CHECK(none.empty());
  CHECK(empty.empty());
}

TEST_CASE("dynamic loss scaling adds each step's scale and overflow, and counts the steps skipped", "[train][driver]") {
  train_config cfg;
  cfg.loss_scale = "dynamic";
  loss_scale_record scale(cfg);
  step_total t;
  t.loss_scale = 65536;
  t.overflow = true;
  std::vector<celer::trainer::scalar> figures;
  scale.note(t, figures);
  CHECK(has(figures, "loss_scale", 65536));
  CHECK(has(figures, "overflow", 1));
  t.loss_scale = 32768;
  t.overflow = false;
  figures.clear();
  scale.note(t, figures);
  CHECK(has(figures, "overflow", 0));
  CHECK(scale.overflows() == 1);
  nlohmann::ordered_json summary;
  scale.summarise(summary);
  CHECK(summary.at("loss_scale_overflows") == 1);
  CHECK(summary.at("final_loss_scale") == 32768.0);

  train_config none;
  loss_scale_record off(none);
  figures.clear();
  off.note(t, figures);
  CHECK(figures.empty());
}
