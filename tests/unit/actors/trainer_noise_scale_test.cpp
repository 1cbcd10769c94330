// celer::trainer's gradient noise scale (McCandlish et al. 2018, appendix A) and the
// adaptive batch-size policy, on synthetic gradients of known mean and covariance.
#include <celer/actors/trainer/noise_scale.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

using namespace celer::trainer;

namespace {

double uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }
double normal(std::mt19937_64& rng) {
  const double u = 1.0 - uniform(rng);
  return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * M_PI * uniform(rng));
}

/// Gradients of a problem whose true gradient G has |G|^2 = `gradient_sq` (spread evenly
/// over `dim` coordinates) and whose per-example gradients have covariance sigma^2 I with
/// tr(Sigma) = `trace_sigma`: B_simple = trace_sigma / gradient_sq.
struct synthetic_problem {
  std::size_t dim;
  double gradient_sq;
  double trace_sigma;
  std::mt19937_64 rng{16};

  /// The mean of `batch` per-example gradients: G plus noise of covariance Sigma / batch.
  std::vector<float> batch_gradient(std::int64_t batch) {
    const double g = std::sqrt(gradient_sq / static_cast<double>(dim));
    const double sd = std::sqrt(trace_sigma / static_cast<double>(dim) / static_cast<double>(batch));
    std::vector<float> out(dim);
    for (auto& x : out) x = static_cast<float>(g + sd * normal(rng));
    return out;
  }

  /// One data parallel step: each worker's gradient, and their example-weighted mean.
  void step(noise_scale_estimator& noise, const std::vector<std::int64_t>& batches) {
    std::vector<worker_gradient> workers;
    std::vector<double> combined(dim, 0.0);
    std::int64_t total = 0;
    for (auto b : batches) total += b;
    for (auto b : batches) {
      const auto g = batch_gradient(b);
      workers.push_back({b, squared_norm(g)});
      for (std::size_t i = 0; i < dim; ++i) {
        combined[i] += static_cast<double>(b) / static_cast<double>(total) * g[i];
      }
    }
    double combined_sq = 0;
    for (double x : combined) combined_sq += x * x;
    REQUIRE(noise.observe_workers(workers, combined_sq));
  }
};

} // namespace

TEST_CASE("one step's estimates are McCandlish et al.'s unbiased formulas", "[trainer][noise_scale]") {
  // |G|^2 = 1 and tr(Sigma) = 64 give E|G_16|^2 = 1 + 64/16 = 5 and E|G_64|^2 = 2.
  auto s = estimate_noise(16, 5.0, 64, 2.0);
  REQUIRE(s);
  CHECK(s->gradient_sq == Approx(1.0));
  CHECK(s->trace_sigma == Approx(64.0));

  auto noise = noise_scale_estimator::make({.decay = 0.9});
  REQUIRE(noise);
  CHECK_FALSE(noise->b_simple());
  CHECK(noise->gradient_sq() == 0.0);
  REQUIRE(noise->observe(16, 5.0, 64, 2.0));
  // Bias-corrected: one observation is its own average.
  CHECK(noise->observations() == 1);
  CHECK(noise->gradient_sq() == Approx(1.0));
  CHECK(noise->trace_sigma() == Approx(64.0));
  REQUIRE(noise->b_simple());
  CHECK(*noise->b_simple() == Approx(64.0));
  // A second step at another estimate: the averages weigh it 0.1 against 0.9.
  REQUIRE(noise->observe(16, 9.0, 64, 3.0));  // |G|^2 = 1, tr(Sigma) = 128
  CHECK(noise->trace_sigma() == Approx((0.9 * 0.1 * 64 + 0.1 * 128) / (1 - 0.81)));
  noise->reset();
  CHECK(noise->observations() == 0);
  CHECK_FALSE(noise->b_simple());

  // A step whose |G|^2 estimate is negative (noise swamps signal) gives no B_simple yet.
  REQUIRE(noise->observe(16, 1.0, 64, 0.1));
  CHECK(noise->gradient_sq() < 0);
  CHECK_FALSE(noise->b_simple());
}

