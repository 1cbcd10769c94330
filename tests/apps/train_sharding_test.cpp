// celer-train's speed-weighted sharding (apps/train/README.md, "Workers of different
// speeds"): each worker's micro-batch and shard in proportion to its speed, declared or
// measured, with the allreduce's mean weighed to match, and re-split during the run. The
// split and the re-split rule (sharding.hpp) directly; then the real binary (CELER_TRAIN)
// in a fresh directory, where CELER_TRAIN_WORKER_SPEED slows one worker as a slower (or
// throttling) device would.
#include <catch2/catch.hpp>

#include "sharding.hpp"
#include "train_harness.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace {

using namespace celer_train_test;
using Catch::Matchers::Contains;
using json = nlohmann::json;

std::vector<std::int64_t> split_of(const json& summary) { return summary.at("batch_split").get<std::vector<std::int64_t>>(); }

} // namespace

TEST_CASE("the batch splits by speed, every worker keeps a sample, and a step waits for its slowest part", "[train][sharding]") {
  using celer::train_app::split_by_speed;
  CHECK(split_by_speed({3, 1}, 64) == std::vector<std::int64_t>{48, 16});
  CHECK(split_by_speed({1, 1, 1}, 64) == std::vector<std::int64_t>{22, 21, 21});
  CHECK(split_by_speed({1, 1e-9}, 64) == std::vector<std::int64_t>{63, 1});
  CHECK(split_by_speed({19.5, 15.7}, 100) == std::vector<std::int64_t>{55, 45});  // an A100 and a V100 by TFLOPS
  CHECK(celer::train_app::step_compute({48, 16}, {3000, 1000}) == Approx(0.016));
  CHECK(celer::train_app::split_text({48, 16}) == "48, 16");
}

TEST_CASE("the rebalancer re-splits only when two windows in a row gain 10% the same way", "[train][sharding]") {
  using celer::train_app::rebalancer;
  // Worker 0 computes 2,000 samples/s, worker 1 1,000: at 32 each, worker 1 holds the step.
  auto window = [](rebalancer& r, double rate0, double rate1, const std::vector<std::int64_t>& split) {
    for (int step = 0; step < 10; ++step) {
      r.observe(0, split[0], static_cast<double>(split[0]) / rate0);
      r.observe(1, split[1], static_cast<double>(split[1]) / rate1);
    }
    return r.after_steps(10, split);
  };
  rebalancer r(2, /*interval=*/10);
  const std::vector<std::int64_t> equal{32, 32};
  CHECK_FALSE(window(r, 2000, 1000, equal));  // the first word waits for a second
  auto moved = window(r, 2000, 1000, equal);
  REQUIRE(moved);
  CHECK(moved->split == std::vector<std::int64_t>{43, 21});
  CHECK(moved->rates[0] == Approx(2000));
  CHECK(moved->gain == Approx(1 - (43.0 / 2000) / (32.0 / 1000)));  // worker 0 is the slower part now
  // At the new split the rates hold: nothing more to gain.
  CHECK_FALSE(window(r, 2000, 1000, moved->split));
  CHECK_FALSE(window(r, 2000, 1000, moved->split));

  // Timings that wander one way, then the other, move nothing.
  rebalancer noisy(2, 10);
  CHECK_FALSE(window(noisy, 2000, 1000, equal));
  CHECK_FALSE(window(noisy, 1000, 2000, equal));
  CHECK_FALSE(window(noisy, 2000, 1000, equal));
  // Nor does a gain under 10% (1,000 against 1,150 samples/s: 7%).
  rebalancer close(2, 10);
  CHECK_FALSE(window(close, 1150, 1000, equal));
  CHECK_FALSE(window(close, 1150, 1000, equal));
  // A window reports only once `interval` steps have gone by.
  rebalancer partial(2, 30);
  CHECK_FALSE(window(partial, 2000, 1000, equal));
  CHECK_FALSE(window(partial, 2000, 1000, equal));
  CHECK_FALSE(window(partial, 2000, 1000, equal));  // 30 steps: the first word
  CHECK_FALSE(window(partial, 2000, 1000, equal));
  CHECK_FALSE(window(partial, 2000, 1000, equal));
  CHECK(window(partial, 2000, 1000, equal));
}

