// celer::tune's trial schedulers: FIFO, ASHA, the median stopping rule and PBT, on
// hand-computed examples.
#include <celer/actors/tune.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <set>

using namespace celer::tune;
using action = decision::action;

namespace {

std::unique_ptr<scheduler> asha(asha_options options) {
  auto s = make_asha(options);
  REQUIRE(s.has_value());
  return std::move(*s);
}

} // namespace

TEST_CASE("FIFO never stops a trial", "[tune][actors]") {
  auto fifo = make_fifo();
  CHECK(fifo->name() == "fifo");
  for (trial_id t = 0; t < 3; ++t)
    for (std::int64_t i = 1; i <= 200; ++i) CHECK(fifo->on_result(t, i, t == 2 ? NAN : 1e9 * static_cast<double>(t)).what == action::continue_);
}

TEST_CASE("ASHA stops trials at the rungs a hand computation says", "[tune][actors]") {
  // grace 1, reduction factor 2, max_t 4: rungs at 1, 2 (and 4, reached only at max_t). A
  // trial goes on from a rung if its value is no worse than the 50th percentile of those
  // recorded there before it.
  for (auto mode : {direction::minimize, direction::maximize}) {
    INFO(to_string(mode));
    const double sign = mode == direction::minimize ? 1 : -1;  // the same race, mirrored
    auto s = asha({.mode = mode, .max_t = 4, .grace_period = 1, .reduction_factor = 2});
    CHECK(s->name() == "asha");
    auto result = [&](trial_id t, std::int64_t i, double loss) { return s->on_result(t, i, sign * loss); };
    CHECK(result(0, 1, 0.5).what == action::continue_);   // rung 1 empty
    CHECK(result(1, 1, 0.4).what == action::continue_);   // cutoff 0.5
    auto stopped = result(2, 1, 0.6);                     // cutoff 0.45 (of 0.5, 0.4)
    CHECK(stopped.what == action::stop);
    CHECK_THAT(stopped.reason, Catch::Contains("rung 1") && Catch::Contains("cutoff") && Catch::Contains("0.45"));
    s->on_complete(2);
    CHECK(result(3, 1, 0.45).what == action::continue_);  // cutoff 0.5 (of 0.5, 0.4, 0.6)
    CHECK(result(0, 2, 0.3).what == action::continue_);   // rung 2 empty
    CHECK(result(1, 2, 0.35).what == action::stop);       // cutoff 0.3
    s->on_complete(1);
    CHECK(result(3, 2, 0.2).what == action::continue_);   // cutoff 0.325 (of 0.3, 0.35)
    CHECK(result(0, 3, 0.9).what == action::continue_);   // no rung at 3: even a bad value goes on
    auto done = result(0, 4, 0.2);
    CHECK(done.what == action::stop);
    CHECK_THAT(done.reason, Catch::Contains("max_t"));
    s->on_complete(0);
    CHECK(result(3, 3, 0.25).what == action::continue_);
    CHECK(result(3, 4, 0.25).what == action::stop);
  }
}

TEST_CASE("ASHA's default rungs are at grace * 4^k, and a rung is judged at the first result past it",
          "[tune][actors]") {
  auto s = asha({});  // Ray's defaults: max_t 100, grace 1, reduction factor 4: rungs 1, 4, 16, 64
  for (std::int64_t i = 1; i <= 64; ++i) CHECK(s->on_result(0, i, 1.0).what == action::continue_);
  CHECK(s->on_result(1, 1, 0.5).what == action::continue_);
  for (std::int64_t i = 2; i <= 3; ++i) CHECK(s->on_result(1, i, 5.0).what == action::continue_);  // between rungs
  CHECK(s->on_result(1, 4, 5.0).what == action::stop);                                                 // rung 4
  // A trial that reports only every 10 iterations is judged at 10 for rung 4.
  CHECK(s->on_result(2, 10, 0.9).what == action::continue_);
  CHECK(s->on_result(2, 20, 1.5).what == action::stop);  // rung 16: worse than trial 0's 1.0
  // A NaN is the worst value.
  CHECK(s->on_result(3, 1, NAN).what == action::stop);
}

