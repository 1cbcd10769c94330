// celer::trainer's dynamic loss scaler (GradScaler's rules): backoff and skip on overflow,
// growth after a run of clean steps, the bounds, and resuming from a saved state.
#include <celer/actors/trainer/loss_scale.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

using namespace celer::trainer;

TEST_CASE("all_finite finds an inf or a nan anywhere", "[trainer][loss_scale]") {
  std::vector<float> v(1000, 0.25f);
  CHECK(all_finite(v));
  CHECK(all_finite(std::span<const float>()));
  v[999] = std::numeric_limits<float>::infinity();
  CHECK_FALSE(all_finite(v));
  v[999] = -std::numeric_limits<float>::infinity();
  CHECK_FALSE(all_finite(v));
  v[999] = 0.25f;
  v[3] = std::numeric_limits<float>::quiet_NaN();
  CHECK_FALSE(all_finite(v));
  v[3] = std::numeric_limits<float>::max();
  CHECK(all_finite(v));
}

TEST_CASE("unscale divides by the scale and reports overflow", "[trainer][loss_scale]") {
  auto s = loss_scaler::make({.initial = 1024});
  REQUIRE(s);
  std::vector<float> g{1024.0f, -2048.0f, 512.0f};
  CHECK(s->unscale(g));
  CHECK(g == std::vector<float>{1.0f, -2.0f, 0.5f});
  g[1] = std::numeric_limits<float>::infinity();
  CHECK_FALSE(s->unscale(g));
  g[1] = std::numeric_limits<float>::quiet_NaN();
  CHECK_FALSE(s->unscale(g));
}

TEST_CASE("an overflow halves the scale and skips the step; clean steps grow it back", "[trainer][loss_scale]") {
  auto s = loss_scaler::make({.initial = 65536, .growth_interval = 3});
  REQUIRE(s);
  CHECK(s->update(true));
  CHECK(s->update(true));
  CHECK(s->scale() == 65536);
  CHECK(s->update(true));  // the third clean step in a row grows it
  CHECK(s->scale() == 131072);
  CHECK(s->state().growths == 1);
  CHECK(s->state().clean_steps == 0);

  CHECK(s->update(true));
  CHECK_FALSE(s->update(false));  // overflow: skip, back off, and the run of clean steps restarts
  CHECK(s->scale() == 65536);
  CHECK(s->state().overflows == 1);
  CHECK(s->state().clean_steps == 0);
  CHECK(s->update(true));
  CHECK(s->update(true));
  CHECK(s->scale() == 65536);
  CHECK(s->update(true));
  CHECK(s->scale() == 131072);
}

TEST_CASE("the scale stays within its bounds", "[trainer][loss_scale]") {
  auto s = loss_scaler::make({.initial = 4, .growth_interval = 1, .min_scale = 1, .max_scale = 16});
  REQUIRE(s);
  for (int i = 0; i < 10; ++i) CHECK_FALSE(s->update(false));
  CHECK(s->scale() == 1);
  for (int i = 0; i < 10; ++i) CHECK(s->update(true));
  CHECK(s->scale() == 16);
  CHECK(s->state().overflows == 10);
}

TEST_CASE("from too large a scale, the scaler settles where the gradients are finite", "[trainer][loss_scale]") {
  // Gradients of about 1e3 overflow float32 at scales above ~3.4e35; starting at 2^127 the
  // scaler must back off to a scale that fits within a few dozen steps, then train on.
  auto s = loss_scaler::make({.initial = std::ldexp(1.0, 127), .growth_interval = 1000});
  REQUIRE(s);
  const std::vector<float> truth{1000.0f, -3.0f, 0.001f, 250.0f};
  int skipped = 0;
  bool applied = false;
  for (int step = 0; step < 100 && !applied; ++step) {
    std::vector<float> g(truth.size());
    // The backward pass in float32: each gradient is the true one times the scale.
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(static_cast<double>(truth[i]) * s->scale());
    const bool finite = s->unscale(g);
    applied = s->update(finite);
    if (!applied) {
      ++skipped;
      continue;
    }
    for (std::size_t i = 0; i < g.size(); ++i) CHECK(g[i] == Approx(truth[i]).epsilon(1e-6));
  }
  CHECK(applied);
  CHECK(skipped > 0);
  CHECK(skipped < 20);
  CHECK(s->scale() * 1000.0 < std::numeric_limits<float>::max());
  CHECK(s->state().overflows == skipped);
}

TEST_CASE("bad options and saved states are refused by name", "[trainer][loss_scale]") {
  auto bad = [](loss_scale_options o, const char* word) {
    auto s = loss_scaler::make(o);
    REQUIRE_FALSE(s);
    CHECK(s.error().code() == celer::error_code::invalid_argument);
    CHECK_THAT(s.error().message(), Catch::Contains(word));
  };
  bad({.initial = 0}, "initial");
  bad({.growth_factor = 1}, "growth_factor");
  bad({.backoff_factor = 1}, "backoff_factor");
  bad({.backoff_factor = 0}, "backoff_factor");
  bad({.growth_interval = 0}, "growth_interval");
  bad({.min_scale = 0}, "min_scale");

  auto s = loss_scaler::make({.initial = 8, .growth_interval = 5});
  REQUIRE(s);
  CHECK_FALSE(s->restore({.scale = -1}));
  CHECK_FALSE(s->restore({.scale = std::numeric_limits<double>::infinity()}));
  CHECK_FALSE(s->restore({.scale = 8, .clean_steps = -1}));
  CHECK(s->scale() == 8);  // unchanged by the refusals
  REQUIRE(s->restore({.scale = 256, .clean_steps = 4, .overflows = 2, .growths = 1}));
  CHECK(s->update(true));  // the fifth clean step in a row, counting the saved four
  CHECK(s->scale() == 512);
}
