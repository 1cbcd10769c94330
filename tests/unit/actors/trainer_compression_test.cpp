// celer::trainer's gradient compression: 1-bit sign and top-k, with error feedback.
#include <celer/actors/trainer/compression.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

using namespace celer::trainer;

namespace {

/// Uniform in [0, 1) from the engine's bits (the standard distributions differ between
/// libraries; these tests want the same numbers everywhere).
double uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

/// A standard normal draw (Box-Muller).
double normal(std::mt19937_64& rng) {
  const double u = 1.0 - uniform(rng);  // (0, 1]
  const double v = uniform(rng);
  return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * M_PI * v);
}

/// Gradients shaped like a network's: "layers" whose magnitudes differ by 100x.
std::vector<float> layered_gradient(std::mt19937_64& rng, std::size_t n) {
  std::vector<float> g(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double layer_scale = (i * 4 / n) % 2 == 0 ? 1.0 : 0.01;
    g[i] = static_cast<float>(layer_scale * normal(rng));
  }
  return g;
}

double l2(std::span<const float> v) {
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * x;
  return std::sqrt(s);
}

/// The problem sign compression without error feedback gets wrong: minimise
/// 0.5 |x - x*|^2 from stochastic gradients (x - x*) + xi, where each xi_i is +1 with
/// probability 0.9 and -9 with probability 0.1 (mean 0, median +1). The sign of a
/// gradient follows its median, so signSGD settles near x* - 1 instead of x*.
struct skewed_quadratic {
  std::size_t n;
  std::vector<double> optimum;
  std::mt19937_64 rng{2019};

  explicit skewed_quadratic(std::size_t size) : n(size), optimum(size) {
    for (auto& o : optimum) o = 2.0 * uniform(rng) - 1.0;
  }
  std::vector<float> gradient(const std::vector<double>& x) {
    std::vector<float> g(n);
    for (std::size_t i = 0; i < n; ++i) {
      const double xi = uniform(rng) < 0.9 ? 1.0 : -9.0;
      g[i] = static_cast<float>(x[i] - optimum[i] + xi);
    }
    return g;
  }
  /// The root mean square distance to the optimum.
  double distance(const std::vector<double>& x) const {
    double s = 0;
    for (std::size_t i = 0; i < n; ++i) s += (x[i] - optimum[i]) * (x[i] - optimum[i]);
    return std::sqrt(s / static_cast<double>(n));
  }
};

/// Runs SGD with learning rate 0.01 for `steps` steps, each gradient passed through
/// `send` (gradient -> what the receiver decodes), and returns the distance of the mean
/// iterate over the second half to the optimum (averaging takes SGD's own noise out).
template <class Send>
double sgd_distance(skewed_quadratic& problem, std::size_t steps, Send send) {
  std::vector<double> x(problem.n, 0.0), mean(problem.n, 0.0);
  std::vector<float> decoded(problem.n);
  for (std::size_t t = 0; t < steps; ++t) {
    send(problem.gradient(x), decoded);
    for (std::size_t i = 0; i < problem.n; ++i) x[i] -= 0.01 * decoded[i];
    if (t >= steps / 2) {
      for (std::size_t i = 0; i < problem.n; ++i) mean[i] += x[i] / static_cast<double>(steps - steps / 2);
    }
  }
  return problem.distance(mean);
}

} // namespace

TEST_CASE("1-bit sign compression sends over 30x fewer bytes than float32 for a million values",
          "[trainer][compression]") {
  constexpr std::size_t n = std::size_t{1} << 20;
  std::mt19937_64 rng(1);
  const auto g = layered_gradient(rng, n);
  auto sign = sign_compressor::make(n);
  REQUIRE(sign);
  auto p = sign->compress(g);
  REQUIRE(p);
  const double ratio = static_cast<double>(raw_bytes(n)) / static_cast<double>(p->wire_bytes());
  INFO("wire bytes " << p->wire_bytes() << ", ratio " << ratio);
  CHECK(p->signs.size() == n / 8);
  CHECK(p->scales.size() == n / 1024);
  CHECK(ratio >= 30.0);
  // The encoding is the bulk parts plus a small header.
  CHECK(p->wire_bytes() - (p->signs.size() + p->scales.size() * sizeof(float)) < 32);
}