TEST_CASE("the median stopping rule stops the trials a hand computation says", "[tune][actors]") {
  auto made = make_median_stopping({.mode = direction::minimize, .grace_period = 2, .min_samples_required = 2});
  REQUIRE(made.has_value());
  auto& s = *made;
  CHECK(s->name() == "median_stopping");
  // Trials 0 and 1 run first. Trial 1 at iteration 2 has one other trial to compare with,
  // fewer than min_samples_required, so it goes on whatever its value.
  const double t0[] = {1.0, 0.8, 0.6, 0.5};
  const double t1[] = {0.9, 0.7, 0.5, 0.4};
  for (std::int64_t i = 1; i <= 4; ++i) CHECK(s->on_result(0, i, t0[i - 1]).what == action::continue_);
  for (std::int64_t i = 1; i <= 4; ++i) CHECK(s->on_result(1, i, t1[i - 1]).what == action::continue_);
  s->on_complete(0);  // finished trials still count
  // Trial 2: at iteration 1, within the grace period. At 2 its best 0.72 beats the median
  // 0.75 of the running means (0.8, 0.7) over [2, 2]; at 3 its best 0.66 is worse than the
  // median 0.65 of (0.7, 0.6) over [2, 3].
  CHECK(s->on_result(2, 1, 0.9).what == action::continue_);
  CHECK(s->on_result(2, 2, 0.72).what == action::continue_);
  auto stopped = s->on_result(2, 3, 0.66);
  CHECK(stopped.what == action::stop);
  CHECK_THAT(stopped.reason, Catch::Contains("best 0.66") && Catch::Contains("median 0.65") &&
                               Catch::Contains("2 other trials") && Catch::Contains("iteration 3"));
  // Trial 3's best is its first value, 0.3, before the grace period: Ray compares the best of
  // all its results, so it goes on although it got worse.
  CHECK(s->on_result(3, 1, 0.3).what == action::continue_);
  CHECK(s->on_result(3, 2, 0.9).what == action::continue_);
  CHECK(s->on_result(3, 3, 0.9).what == action::continue_);

  SECTION("comparing running means instead stops trial 3 at iteration 2") {
    auto m = make_median_stopping({.grace_period = 2, .min_samples_required = 2, .use_running_mean = true});
    for (std::int64_t i = 1; i <= 4; ++i) (void)(*m)->on_result(0, i, t0[i - 1]);
    for (std::int64_t i = 1; i <= 4; ++i) (void)(*m)->on_result(1, i, t1[i - 1]);
    CHECK((*m)->on_result(3, 1, 0.3).what == action::continue_);
    CHECK((*m)->on_result(3, 2, 0.9).what == action::stop);  // 0.9 against the median 0.75
  }
  SECTION("maximising mirrors it") {
    auto m = make_median_stopping({.mode = direction::maximize, .grace_period = 2, .min_samples_required = 2});
    for (std::int64_t i = 1; i <= 4; ++i) (void)(*m)->on_result(0, i, -t0[i - 1]);
    for (std::int64_t i = 1; i <= 4; ++i) (void)(*m)->on_result(1, i, -t1[i - 1]);
    CHECK((*m)->on_result(2, 2, -0.72).what == action::continue_);
    CHECK((*m)->on_result(2, 3, -0.66).what == action::stop);
  }
}