TEST_CASE("declared worker speeds split the batch by celer::gpu::shares; equal speeds change no bit", "[train][sharding]") {
  scratch_dir s;
  std::string out;
  const std::string base = "--config " + digits_config + " --max-steps 60 --progress-interval 100";
  REQUIRE(run_celer_train(s.dir, base + " --name equal", out) == 0);
  REQUIRE(run_celer_train(s.dir, base + " --name ones --sharding speed --worker-speeds 1 1", out) == 0);
  INFO(out);
  CHECK_THAT(out, Contains("speed-weighted shards: micro-batches 32, 32 of 64 samples, by speeds 1.00, 1.00 declared"));
  const auto equal = json::parse(slurp(s.dir / "celer_results/equal/summary.json"));
  const auto ones = json::parse(slurp(s.dir / "celer_results/ones/summary.json"));
  // Equal weights deal the samples as equal shards do, and weigh each gradient by 1.
  CHECK(ones.at("parameters_digests") == equal.at("parameters_digests"));

  REQUIRE(run_celer_train(s.dir, base + " --name three --sharding speed --worker-speeds 3 1", out) == 0);
  CHECK_THAT(out, Contains("micro-batches 48, 16 of 64 samples, by speeds 3.00, 1.00 declared"));
  const auto three = json::parse(slurp(s.dir / "celer_results/three/summary.json"));
  CHECK(split_of(three) == std::vector<std::int64_t>{48, 16});
  CHECK(three.at("replicas_equal") == true);
  CHECK(three.at("final_val_accuracy").get<double>() > 0.85);
  // Every step still sees 64 samples, and the epoch has as many steps.
  std::size_t steps = 0;
  for (const auto& l : jsonl(s.dir / "celer_results/three/metrics.jsonl")) {
    if (!l.contains("loss")) continue;
    ++steps;
    if (l.at("step") != 23) CHECK(l.at("samples_per_s").get<double>() > 0);
  }
  CHECK(steps == 60);
}

TEST_CASE("with a 3:1 split a replaced worker and a resumed run end with the weights of a run never stopped", "[train][sharding]") {
  scratch_dir s;
  std::string out;
  const std::string base = "--config " + digits_config + " --progress-interval 100 --sharding speed --worker-speeds 3 1";
  REQUIRE(run_celer_train(s.dir, base + " --name whole --max-steps 60", out) == 0);
  const auto whole = json::parse(slurp(s.dir / "celer_results/whole/summary.json"));
  // Worker 1 throws at step 30; its replacement takes the split with its spec.
  REQUIRE(run_script(s.dir, "CELER_TRAIN_INJECT_FAILURE=1:30 timeout 90 \"$CELER_TRAIN\" " + base +
                              " --name failed --max-steps 60 --max-failures 1 > \"$LOG\" 2>&1",
                     out) == 0);
  CHECK_THAT(out, Contains("replacing worker 1 alone"));
  CHECK(json::parse(slurp(s.dir / "celer_results/failed/summary.json")).at("parameters_digests") == whole.at("parameters_digests"));
  // Stopped at 40 and resumed: the split comes back from the checkpoint.
  REQUIRE(run_celer_train(s.dir, base + " --name cut --max-steps 40 --checkpoint-every 20", out) == 0);
  REQUIRE(run_celer_train(s.dir, "--name cut --resume --max-steps 60 --progress-interval 100", out) == 0);
  CHECK_THAT(out, Contains("micro-batches 48, 16 of 64 samples as when the run began"));
  CHECK(json::parse(slurp(s.dir / "celer_results/cut/summary.json")).at("parameters_digests") == whole.at("parameters_digests"));
}