TEST_CASE("a sign packet sends each block's mean magnitude with each value's sign",
          "[trainer][compression]") {
  const std::vector<float> g = {1, -2, 3, -4, 0.5f, 0.5f, -0.5f, 0, 2, -2};
  auto sign = sign_compressor::make(g.size(), {.block_size = 4});
  REQUIRE(sign);
  auto p = sign->compress(g);
  REQUIRE(p);
  CHECK(p->size == 10);
  CHECK(p->block_size == 4);
  REQUIRE(p->scales.size() == 3);
  CHECK(p->scales[0] == 2.5f);
  CHECK(p->scales[1] == 0.375f);
  CHECK(p->scales[2] == 2.0f);
  REQUIRE(p->signs.size() == 2);
  // Negative at 1, 3, 6 and 9; 0 is sent as positive.
  CHECK(static_cast<unsigned>(p->signs[0]) == 0b0100'1010u);
  CHECK(static_cast<unsigned>(p->signs[1]) == 0b0000'0010u);
  std::vector<float> out(g.size());
  REQUIRE(decompress(*p, out));
  const std::vector<float> want = {2.5f, -2.5f, 2.5f, -2.5f, 0.375f, 0.375f, -0.375f, 0.375f, 2, -2};
  CHECK(out == want);
  // The residual is what was meant minus what was sent.
  for (std::size_t i = 0; i < g.size(); ++i) CHECK(sign->residual()[i] == g[i] - want[i]);
  // The next step sends gradient + residual.
  const std::vector<float> zero(g.size(), 0.0f);
  auto p2 = sign->compress(zero);
  REQUIRE(p2);
  REQUIRE(decompress(*p2, out));
  CHECK(out[0] == -1.0f);  // block 0's residual is (-1.5, 0.5, 0.5, -1.5): mean |r| 1
  CHECK(out[1] == 1.0f);
  sign->reset();
  CHECK(l2(sign->residual()) == 0.0);
}

TEST_CASE("with error feedback the sum of what was sent stays one bounded residual from the "
          "sum of the true gradients",
          "[trainer][compression]") {
  constexpr std::size_t n = 4096;
  constexpr std::size_t steps = 300;
  std::mt19937_64 rng(7);
  auto sign = sign_compressor::make(n, {.block_size = 256});
  auto topk = topk_compressor::make(n, {.k = n / 32});
  REQUIRE(sign);
  REQUIRE(topk);
  std::vector<double> truth(n, 0.0);
  std::vector<float> sent_sign(n, 0.0f), sent_topk(n, 0.0f);
  double max_gradient = 0, max_sign_residual = 0, max_topk_residual = 0;
  double late_sign_residual = 0;
  for (std::size_t t = 0; t < steps; ++t) {
    const auto g = layered_gradient(rng, n);
    for (std::size_t i = 0; i < n; ++i) truth[i] += g[i];
    max_gradient = std::max(max_gradient, l2(g));
    auto ps = sign->compress(g);
    auto pt = topk->compress(g);
    REQUIRE(ps);
    REQUIRE(pt);
    REQUIRE(accumulate_into(*ps, sent_sign));
    REQUIRE(accumulate_into(*pt, sent_topk));
    max_sign_residual = std::max(max_sign_residual, l2(sign->residual()));
    max_topk_residual = std::max(max_topk_residual, l2(topk->residual()));
    if (t >= steps / 2) late_sign_residual = std::max(late_sign_residual, l2(sign->residual()));
  }
  INFO("max |g| " << max_gradient << ", max |residual| sign " << max_sign_residual << ", top-k "
                  << max_topk_residual);
  // Nothing is lost: sum(true) - sum(sent) is exactly the residual (up to float rounding).
  double gap_sign = 0, gap_topk = 0;
  for (std::size_t i = 0; i < n; ++i) {
    gap_sign = std::max(gap_sign, std::fabs(truth[i] - sent_sign[i] - sign->residual()[i]));
    gap_topk = std::max(gap_topk, std::fabs(truth[i] - sent_topk[i] - topk->residual()[i]));
  }
  CHECK(gap_sign < 1e-3);
  CHECK(gap_topk < 1e-3);
  // And the residual stays bounded: a few gradients' worth, not growing with the steps
  // (the sum of the true gradients itself grows like sqrt(t) |g|).
  CHECK(max_sign_residual < 2.0 * max_gradient);
  CHECK(max_topk_residual < 4.0 * max_gradient);
  CHECK(late_sign_residual <= 1.5 * max_sign_residual);
}

TEST_CASE("SGD on sign-compressed gradients converges near the optimum with error feedback "
          "and settles away from it without",
          "[trainer][compression]") {
  constexpr std::size_t n = 512;
  constexpr std::size_t steps = 3000;
  skewed_quadratic exact_problem(n), ef_problem(n), plain_problem(n);
  const double exact = sgd_distance(exact_problem, steps, [](std::vector<float> g, std::vector<float>& out) {
    out = std::move(g);
  });
  auto with_ef = sign_compressor::make(n, {.block_size = 256});
  auto without_ef = sign_compressor::make(n, {.block_size = 256, .error_feedback = false});
  REQUIRE(with_ef);
  REQUIRE(without_ef);
  const auto through = [](sign_compressor& c) {
    return [&c](std::vector<float> g, std::vector<float>& out) {
      auto p = c.compress(g);
      REQUIRE(p);
      REQUIRE(decompress(*p, out));
    };
  };
  const double ef = sgd_distance(ef_problem, steps, through(*with_ef));
  const double plain = sgd_distance(plain_problem, steps, through(*without_ef));
  INFO("RMS distance to the optimum: uncompressed " << exact << ", sign with EF " << ef
                                                    << ", sign without EF " << plain);
  CHECK(exact < 0.1);
  CHECK(ef < 0.15);
  CHECK(plain > 0.8);  // near the median's fixed point, 1 away
  CHECK(l2(without_ef->residual()) == 0.0);
}

TEST_CASE("SGD on top-k gradients converges near the optimum with error feedback",
          "[trainer][compression]") {
  constexpr std::size_t n = 512;
  constexpr std::size_t steps = 3000;
  skewed_quadratic ef_problem(n), plain_problem(n);
  auto with_ef = topk_compressor::make(n, {.k = n / 8});
  auto without_ef = topk_compressor::make(n, {.k = n / 8, .error_feedback = false});
  REQUIRE(with_ef);
  REQUIRE(without_ef);
  const auto through = [](topk_compressor& c) {
    return [&c](std::vector<float> g, std::vector<float>& out) {
      auto p = c.compress(g);
      REQUIRE(p);
      REQUIRE(decompress(*p, out));
    };
  };
  const double ef = sgd_distance(ef_problem, steps, through(*with_ef));
  const double plain = sgd_distance(plain_problem, steps, through(*without_ef));
  INFO("RMS distance to the optimum: top-k with EF " << ef << ", without EF " << plain);
  CHECK(ef < 0.15);
  CHECK(plain > 2.0 * ef);
}

TEST_CASE("top-k with k = n is exact and leaves no residual", "[trainer][compression]") {
  constexpr std::size_t n = 1000;
  std::mt19937_64 rng(3);
  auto topk = topk_compressor::make(n, {.k = n});
  REQUIRE(topk);
  for (int step = 0; step < 3; ++step) {
    const auto g = layered_gradient(rng, n);
    auto p = topk->compress(g);
    REQUIRE(p);
    CHECK(p->indices.size() == n);
    std::vector<float> out(n, 42.0f);
    REQUIRE(decompress(*p, out));
    CHECK(out == g);
    CHECK(l2(topk->residual()) == 0.0);
  }
}

TEST_CASE("top-k sends the largest magnitudes in position order, ties to the lower position",
          "[trainer][compression]") {
  const std::vector<float> g = {0.1f, -5, 2, -2, 0.3f, 4, 0};
  auto topk = topk_compressor::make(g.size(), {.k = 3});
  REQUIRE(topk);
  auto p = topk->compress(g);
  REQUIRE(p);
  CHECK(p->indices.to_vector() == std::vector<std::uint32_t>{1, 2, 5});  // 2 beats -2 at 3
  CHECK(p->values.to_vector() == std::vector<float>{-5, 2, 4});
  CHECK(std::vector<float>(topk->residual().begin(), topk->residual().end()) ==
        std::vector<float>{0.1f, 0, 0, -2, 0.3f, 0, 0});
  std::vector<float> sum(g.size(), 1.0f);
  REQUIRE(accumulate_into(*p, sum, /*weight=*/0.5f));
  CHECK(sum == std::vector<float>{1, -1.5f, 2, 1, 1, 3, 1});
  // The residual joins the next step: -2 at 3 is now the largest.
  auto p2 = topk->compress(std::vector<float>(g.size(), 0.0f));
  REQUIRE(p2);
  CHECK(p2->indices.to_vector() == std::vector<std::uint32_t>{0, 3, 4});
}

TEST_CASE("packets travel as celer values with their bulk parts as raw bytes",
          "[trainer][compression]") {
  constexpr std::size_t n = 10'000;
  std::mt19937_64 rng(5);
  const auto g = layered_gradient(rng, n);
  auto sign = sign_compressor::make(n);
  auto topk = topk_compressor::make(n, {.k = 100});
  REQUIRE(sign);
  REQUIRE(topk);
  auto ps = sign->compress(g);
  auto pt = topk->compress(g);
  REQUIRE(ps);
  REQUIRE(pt);

  const std::string sign_wire = celer::detail::pack(*ps);
  const std::string topk_wire = celer::detail::pack(*pt);
  CHECK(sign_wire.size() == ps->wire_bytes());
  CHECK(topk_wire.size() == pt->wire_bytes());
  CHECK(pt->wire_bytes() < 100 * 8 + 32);
  const auto sign_back = celer::detail::unpack<sign_packet>(sign_wire, "sign packet");
  const auto topk_back = celer::detail::unpack<topk_packet>(topk_wire, "top-k packet");
  std::vector<float> a(n), b(n);
  REQUIRE(decompress(*ps, a));
  REQUIRE(decompress(sign_back, b));
  CHECK(a == b);
  REQUIRE(decompress(*pt, a));
  REQUIRE(decompress(topk_back, b));
  CHECK(a == b);
}

TEST_CASE("bad sizes, bad values and malformed packets give clear errors", "[trainer][compression]") {
  const auto message_of = [](const auto& result) {
    REQUIRE_FALSE(result);
    CHECK(result.error().code() == celer::error_code::invalid_argument);
    return result.error().message();
  };

  CHECK_THAT(message_of(sign_compressor::make(0)), Catch::Contains("0 values"));
  CHECK_THAT(message_of(sign_compressor::make(8, {.block_size = 0})), Catch::Contains("block_size"));
  CHECK_THAT(message_of(topk_compressor::make(0, {.k = 1})), Catch::Contains("0 values"));
  CHECK_THAT(message_of(topk_compressor::make(8, {.k = 0})), Catch::Contains("k must be"));
  CHECK_THAT(message_of(topk_compressor::make(8, {.k = 9})),
             Catch::Contains("k = 9 is larger than the gradient's 8 values"));

  auto sign = sign_compressor::make(8, {.block_size = 4});
  auto topk = topk_compressor::make(8, {.k = 2});
  REQUIRE(sign);
  REQUIRE(topk);
  const std::vector<float> seven(7, 1.0f);
  CHECK_THAT(message_of(sign->compress(seven)), Catch::Contains("gradients of 8 values, given 7"));
  CHECK_THAT(message_of(topk->compress(seven)), Catch::Contains("gradients of 8 values, given 7"));
  CHECK_THAT(message_of(sign->compress({})), Catch::Contains("given 0"));

  // A non-finite value is refused and leaves the residual as it was.
  std::vector<float> g = {1, 2, 3, 4, 5, 6, 7, 8};
  REQUIRE(sign->compress(g));
  const std::vector<float> before(sign->residual().begin(), sign->residual().end());
  g[5] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THAT(message_of(sign->compress(g)), Catch::Contains("value 5 is not finite"));
  CHECK_THAT(message_of(topk->compress(g)), Catch::Contains("value 5 is not finite"));
  CHECK(std::vector<float>(sign->residual().begin(), sign->residual().end()) == before);
  g[5] = std::numeric_limits<float>::infinity();
  CHECK_THAT(message_of(sign->compress(g)), Catch::Contains("not finite"));

  // Receivers: the wrong buffer size, and packets that do not hold together.
  g[5] = 6;
  auto ps = sign->compress(g);
  auto pt = topk->compress(g);
  REQUIRE(ps);
  REQUIRE(pt);
  std::vector<float> nine(9, 0.0f);
  CHECK_THAT(message_of(decompress(*ps, nine)), Catch::Contains("holds 8 values, the buffer 9"));
  CHECK_THAT(message_of(accumulate_into(*pt, nine)), Catch::Contains("holds 8 values, the buffer 9"));
  CHECK(nine == std::vector<float>(9, 0.0f));

  std::vector<float> out(8);
  sign_packet short_signs = *ps;
  short_signs.size = 9;
  CHECK_THAT(message_of(decompress(short_signs, out)), Catch::Contains("9 values need 2 sign bytes"));
  sign_packet few_scales = *ps;
  few_scales.scales = celer::array<float>{1.0f};
  CHECK_THAT(message_of(validate(few_scales)), Catch::Contains("need 2 scales, it has 1"));
  sign_packet bad_scale = *ps;
  bad_scale.scales = celer::array<float>{1.0f, -1.0f};
  CHECK_THAT(message_of(validate(bad_scale)), Catch::Contains("scale 1"));
  sign_packet stray_bits;
  stray_bits.size = 3;
  stray_bits.block_size = 4;
  stray_bits.signs = celer::bytes(std::vector<std::uint8_t>{0b1000});
  stray_bits.scales = celer::array<float>{1.0f};
  CHECK_THAT(message_of(validate(stray_bits)), Catch::Contains("bits set past"));

  topk_packet unsorted = *pt;
  unsorted.indices = celer::array<std::uint32_t>{7, 3};
  CHECK_THAT(message_of(validate(unsorted)), Catch::Contains("do not increase"));
  topk_packet past_end = *pt;
  past_end.indices = celer::array<std::uint32_t>{3, 8};
  CHECK_THAT(message_of(decompress(past_end, out)), Catch::Contains("index 8 is past"));
  topk_packet uneven = *pt;
  uneven.values = celer::array<float>{1.0f};
  CHECK_THAT(message_of(validate(uneven)), Catch::Contains("2 indices but 1 values"));
  CHECK_THAT(message_of(validate(topk_packet{})), Catch::Contains("no values"));
}

TEST_CASE("a residual restored from a copy makes the next packet the same as the original's",
          "[trainer][compression]") {
  // What a checkpoint does: the residual after some steps, copied out and put back into a
  // fresh compressor, must give the same packets from then on.
  const std::vector<float> g1{0.5f, -2.0f, 0.25f, 1.0f, -0.125f, 3.0f}, g2{1.0f, 1.0f, -1.0f, 0.5f, 2.0f, -3.0f};
  auto sign = sign_compressor::make(g1.size(), {.block_size = 2});
  REQUIRE(sign);
  REQUIRE(sign->compress(g1));
  const std::vector<float> kept(sign->residual().begin(), sign->residual().end());
  CHECK(std::any_of(kept.begin(), kept.end(), [](float v) { return v != 0.0f; }));
  auto fresh = sign_compressor::make(g1.size(), {.block_size = 2});
  REQUIRE(fresh);
  REQUIRE(fresh->restore(kept));
  const auto a = sign->compress(g2), b = fresh->compress(g2);
  REQUIRE(a);
  REQUIRE(b);
  CHECK(std::vector<std::uint8_t>(a->signs.begin(), a->signs.end()) == std::vector<std::uint8_t>(b->signs.begin(), b->signs.end()));
  CHECK(std::equal(sign->residual().begin(), sign->residual().end(), fresh->residual().begin()));
  // A residual of another size is refused, and the residual is left as it was.
  CHECK(fresh->restore(std::vector<float>(3, 1.0f)).error().code() == celer::error_code::invalid_argument);
  CHECK(std::equal(sign->residual().begin(), sign->residual().end(), fresh->residual().begin()));
  auto topk = topk_compressor::make(g1.size(), {.k = 2});
  REQUIRE(topk);
  REQUIRE(topk->restore(kept));
  CHECK(std::equal(kept.begin(), kept.end(), topk->residual().begin()));
}