TEST_CASE("PBT's bottom trial exploits the top one and explores its params, as a hand computation says",
          "[tune][actors]") {
  const auto space = search_space{}.log_uniform("lr", 1e-4, 1.0).categorical("opt", {"sgd", "adam", "rmsprop"});
  auto made = make_pbt(space, {.mode = direction::minimize, .perturbation_interval = 2, .resample_probability = 0,
                               .perturbation_factors = {2.0}, .seed = 1});
  REQUIRE(made.has_value());
  auto& s = *made;
  CHECK(s->name() == "pbt");
  s->on_add(0, {{"lr", 0.01}, {"opt", "adam"}, {"epochs", 9}});
  s->on_add(1, {{"lr", 0.02}, {"opt", "sgd"}});
  s->on_add(2, {{"lr", 0.03}, {"opt", "sgd"}});
  s->on_add(3, {{"lr", 0.5}, {"opt", "rmsprop"}});
  for (trial_id t = 0; t < 4; ++t) CHECK(s->on_result(t, 1, 1.0).what == action::continue_);  // before the interval

  // Iteration 2, in order 0..3. With the quantile fraction 0.25, the bottom and top
  // quantiles hold one trial each once two or more have a score.
  auto d0 = s->on_result(0, 2, 0.1);  // alone in the ranking: nothing to do
  CHECK(d0.what == action::continue_);
  CHECK_FALSE(d0.save_checkpoint);
  auto d1 = s->on_result(1, 2, 0.5);  // bottom of (1, 0); trial 0 saved no checkpoint
  CHECK(d1.what == action::continue_);
  CHECK_THAT(d1.reason, Catch::Contains("trial 0 has no checkpoint"));
  CHECK(s->on_result(2, 2, 0.3).what == action::continue_);  // middle of (1, 2, 0)
  CHECK(s->on_result(3, 2, 0.9).what == action::continue_);  // bottom; trial 0 still has none

  // Iteration 4: trial 0 is on top and keeps a checkpoint; trial 3, at the bottom, copies it.
  auto top = s->on_result(0, 4, 0.05);
  CHECK(top.what == action::continue_);
  CHECK(top.save_checkpoint);
  auto e = s->on_result(3, 4, 0.95);
  REQUIRE(e.what == action::exploit);
  CHECK(e.source == 0);
  CHECK(e.source_iteration == 4);
  CHECK(e.new_params.number("lr").value() == Approx(0.02));  // 0.01 times the only factor, 2
  const std::string opt = e.new_params.text("opt").value();
  CHECK((opt == "sgd" || opt == "rmsprop"));                 // a neighbour of "adam"
  CHECK(e.new_params.integer("epochs").value() == 9);        // not in the space: copied
  CHECK_THAT(e.reason, Catch::Contains("copies trial 0 at iteration 4"));
  // Trial 1 is not the bottom: trial 3 keeps its last score (0.95) until it reports again.
  CHECK(s->on_result(1, 4, 0.6).what == action::continue_);
  CHECK(s->on_result(2, 4, 0.2).what == action::continue_);
  // Trial 3 now counts from iteration 4, trial 0's: 5 is too soon, at 6 it is the best.
  CHECK(s->on_result(3, 5, 0.04).what == action::continue_);
  auto best = s->on_result(3, 6, 0.04);
  CHECK(best.save_checkpoint);
  // A finished trial leaves the ranking: with trial 3 done, trial 1 is the bottom of (1, 2, 0)
  // and copies trial 0's checkpoint of iteration 4, still its latest.
  s->on_complete(3);
  auto e1 = s->on_result(1, 6, 0.7);
  REQUIRE(e1.what == action::exploit);
  CHECK(e1.source == 0);
  CHECK(e1.source_iteration == 4);
  // A trial never added is ignored.
  CHECK_THAT(s->on_result(42, 10, 0.0).reason, Catch::Contains("not added"));
}

