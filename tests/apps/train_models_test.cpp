// celer-train's model side, as a user runs it: bf16 mixed precision, the noise-scale batch
// size policy and the character-level transformer on the fortunes (apps/train/README.md,
// "Precision", "Adaptive batch size", "Text"). The real binary (CELER_TRAIN) in a fresh
// directory; each run is a few seconds on 2 cores.
#include <catch2/catch.hpp>

#include "train_harness.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

namespace {

using namespace celer_train_test;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using json = nlohmann::json;

} // namespace

TEST_CASE("bf16 mixed precision trains the digits MLP past 0.85 with equal replicas", "[train]") {
  scratch_dir s;
  std::string out;
  REQUIRE(run_celer_train(s.dir, "--config " + digits_config + " --name bf --precision bf16 --max-steps 120", out) == 0);
  INFO(out);
  const auto summary = json::parse(slurp(s.dir / "celer_results/bf/summary.json"));
  CHECK(summary.at("final_val_accuracy").get<double>() > 0.85);
  CHECK(summary.at("replicas_equal") == true);
  CHECK(json::parse(slurp(s.dir / "celer_results/bf/run.json")).at("precision") == "bf16");
  // The forward pass really ran in bf16: the weights differ from the float32 run's.
  std::string out32;
  REQUIRE(run_celer_train(s.dir, "--config " + digits_config + " --name f32 --max-steps 120", out32) == 0);
  const auto summary32 = json::parse(slurp(s.dir / "celer_results/f32/summary.json"));
  CHECK(summary32.at("parameters_digests")[0] != summary.at("parameters_digests")[0]);
}

TEST_CASE("with the noise_scale policy the batch grows during a run that still learns, replicas equal, lr following", "[train]") {
  scratch_dir s;
  std::string out;
  REQUIRE(run_celer_train(s.dir,
                          "--config " + digits_config +
                            " --name ns --batch-size-policy noise_scale --max-batch-size 512 --max-steps 150"
                            " --batch-size-lr-scaling sqrt",
                          out) == 0);
  INFO(out);
  CHECK_THAT(out, Contains("the batch grows from 64 to 128 samples a step"));
  std::vector<std::int64_t> batches;
  std::size_t estimates = 0;
  for (const auto& l : jsonl(s.dir / "celer_results/ns/metrics.jsonl")) {
    if (!l.contains("loss")) continue;
    batches.push_back(l.at("batch_size").get<std::int64_t>());
    // sqrt scaling from the shipped lr, 0.002, at the starting batch of 64.
    CHECK(l.at("lr").get<double>() == Approx(0.002 * std::sqrt(static_cast<double>(batches.back()) / 64)));
    if (l.contains("noise_scale")) {
      ++estimates;
      CHECK(std::isfinite(l.at("noise_scale").get<double>()));
    }
  }
  REQUIRE(batches.size() == 150);
  CHECK(batches.front() == 64);
  CHECK(batches.back() > 64);
  CHECK(batches.back() <= 512);
  CHECK(std::is_sorted(batches.begin(), batches.end()));  // it grows, never shrinks
  CHECK(estimates > 100);
  const auto summary = json::parse(slurp(s.dir / "celer_results/ns/summary.json"));
  CHECK(summary.at("final_val_accuracy").get<double>() > 0.9);
  CHECK(summary.at("replicas_equal") == true);
  CHECK(summary.at("final_batch_size") == batches.back());
  // report.html draws the batch and the estimate (a plot only this policy has).
  CHECK_THAT(slurp(s.dir / "celer_results/ns/report.html"), Contains("Batch size and gradient noise scale"));
}

TEST_CASE("the character transformer learns the fortunes data-parallel: loss falls, replicas equal", "[train]") {
  scratch_dir s;
  std::string out;
  REQUIRE(run_celer_train(s.dir, "--config " + fortunes_config + " --name tf --max-steps 60 --eval-every 30", out) == 0);
  INFO(out);
  CHECK_THAT(out, Contains("final validation next-character accuracy") && Contains("bits per character"));
  double first = 0, last = 0, bpc_30 = 0, bpc_60 = 0;
  std::size_t steps = 0;
  for (const auto& l : jsonl(s.dir / "celer_results/tf/metrics.jsonl")) {
    if (l.contains("loss")) {
      ++steps;
      const double loss = l.at("loss").get<double>();
      if (l.at("step") <= 10) first += loss / 10;
      if (l.at("step") > 50) last += loss / 10;
    }
    if (l.contains("val_bits_per_char")) (l.at("step") == 30 ? bpc_30 : bpc_60) = l.at("val_bits_per_char").get<double>();
  }
  CHECK(steps == 60);
  CHECK(last < first - 0.5);  // nats per character
  CHECK(bpc_60 > 0);
  CHECK(bpc_60 < bpc_30);
  const auto summary = json::parse(slurp(s.dir / "celer_results/tf/summary.json"));
  CHECK(summary.at("final_val_bits_per_char").get<double>() == Approx(bpc_60));
  CHECK(summary.at("final_val_accuracy").get<double>() > 0.15);
  CHECK(summary.at("replicas_equal") == true);
}

TEST_CASE("the model options refuse what does not fit, naming the key, and --help explains them", "[train]") {
  scratch_dir s;
  std::string out;
  CHECK(run_celer_train(s.dir, "--help", out) == 0);
  CHECK_THAT(out, Contains("--precision") && Contains("--batch-size-policy") && Contains("MODELS, PRECISION AND BATCH SIZE") &&
                    Contains("batch_size_lr_scaling") && Contains("val_bits_per_char") && Contains("transformer"));
  CHECK(run_celer_train(s.dir, "--config " + digits_config + " --model transformer", out) == 2);
  CHECK_THAT(out, Contains("key 'model'") && Contains("data: fortunes"));
  CHECK(run_celer_train(s.dir, "--config " + fortunes_config + " --name w --max-steps 1 --data digits", out) == 2);
  CHECK_THAT(out, Contains("key 'model'"));
  CHECK(run_celer_train(s.dir, "--config " + digits_config + " --batch-size-policy noise_scale --compression sign", out) == 2);
  CHECK_THAT(out, Contains("key 'compression'") && Contains("noise_scale"));
  CHECK(run_celer_train(s.dir, "--config " + digits_config + " --batch-size-policy noise_scale --max-batch-size 32", out) == 2);
  CHECK_THAT(out, Contains("key 'max_batch_size'") && Contains("starting batch 64"));
  scratch_dir t;
  std::ofstream(t.dir / "fp16.yaml") << "precision: fp16\n";
  CHECK(run_celer_train(t.dir, "--config fp16.yaml", out) == 2);
  CHECK_THAT(out, Contains("key 'precision'") && Contains("fp32 or bf16"));
}