TEST_CASE("a worker at a quarter of the speed gets the smaller share when speeds are measured, and a resumed run keeps it",
          "[train][sharding]") {
  scratch_dir s;
  std::string out;
  const std::string run = "CELER_TRAIN_WORKER_SPEED=1:0.25 timeout 90 \"$CELER_TRAIN\" --config " + digits_config +
                          " --progress-interval 100 --name slow --sharding speed --checkpoint-every 20";
  REQUIRE(run_script(s.dir, run + " --max-steps 40 > \"$LOG\" 2>&1", out) == 0);
  INFO(out);
  CHECK_THAT(out, Contains("measured (samples/s)"));
  const auto first = split_of(json::parse(slurp(s.dir / "celer_results/slow/summary.json")));
  REQUIRE(first.size() == 2);
  CHECK(first[0] + first[1] == 64);
  // About 51 and 13 (4 to 1); worker 1 is much the slower, whatever the load.
  CHECK(first[1] < first[0]);
  REQUIRE(run_script(s.dir, run + " --max-steps 60 --resume > \"$LOG\" 2>&1", out) == 0);
  CHECK_THAT(out, Contains("as when the run began (from its checkpoint)") && Contains("resumed from checkpoint"));
  const auto resumed = json::parse(slurp(s.dir / "celer_results/slow/summary.json"));
  CHECK(split_of(resumed) == first);
  CHECK(resumed.at("replicas_equal") == true);
}

TEST_CASE("a worker that slows mid-run is given a smaller share from its compute times, and the run learns", "[train][sharding]") {
  scratch_dir s;
  std::string out;
  // Worker 1 computes at a quarter of its speed from step 20 (a device that throttles).
  REQUIRE(run_script(s.dir, "CELER_TRAIN_WORKER_SPEED=1:0.25:20 timeout 90 \"$CELER_TRAIN\" --config " + digits_config +
                              " --progress-interval 100 --name throttle --sharding speed --sharding-interval 10"
                              " --max-steps 100 > \"$LOG\" 2>&1",
                     out) == 0);
  INFO(out);
  CHECK_THAT(out, Contains("re-sharded at step"));
  const auto summary = json::parse(slurp(s.dir / "celer_results/throttle/summary.json"));
  const auto& reshards = summary.at("reshards");
  REQUIRE(!reshards.empty());
  // (Timing noise may move the split before step 20 too; the throttle moves it after.)
  CHECK(reshards.back().at("step").get<std::int64_t>() > 20);
  const auto split = split_of(summary);
  CHECK(split[0] + split[1] == 64);
  CHECK(2 * split[1] < split[0]);  // about 51 and 13 at 4 to 1
  CHECK(summary.at("replicas_equal") == true);
  CHECK(summary.at("final_val_accuracy").get<double>() > 0.85);
}

TEST_CASE("sharding speed refuses what it does not fit, naming the key", "[train][sharding]") {
  scratch_dir s;
  std::string out;
  CHECK(run_celer_train(s.dir, "--config " + digits_config + " --sharding speed --worker-speeds 1 2 3", out) == 2);
  CHECK_THAT(out, Contains("key 'worker_speeds'") && Contains("3 speeds for 2 workers"));
  CHECK(run_celer_train(s.dir, "--config " + digits_config + " --worker-speeds 1 2", out) == 2);
  CHECK_THAT(out, Contains("key 'worker_speeds'") && Contains("sharding: speed"));
  CHECK(run_celer_train(s.dir, "--config " + digits_config + " --sharding speed --mode async", out) == 2);
  CHECK_THAT(out, Contains("key 'sharding'") && Contains("mode: sync"));
  CHECK(run_celer_train(s.dir, "--config " + digits_config + " --sharding speed --worker-speeds 1 0", out) == 2);
  CHECK_THAT(out, Contains("above 0"));
  CHECK(run_celer_train(s.dir, "--help", out) == 0);
  CHECK_THAT(out, Contains("--sharding") && Contains("worker_speeds") && Contains("celer::gpu::shares"));
}