TEST_CASE("the noise scale from synthetic workers' gradients lands near the true B_simple",
          "[trainer][noise_scale]") {
  struct scenario {
    double gradient_sq, trace_sigma;
    std::vector<std::int64_t> batches;
  };
  const scenario scenarios[] = {
    {1.0, 64.0, {16, 16, 16, 16}},               // B_simple 64, 4 equal workers
    {1.0, 64.0, {8, 16, 24, 32}},                 // the same, speed-weighted shares
    {0.1, 100.0, {32, 32, 32, 32, 32, 32, 32, 32}},  // B_simple 1000, 8 workers
  };
  for (const auto& sc : scenarios) {
    synthetic_problem problem{.dim = 256, .gradient_sq = sc.gradient_sq, .trace_sigma = sc.trace_sigma};
    auto noise = noise_scale_estimator::make({.decay = 0.99});
    REQUIRE(noise);
    for (int t = 0; t < 600; ++t) problem.step(*noise, sc.batches);
    const double truth = sc.trace_sigma / sc.gradient_sq;
    REQUIRE(noise->b_simple());
    INFO("true B_simple " << truth << ", estimated " << *noise->b_simple() << " (|G|^2 "
                          << noise->gradient_sq() << ", tr(Sigma) " << noise->trace_sigma() << ")");
    CHECK(*noise->b_simple() == Approx(truth).epsilon(0.15));
    CHECK(noise->gradient_sq() == Approx(sc.gradient_sq).epsilon(0.15));
    CHECK(noise->trace_sigma() == Approx(sc.trace_sigma).epsilon(0.10));
  }
}

TEST_CASE("noise scale inputs that make no sense are refused", "[trainer][noise_scale]") {
  const auto message_of = [](const auto& result) {
    REQUIRE_FALSE(result);
    CHECK(result.error().code() == celer::error_code::invalid_argument);
    return result.error().message();
  };
  CHECK_THAT(message_of(estimate_noise(0, 1.0, 8, 1.0)), Catch::Contains("1 <= small batch < big batch"));
  CHECK_THAT(message_of(estimate_noise(8, 1.0, 8, 1.0)), Catch::Contains("given 8 and 8"));
  CHECK_THAT(message_of(estimate_noise(8, -1.0, 16, 1.0)), Catch::Contains("small batch's squared norm"));
  CHECK_THAT(message_of(estimate_noise(8, 1.0, 16, std::numeric_limits<double>::quiet_NaN())),
             Catch::Contains("big batch's squared norm"));
  CHECK_THAT(message_of(noise_scale_estimator::make({.decay = 1.0})), Catch::Contains("decay"));
  CHECK_THAT(message_of(noise_scale_estimator::make({.decay = -0.5})), Catch::Contains("decay"));

  auto noise = noise_scale_estimator::make();
  REQUIRE(noise);
  const worker_gradient one[] = {{16, 1.0}};
  const worker_gradient empty_batch[] = {{16, 1.0}, {0, 1.0}};
  const worker_gradient bad_norm[] = {{16, 1.0}, {16, -1.0}};
  CHECK_THAT(message_of(noise->observe_workers(one, 1.0)), Catch::Contains("at least 2 workers"));
  CHECK_THAT(message_of(noise->observe_workers(empty_batch, 1.0)), Catch::Contains("batch is 0"));
  CHECK_THAT(message_of(noise->observe_workers(bad_norm, 1.0)), Catch::Contains("squared norm"));
  CHECK_THAT(message_of(noise->observe(16, 1.0, 8, 1.0)), Catch::Contains("given 16 and 8"));
  CHECK(noise->observations() == 0);  // nothing was added
}

