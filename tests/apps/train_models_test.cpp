// celer-train's model side, as a user runs it: bf16 mixed precision, dynamic loss scaling,
// the noise-scale batch size policy and the character-level transformer on the fortunes (apps/train/README.md,
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

TEST_CASE("dynamic loss scaling changes no bit at a power of two, and a step that overflows is skipped everywhere", "[train]") {
  scratch_dir s;
  std::string out;
  const std::string base = "--config " + digits_config + " --progress-interval 0";
  REQUIRE(run_celer_train(s.dir, base + " --max-steps 60 --name plain", out) == 0);
  REQUIRE(run_celer_train(s.dir, base + " --max-steps 60 --name scaled --loss-scale dynamic", out) == 0);
  const auto plain = json::parse(slurp(s.dir / "celer_results/plain/summary.json"));
  const auto scaled = json::parse(slurp(s.dir / "celer_results/scaled/summary.json"));
  // x 2^16 before backward and / 2^16 after are exact in float32: the same weights.
  CHECK(scaled.at("parameters_digests") == plain.at("parameters_digests"));
  CHECK(scaled.at("loss_scale_overflows") == 0);
  CHECK(scaled.at("final_loss_scale") == 65536.0);

  // Worker 1's gradient overflows at step 5 (CELER_TRAIN_INJECT_OVERFLOW, what an fp16
  // gradient would do): every replica skips that step and the scale halves; checkpoints
  // keep the scale, so the run resumed at step 40 goes on at 2^15.
  const std::string hook = "CELER_TRAIN_INJECT_OVERFLOW=1:5 timeout 90 \"$CELER_TRAIN\" " + base +
                           " --name over --loss-scale dynamic --checkpoint-every 20";
  REQUIRE(run_script(s.dir, hook + " --max-steps 40 > \"$LOG\" 2>&1", out) == 0);
  REQUIRE(run_script(s.dir, hook + " --max-steps 60 --resume > \"$LOG\" 2>&1", out) == 0);
  INFO(out);
  CHECK_THAT(out, Contains("scale 2^15"));
  std::vector<double> scales;
  std::vector<std::int64_t> overflowed;
  for (const auto& l : jsonl(s.dir / "celer_results/over/metrics.jsonl")) {
    if (!l.contains("loss")) continue;
    scales.push_back(l.at("loss_scale").get<double>());
    if (l.at("overflow") == 1) overflowed.push_back(l.at("step").get<std::int64_t>());
  }
  REQUIRE(scales.size() == 60);
  CHECK(overflowed == std::vector<std::int64_t>{5});
  CHECK(scales[4] == 65536.0);  // step 5 ran at 2^16 and overflowed...
  CHECK(scales[5] == 32768.0);  // ...so step 6 ran at 2^15,
  CHECK(scales[40] == 32768.0);  // and so did step 41, after the resume
  const auto over = json::parse(slurp(s.dir / "celer_results/over/summary.json"));
  CHECK(over.at("replicas_equal") == true);
  CHECK(over.at("final_loss_scale") == 32768.0);
  CHECK(over.at("final_val_accuracy").get<double>() > 0.85);

  // With 1-bit compression the workers agree on the overflow before compressing (one float
  // each), so no inf reaches a residual: the run learns and the replicas stay equal.
  REQUIRE(run_script(s.dir, "CELER_TRAIN_INJECT_OVERFLOW=0:7 timeout 90 \"$CELER_TRAIN\" " + base +
                              " --name sign --compression sign --loss-scale dynamic --max-steps 120 > \"$LOG\" 2>&1",
                     out) == 0);
  const auto sign = json::parse(slurp(s.dir / "celer_results/sign/summary.json"));
  CHECK(sign.at("loss_scale_overflows") == 1);
  CHECK(sign.at("replicas_equal") == true);
  CHECK(sign.at("final_val_accuracy").get<double>() > 0.85);
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
  CHECK(run_celer_train(s.dir, "--config " + digits_config + " --loss-scale dynamic --mode async", out) == 2);
  CHECK_THAT(out, Contains("key 'loss_scale'") && Contains("mode: sync"));
  CHECK(run_celer_train(s.dir, "--config " + digits_config + " --loss-scale dynamic --loss-scale-init 0", out) == 2);
  CHECK_THAT(out, Contains("key 'loss_scale_init'"));
  CHECK(run_celer_train(s.dir, "--help", out) == 0);
  CHECK_THAT(out, Contains("--loss-scale") && Contains("loss_scale_growth_interval"));
}