TEST_CASE("PBT's explore perturbs by 0.8 or 1.2 within bounds, moves choices to a neighbour, and resamples a quarter",
          "[tune][actors]") {
  const auto space = search_space{}
                       .uniform("momentum", 0.0, 0.95)
                       .log_uniform("lr", 1e-4, 1.0)
                       .integer("layers", 1, 8)
                       .grid("batch", {16, 32, 64, 128});
  auto made = make_pbt(space, {.perturbation_interval = 1, .seed = 3});  // Ray's other defaults
  REQUIRE(made.has_value());
  auto& s = *made;
  s->on_add(0, {{"momentum", 0.9}, {"lr", 0.01}, {"layers", 5}, {"batch", 16}});
  s->on_add(1, {{"momentum", 0.1}, {"lr", 0.1}, {"layers", 1}, {"batch", 128}});
  int exploits = 0, lr_perturbed = 0, momentum_clamped = 0, batch_moved = 0;
  std::set<std::int64_t> layers;
  // At iteration 1 trial 0 is ranked alone, so it keeps no checkpoint and trial 1 has none
  // to copy; from 2 on, trial 0 is the top (it keeps one) and trial 1 the bottom.
  CHECK(s->on_result(0, 1, 0.1).what == action::continue_);
  CHECK(s->on_result(1, 1, 0.9).what == action::continue_);
  for (std::int64_t i = 2; i <= 401; ++i) {
    REQUIRE(s->on_result(0, i, 0.1).what == action::continue_);  // the top: trial 1 copies it
    auto d = s->on_result(1, i, 0.9);
    REQUIRE(d.what == action::exploit);
    ++exploits;
    REQUIRE(space.check(d.new_params).has_value());
    const double lr = d.new_params.number("lr").value();
    if (lr == Approx(0.012) || lr == Approx(0.008)) ++lr_perturbed;
    const double momentum = d.new_params.number("momentum").value();
    if (momentum == 0.95) ++momentum_clamped;  // 0.9 * 1.2 kept within [0, 0.95]
    CHECK((momentum == 0.95 || momentum == Approx(0.72) || momentum < 0.95));
    layers.insert(d.new_params.integer("layers").value());
    const auto batch = d.new_params.integer("batch").value();
    if (batch == 16 || batch == 32) ++batch_moved;  // 16's neighbours: itself (at the end) and 32
  }
  CHECK(exploits == 400);
  CHECK(lr_perturbed == Approx(300).margin(40));      // three quarters are perturbed
  CHECK(momentum_clamped == Approx(150).margin(35));  // half of those by 1.2
  CHECK(batch_moved >= 300 - 40);
  CHECK(layers.contains(6));  // 5 * 1.2 = 6
  CHECK(layers.contains(4));  // 5 * 0.8 = 4
  CHECK(layers.size() > 3);   // and resampled ones
}

TEST_CASE("PBT with the same seed makes the same decisions", "[tune][actors]") {
  const auto space = search_space{}.log_uniform("lr", 1e-4, 1.0).categorical("opt", {"sgd", "adam"});
  auto run = [&](std::uint64_t seed) {
    auto s = make_pbt(space, {.perturbation_interval = 2, .seed = seed});
    std::vector<std::string> log;
    for (trial_id t = 0; t < 8; ++t) (*s)->on_add(t, {{"lr", 0.001 * static_cast<double>(t + 1)}, {"opt", "sgd"}});
    for (std::int64_t i = 1; i <= 20; ++i)
      for (trial_id t = 0; t < 8; ++t) {
        auto d = (*s)->on_result(t, i, std::sin(static_cast<double>(t * 31 + i)));
        log.push_back(std::string(to_string(d.what)) + " " + std::to_string(d.source) + " " + to_string(d.new_params));
      }
    return log;
  };
  const auto a = run(5);
  CHECK(run(5) == a);
  CHECK(run(6) != a);
  CHECK(std::count_if(a.begin(), a.end(), [](auto& l) { return l.starts_with("exploit"); }) > 5);
}

TEST_CASE("schedulers refuse bad options with messages that name them", "[tune][actors]") {
  auto message = [](auto made) {
    REQUIRE_FALSE(made.has_value());
    CHECK(made.error().code() == celer::error_code::invalid_argument);
    return made.error().message();
  };
  CHECK_THAT(message(make_asha({.max_t = 0})), Catch::Contains("max_t > 0"));
  CHECK_THAT(message(make_asha({.max_t = 10, .grace_period = 20})), Catch::Contains("0 < grace_period <= max_t"));
  CHECK_THAT(message(make_asha({.reduction_factor = 1})), Catch::Contains("reduction_factor > 1"));
  CHECK_THAT(message(make_median_stopping({.grace_period = -1})), Catch::Contains("grace_period >= 0"));
  const auto space = search_space{}.uniform("x", 0, 1);
  CHECK_THAT(message(make_pbt(space, {.quantile_fraction = 0.6})), Catch::Contains("quantile_fraction in [0, 0.5]"));
  CHECK_THAT(message(make_pbt(space, {.perturbation_interval = 0})), Catch::Contains("perturbation_interval > 0"));
  CHECK_THAT(message(make_pbt(space, {.perturbation_factors = {}})), Catch::Contains("at least one perturbation factor"));
  CHECK_THAT(message(make_pbt(space, {.resample_probability = 1.5})), Catch::Contains("resample_probability in [0, 1]"));
}