TEST_CASE("the batch size grows by its factor when B_simple exceeds it, up to the maximum, "
          "and never shrinks",
          "[trainer][noise_scale]") {
  auto policy = batch_size_policy::make(
    {.start = 64, .max = 1024, .growth = 2.0, .multiple_of = 8, .min_observations = 0, .cooldown_steps = 10});
  REQUIRE(policy);
  CHECK(policy->current() == 64);
  auto d = policy->propose(0, std::nullopt);
  CHECK((d.batch == 64 && !d.changed));
  CHECK_THAT(d.reason, Catch::Contains("no noise scale"));
  d = policy->propose(1, 50.0);
  CHECK((d.batch == 64 && !d.changed));
  d = policy->propose(2, 200.0);
  CHECK((d.batch == 128 && d.changed));
  CHECK(d.reason == "B_simple 200.0 > batch 64: grow to 128");
  CHECK(policy->last_change() == 2);
  d = policy->propose(5, 500.0);  // within the cooldown
  CHECK((d.batch == 128 && !d.changed));
  CHECK_THAT(d.reason, Catch::Contains("cooling down until step 12"));
  d = policy->propose(12, 500.0);
  CHECK((d.batch == 256 && d.changed));
  d = policy->propose(30, 10.0);  // a small noise scale never shrinks the batch
  CHECK((d.batch == 256 && !d.changed));
  CHECK(policy->propose(40, 1e6).batch == 512);
  CHECK(policy->propose(50, 1e6).batch == 1024);
  d = policy->propose(60, 1e6);
  CHECK((d.batch == 1024 && !d.changed));
  CHECK_THAT(d.reason, Catch::Contains("at the maximum 1024"));

  // Growth rounds up to the multiple, and stops at the maximum.
  auto odd = batch_size_policy::make(
    {.start = 24, .max = 48, .growth = 1.5, .multiple_of = 8, .min_observations = 0, .cooldown_steps = 0});
  REQUIRE(odd);
  CHECK(odd->propose(1, 1e6).batch == 40);  // 36 -> 40
  CHECK(odd->propose(2, 1e6).batch == 48);  // 60 -> 64 -> the maximum 48

  // Through an estimator: nothing until it has min_observations steps.
  auto waits = batch_size_policy::make({.start = 8, .max = 64, .min_observations = 3, .cooldown_steps = 0});
  auto noise = noise_scale_estimator::make();
  REQUIRE(waits);
  REQUIRE(noise);
  for (int t = 0; t < 3; ++t) {
    d = waits->propose(t, *noise);
    CHECK_FALSE(d.changed);
    CHECK_THAT(d.reason, Catch::Contains("waiting for the noise scale"));
    REQUIRE(noise->observe(16, 5.0, 64, 2.0));  // B_simple 64 > 8
  }
  d = waits->propose(3, *noise);
  CHECK((d.batch == 16 && d.changed));

  // Resuming where an earlier run stopped.
  REQUIRE(policy->restore(512, 40));
  CHECK(policy->current() == 512);
  CHECK(policy->propose(45, 1e6).batch == 512);  // still cooling down from step 40
  CHECK_FALSE(policy->restore(100, std::nullopt));  // not a multiple of 8
  CHECK_FALSE(policy->restore(32, std::nullopt));   // below start
}

TEST_CASE("batch-size policies with impossible options are refused", "[trainer][noise_scale]") {
  const auto refused = [](batch_size_options o, const char* why) {
    auto p = batch_size_policy::make(o);
    REQUIRE_FALSE(p);
    CHECK(p.error().code() == celer::error_code::invalid_argument);
    CHECK_THAT(p.error().message(), Catch::Contains(why));
  };
  refused({.start = 0, .max = 8}, "start must be at least 1");
  refused({.start = 16, .max = 8}, "max 8 is below start 16");
  refused({.start = 8, .max = 16, .growth = 1.0}, "growth");
  refused({.start = 8, .max = 16, .growth = std::numeric_limits<double>::infinity()}, "growth");
  refused({.start = 8, .max = 16, .multiple_of = 0}, "multiple_of");
  refused({.start = 12, .max = 16, .multiple_of = 8}, "multiples of 8");
  refused({.start = 8, .max = 16, .cooldown_steps = -1}, "negative");
}
