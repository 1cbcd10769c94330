// celer::tune's search spaces, params and searchers (random, grid, TPE). The schedulers'
// tests are in tune_schedule_test.cpp.
#include <celer/actors/tune.hpp>

#include "parzen.hpp"  // the truncated-normal arithmetic, tested directly

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

using namespace celer::tune;

namespace {

search_space mixed_space() {
  return search_space{}
    .uniform("dropout", 0.0, 0.5)
    .log_uniform("lr", 1e-5, 1e-1)
    .integer("layers", 1, 6)
    .integer("width", 8, 512, /*log=*/true)
    .categorical("optimizer", {"adam", "sgd", "rmsprop"})
    .categorical("batch", {16, 32, 64});
}

/// Every suggestion fits the space, numbers keep their type, and each kind covers its range.
void require_honours(const std::vector<params>& suggestions, bool uniform_in_log = true) {
  const auto space = mixed_space();
  std::set<std::int64_t> layers;
  std::set<std::string> optimizers;
  std::set<std::int64_t> batches;
  std::size_t lr_below_geometric_mean = 0, width_below_64 = 0;
  for (auto& p : suggestions) {
    INFO(to_string(p));
    REQUIRE(space.check(p).has_value());
    REQUIRE(std::holds_alternative<double>(*p.find("dropout")));
    REQUIRE(std::holds_alternative<double>(*p.find("lr")));
    REQUIRE(std::holds_alternative<std::int64_t>(*p.find("layers")));
    REQUIRE(std::holds_alternative<std::int64_t>(*p.find("width")));
    REQUIRE(std::holds_alternative<std::string>(*p.find("optimizer")));
    REQUIRE(std::holds_alternative<std::int64_t>(*p.find("batch")));
    layers.insert(p.integer("layers").value());
    optimizers.insert(p.text("optimizer").value());
    batches.insert(p.integer("batch").value());
    if (p.number("lr").value() < 1e-3) ++lr_below_geometric_mean;
    if (p.integer("width").value() < 64) ++width_below_64;
  }
  CHECK(layers == std::set<std::int64_t>{1, 2, 3, 4, 5, 6});
  CHECK(optimizers == std::set<std::string>{"adam", "rmsprop", "sgd"});
  CHECK(batches == std::set<std::int64_t>{16, 32, 64});
  if (!uniform_in_log) return;
  // Log scale: about half the draws below the geometric mean (1e-3 of [1e-5, 1e-1]; 64 of
  // [8, 512]); uniform draws would put 1% and 11% there.
  const auto n = static_cast<double>(suggestions.size());
  CHECK(static_cast<double>(lr_below_geometric_mean) / n == Approx(0.5).margin(0.1));
  CHECK(static_cast<double>(width_below_64) / n == Approx(0.5).margin(0.1));
}

std::vector<params> suggestions_of(searcher& s, std::size_t n, const std::function<double(const params&)>& f = {}) {
  std::vector<params> out;
  for (std::size_t i = 0; i < n; ++i) {
    auto p = s.suggest();
    REQUIRE(p.has_value());
    if (f) REQUIRE(s.observe(*p, f(*p)).has_value());
    out.push_back(std::move(*p));
  }
  return out;
}

double quadratic(const params& p) {
  const double x = p.number("x").value(), y = p.number("y").value();
  return (x - 1.3) * (x - 1.3) + (y + 0.7) * (y + 0.7);
}

/// The best value `make(seed)` finds on the quadratic in `trials` trials.
template <class Make>
double best_on_quadratic(Make make, std::uint64_t seed, std::size_t trials) {
  const auto space = search_space{}.uniform("x", -5, 5).uniform("y", -5, 5);
  auto s = make(space, seed);
  REQUIRE(s.has_value());
  double best = INFINITY;
  for (auto& p : suggestions_of(**s, trials, quadratic)) best = std::min(best, quadratic(p));
  return best;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

} // namespace

TEST_CASE("a bad search space gives an invalid_argument error that names the parameter and the fault",
          "[tune][actors]") {
  auto fails_with = [](const search_space& s, const std::string& words) {
    auto ok = s.validate();
    REQUIRE_FALSE(ok.has_value());
    CHECK(ok.error().code() == celer::error_code::invalid_argument);
    INFO(ok.error().message());
    CHECK_THAT(ok.error().message(), Catch::Contains(words));
  };
  fails_with(search_space{}.uniform("lr", 0.1, 0.1), "uniform parameter 'lr' needs low < high, got low = 0.1, high = 0.1");
  fails_with(search_space{}.uniform("lr", 1.0, 0.5), "'lr' needs low < high");
  fails_with(search_space{}.integer("layers", 4, 2), "integer parameter 'layers' needs low < high, got low = 4, high = 2");
  fails_with(search_space{}.log_uniform("lr", 0.0, 1.0), "log_uniform parameter 'lr' is drawn in log space and needs low > 0");
  fails_with(search_space{}.log_uniform("lr", -1.0, 1.0), "needs low > 0, got low = -1.0");
  fails_with(search_space{}.integer("width", 0, 64, /*log=*/true), "log_integer parameter 'width' is drawn in log space");
  fails_with(search_space{}.categorical("optimizer", {}), "categorical parameter 'optimizer' has no values to choose from");
  fails_with(search_space{}.grid("batch", {}), "grid parameter 'batch' has no values");
  fails_with(search_space{}.categorical("optimizer", {"adam", "sgd", "adam"}), "lists \"adam\" twice");
  fails_with(search_space{}.uniform("x", 0, INFINITY), "'x' has a bound that is not finite");
  fails_with(search_space{}.uniform("x", 0, 1).integer("x", 0, 3), "parameter 'x' is declared twice");
  fails_with(search_space{}, "the search space has no parameters");
  CHECK(mixed_space().validate().has_value());

  SECTION("and every searcher and PBT refuse it with the same message") {
    const auto bad = search_space{}.uniform("x", 0, 1).log_uniform("lr", 0.0, 1.0);
    const std::string message = bad.validate().error().message();
    auto r = make_random_search(bad);
    auto g = make_grid_search(bad);
    auto t = make_tpe_search(bad);
    auto pbt = make_pbt(bad);
    REQUIRE_FALSE(r.has_value());
    REQUIRE_FALSE(g.has_value());
    REQUIRE_FALSE(t.has_value());
    REQUIRE_FALSE(pbt.has_value());
    CHECK(r.error().message() == message);
    CHECK(g.error().message() == message);
    CHECK(t.error().message() == message);
    CHECK(pbt.error().message() == message);
  }
}

TEST_CASE("params print as name=value and round-trip through JSON with their types", "[tune][actors]") {
  params p{{"lr", 0.001}, {"layers", 3}, {"optimizer", "adam"}, {"momentum", 1.0}, {"note", "say \"hi\"\n"}};
  CHECK(to_string(p) == R"({layers=3, lr=0.001, momentum=1.0, note="say \"hi\"\n", optimizer="adam"})");
  std::ostringstream printed;
  printed << p;
  CHECK(printed.str() == to_string(p));

  const std::string json = p.to_json();
  CHECK(json == R"({"layers":3,"lr":0.001,"momentum":1.0,"note":"say \"hi\"\n","optimizer":"adam"})");
  auto back = params::from_json(json);
  REQUIRE(back.has_value());
  CHECK(*back == p);
  CHECK(std::holds_alternative<std::int64_t>(*back->find("layers")));
  CHECK(std::holds_alternative<double>(*back->find("momentum")));

  // Reals come back bit for bit.
  params awkward{{"a", 0.1 + 0.2}, {"b", 1e-300}, {"c", -123456789.123456789}, {"d", std::int64_t{-9007199254740993}}};
  CHECK(*params::from_json(awkward.to_json()) == awkward);

  SECTION("typed access says what is wrong") {
    CHECK(p.number("layers").value() == 3.0);
    CHECK(p.integer("momentum").value() == 1);
    CHECK(p.number("missing").error().code() == celer::error_code::not_found);
    CHECK_THAT(p.integer("lr").error().message(), Catch::Contains("'lr' = 0.001 is not an integer"));
    CHECK_THAT(p.text("layers").error().message(), Catch::Contains("is not a string"));
    CHECK_THAT(p.number("optimizer").error().message(), Catch::Contains("is a string, not a number"));
  }
  SECTION("text that is not params is refused, naming the key") {
    CHECK_THAT(params::from_json("[1, 2]").error().message(), Catch::Contains("must be a JSON object"));
    CHECK_THAT(params::from_json("{\"lr\": ").error().message(), Catch::Contains("not valid JSON"));
    CHECK_THAT(params::from_json(R"({"lr": [1]})").error().message(),
               Catch::Contains("parameter 'lr' must be a number or a string, got array"));
    CHECK_THAT(params::from_json(R"({"lr": null})").error().message(), Catch::Contains("NaN or infinite"));
    CHECK_THAT(params::from_json(R"({"n": 18446744073709551615})").error().message(),
               Catch::Contains("beyond the int64 range"));
    CHECK(params::from_json("{}")->empty());
  }
}

TEST_CASE("params travel to actors as a typed map: integers, reals and strings as they were", "[tune][actors]") {
  params p{{"lr", 0.001}, {"layers", 3}, {"optimizer", "adam"}, {"momentum", 1.0},
           {"big", std::int64_t{-9007199254740993}}, {"tiny", 1e-300}};
  msgpack::sbuffer buffer;
  msgpack::pack(buffer, p);
  auto handle = msgpack::unpack(buffer.data(), buffer.size());
  REQUIRE(handle.get().type == msgpack::type::MAP);  // typed maps, not JSON text
  const auto back = handle.get().as<params>();
  CHECK(back == p);
  CHECK(std::holds_alternative<double>(*back.find("momentum")));  // 1.0 stays a real
  CHECK(std::holds_alternative<std::int64_t>(*back.find("layers")));
  CHECK(std::get<std::int64_t>(*back.find("big")) == -9007199254740993);
  // Anything but numbers and strings is refused, and an integer past int64.
  auto refused = [](auto build) {
    msgpack::sbuffer b;
    msgpack::packer<msgpack::sbuffer> o(b);
    build(o);
    auto h = msgpack::unpack(b.data(), b.size());
    return [h = std::move(h)] { (void)h.get().as<params>(); };
  };
  CHECK_THROWS_AS(refused([](auto& o) { o.pack_array(1); o.pack(1); })(), msgpack::type_error);
  auto one = [](const char* section, auto value) {
    return [=](auto& o) {
      o.pack_map(1);
      o.pack(section);
      o.pack_map(1);
      o.pack("x");
      o.pack(value);
    };
  };
  CHECK_THROWS_AS(refused(one("real", "adam"))(), msgpack::type_error);
  CHECK_THROWS_AS(refused(one("int", 0.5))(), msgpack::type_error);
  CHECK_THROWS_AS(refused(one("text", 3))(), msgpack::type_error);
  CHECK_THROWS_AS(refused(one("list", 3))(), msgpack::type_error);
  CHECK_THROWS_AS(refused(one("int", std::uint64_t{18446744073709551615u}))(), msgpack::type_error);
  CHECK(handle.get().via.map.size == 3);
}

TEST_CASE("a space checks params: every parameter present, of its kind, within range", "[tune][actors]") {
  const auto space = mixed_space();
  params good{{"dropout", 0.5}, {"lr", 1e-5}, {"layers", 6}, {"width", 8}, {"optimizer", "sgd"}, {"batch", 32},
              {"extra", "allowed"}};
  CHECK(space.check(good).has_value());
  auto fault = [&](const char* name, value v) {
    params p = good;
    p.set(name, std::move(v));
    auto ok = space.check(p);
    REQUIRE_FALSE(ok.has_value());
    return ok.error().message();
  };
  CHECK_THAT(fault("dropout", 0.51), Catch::Contains("'dropout' = 0.51 is outside its range [0.0, 0.5]"));
  CHECK_THAT(fault("layers", 2.5), Catch::Contains("'layers' = 2.5 is not an integer"));
  CHECK_THAT(fault("layers", 7), Catch::Contains("outside its range"));
  CHECK_THAT(fault("optimizer", "adagrad"), Catch::Contains("'optimizer' = \"adagrad\" is not one of its 3 values"));
  CHECK_THAT(fault("lr", "fast"), Catch::Contains("is a string; a number is needed"));
  CHECK(space.check(params{{"dropout", 0.1}}).error().message().find("no value for 'lr'") != std::string::npos);
  // Numbers compare by value: a real 32.0 is the choice 32, an integer 0 the real bound 0.0.
  params relaxed = good;
  relaxed.set("batch", 32.0);
  relaxed.set("dropout", std::int64_t{0});
  CHECK(space.check(relaxed).has_value());
}

TEST_CASE("random search honours bounds, log scales, integers and categorical choices", "[tune][actors]") {
  auto s = make_random_search(mixed_space(), {.seed = 11});
  REQUIRE(s.has_value());
  CHECK((*s)->name() == "random");
  require_honours(suggestions_of(**s, 2000));
}

TEST_CASE("TPE's suggestions honour bounds, log scales, integers and categorical choices once it models",
          "[tune][actors]") {
  for (bool multivariate : {false, true}) {
    INFO("multivariate " << multivariate);
    auto s = make_tpe_search(mixed_space(), {.seed = 5}, {.multivariate = multivariate});
    REQUIRE(s.has_value());
    // The best lr is 10^-4.5 and the best width 16, both near the low end of their ranges: a
    // model in linear space would hardly ever propose values that close (10^-4.5 lies in the
    // first 0.03% of [1e-5, 0.1]).
    auto objective = [](const params& p) {
      return std::abs(std::log10(p.number("lr").value()) + 4.5) +
             std::abs(std::log2(static_cast<double>(p.integer("width").value())) - 4);
    };
    auto all = suggestions_of(**s, 200, objective);
    require_honours(std::vector<params>(all.begin() + 10, all.end()), /*uniform_in_log=*/false);
    int lr_close = 0, width_close = 0;
    for (auto it = all.end() - 50; it != all.end(); ++it) {
      const double lr = it->number("lr").value();
      const auto width = it->integer("width").value();
      if (lr > 1.6e-5 && lr < 6.3e-5) ++lr_close;  // within a factor of 2
      if (width >= 12 && width <= 22) ++width_close;
    }
    CHECK(lr_close >= 25);  // of the last 50
    CHECK(width_close >= 25);
  }
}

TEST_CASE("the same seed gives the same suggestions and a different seed different ones", "[tune][actors]") {
  const auto space = mixed_space().grid("depth", {2, 4});
  using maker = std::function<celer::expected<std::unique_ptr<searcher>>(std::uint64_t)>;
  const std::vector<std::pair<std::string, maker>> makers = {
    {"random", [&](std::uint64_t seed) { return make_random_search(space, {.seed = seed}); }},
    {"grid", [&](std::uint64_t seed) { return make_grid_search(space, {.seed = seed, .num_samples = 20}); }},
    {"tpe", [&](std::uint64_t seed) { return make_tpe_search(space, {.seed = seed}); }},
    {"tpe univariate", [&](std::uint64_t seed) { return make_tpe_search(space, {.seed = seed}, {.multivariate = false}); }},
  };
  auto objective = [](const params& p) { return p.number("dropout").value() + p.number("layers").value(); };
  for (auto& [name, make] : makers) {
    INFO(name);
    auto a = make(3), b = make(3), c = make(4);
    REQUIRE(a.has_value());
    const auto first = suggestions_of(**a, 30, objective);
    CHECK(suggestions_of(**b, 30, objective) == first);
    CHECK(suggestions_of(**c, 30, objective) != first);
  }
}

TEST_CASE("grid search runs every combination once per pass and draws the other parameters", "[tune][actors]") {
  const auto space = search_space{}.grid("a", {1, 2, 3}).uniform("u", 0, 1).grid("b", {"x", "y"});
  auto once = make_grid_search(space, {.seed = 1});
  REQUIRE(once.has_value());
  CHECK((*once)->name() == "grid");
  std::vector<std::pair<std::int64_t, std::string>> seen;
  std::set<double> us;
  while (auto p = (*once)->suggest()) {
    REQUIRE(space.check(*p).has_value());
    seen.emplace_back(p->integer("a").value(), p->text("b").value());
    us.insert(p->number("u").value());
  }
  const std::vector<std::pair<std::int64_t, std::string>> expected = {{1, "x"}, {1, "y"}, {2, "x"},
                                                                      {2, "y"}, {3, "x"}, {3, "y"}};
  CHECK(seen == expected);  // declaration order, the last grid parameter turning fastest
  CHECK(us.size() == 6);    // a fresh draw for each point
  CHECK_FALSE((*once)->suggest().has_value());

  auto twice = make_grid_search(space, {.seed = 1, .num_samples = 2});
  std::map<std::pair<std::int64_t, std::string>, int> count;
  while (auto p = (*twice)->suggest()) ++count[{p->integer("a").value(), p->text("b").value()}];
  CHECK(count.size() == 6);
  for (auto& [point, n] : count) CHECK(n == 2);

  auto no_grid = make_grid_search(search_space{}.uniform("u", 0, 1), {.num_samples = 3});
  CHECK(suggestions_of(**no_grid, 3).size() == 3);
  CHECK_FALSE((*no_grid)->suggest().has_value());
}

TEST_CASE("random search and TPE stop after num_samples suggestions", "[tune][actors]") {
  const auto space = search_space{}.uniform("x", 0, 1);
  auto r = make_random_search(space, {.num_samples = 4});
  auto t = make_tpe_search(space, {.num_samples = 12}, {.n_startup_trials = 2});
  CHECK(suggestions_of(**r, 4).size() == 4);
  CHECK_FALSE((*r)->suggest().has_value());
  CHECK(suggestions_of(**t, 12, [](const params& p) { return p.number("x").value(); }).size() == 12);
  CHECK_FALSE((*t)->suggest().has_value());
}

TEST_CASE("TPE finds a much better value than random search on a 2-D quadratic within 60 trials (median of 9 seeds)",
          "[tune][actors]") {
  std::vector<double> tpe, tpe_mv, random;
  for (std::uint64_t seed = 0; seed < 9; ++seed) {
    tpe.push_back(best_on_quadratic(
      [](auto& s, auto seed) { return make_tpe_search(s, {.seed = seed}, {.multivariate = false}); }, seed, 60));
    tpe_mv.push_back(best_on_quadratic([](auto& s, auto seed) { return make_tpe_search(s, {.seed = seed}); }, seed, 60));
    random.push_back(best_on_quadratic([](auto& s, auto seed) { return make_random_search(s, {.seed = seed}); }, seed, 60));
  }
  INFO("median best: tpe " << median(tpe) << ", tpe multivariate " << median(tpe_mv) << ", random " << median(random));
  // Seen here: about 0.035 (univariate), 0.019 (multivariate) and 0.66 (random).
  CHECK(median(tpe) < median(random) / 5);
  CHECK(median(tpe_mv) < median(random) / 5);
  CHECK(median(tpe) < 0.1);
}

TEST_CASE("TPE maximises as well as it minimises, and learns which choice is best", "[tune][actors]") {
  const auto space = search_space{}.uniform("x", -5, 5).categorical("kind", {"a", "b", "c", "d"});
  auto gain = [](const params& p) {
    const double x = p.number("x").value();
    return (p.text("kind").value() == "c" ? 10.0 : 0.0) - (x - 2) * (x - 2);
  };
  // The last 20 of 60 suggestions pick "c" more often than the quarter chance gives: 10-13
  // (multivariate, the default) and 15-17 (univariate) over seeds 0-7.
  for (const bool multivariate : {true, false}) {
    INFO("multivariate " << multivariate);
    auto s = make_tpe_search(space, {.mode = direction::maximize, .seed = 2}, {.multivariate = multivariate});
    auto all = suggestions_of(**s, 60, gain);
    const auto late = std::count_if(all.begin() + 40, all.end(), [](auto& p) { return p.text("kind").value() == "c"; });
    CHECK(late >= (multivariate ? 9 : 12));
    double best = -INFINITY;
    for (auto& p : all) best = std::max(best, gain(p));
    CHECK(best > 9.9);
  }
}

TEST_CASE("TPE suggests while trials are pending and models only the finished ones", "[tune][actors]") {
  const auto space = search_space{}.uniform("x", -5, 5);
  auto tpe = make_tpe_search(space, {.seed = 9}, {.n_startup_trials = 5});
  auto random = make_random_search(space, {.seed = 9});
  // Until five trials have finished TPE draws at random, exactly as random search with the
  // same seed does, however many are running.
  std::vector<params> pending;
  for (int i = 0; i < 8; ++i) pending.push_back(*(*tpe)->suggest());
  CHECK(pending == suggestions_of(**random, 8));
  // A failed trial (NaN) is counted out: four finished trials are still too few.
  for (std::size_t i = 0; i < 4; ++i)
    REQUIRE((*tpe)->observe(pending[i], std::abs(pending[i].number("x").value() - 3)).has_value());
  REQUIRE((*tpe)->observe(pending[4], NAN).has_value());
  CHECK((*tpe)->suggest() == (*random)->suggest());
  // The fifth finished trial switches the model on.
  REQUIRE((*tpe)->observe(pending[5], std::abs(pending[5].number("x").value() - 3)).has_value());
  CHECK((*tpe)->suggest() != (*random)->suggest());

  // Trials read back from an earlier run may be observed without having been suggested.
  for (int i = 0; i <= 30; ++i) {
    const double x = -5 + i / 3.0;
    REQUIRE((*tpe)->observe(params{{"x", x}}, std::abs(x - 3)).has_value());
  }
  int near = 0;
  for (int i = 0; i < 20; ++i) {
    auto p = (*tpe)->suggest();  // none of these is observed: all pending
    REQUIRE(p.has_value());
    if (std::abs(p->number("x").value() - 3) < 1) ++near;
  }
  CHECK(near >= 12);  // a fifth by chance
  auto bad = (*tpe)->observe(params{{"x", 7.0}}, 1.0);
  REQUIRE_FALSE(bad.has_value());
  CHECK_THAT(bad.error().message(), Catch::Contains("outside its range"));
}

TEST_CASE("TPE's options are checked", "[tune][actors]") {
  const auto space = search_space{}.uniform("x", 0, 1);
  CHECK_THAT(make_tpe_search(space, {}, {.n_ei_candidates = 0}).error().message(), Catch::Contains("n_ei_candidates"));
  CHECK_THAT(make_tpe_search(space, {}, {.prior_weight = 0}).error().message(), Catch::Contains("prior_weight > 0"));
}

TEST_CASE("the truncated normal's arithmetic matches known values in the middle and the tails", "[tune][actors]") {
  using namespace celer::tune::detail;
  CHECK(ndtri(0.975) == Approx(1.959963984540054).epsilon(1e-14));
  CHECK(ndtri(0.5) == 0.0);
  CHECK(ndtri(1e-10) == Approx(-6.361340902404056).epsilon(1e-13));
  CHECK(ndtri(1e-300) == Approx(-37.0470962993612).epsilon(1e-12));
  CHECK(log_ndtr(0.0) == Approx(std::log(0.5)).epsilon(1e-15));
  CHECK(log_ndtr(-30) == Approx(-454.3212439563431).epsilon(1e-12));  // asymptotic series
  CHECK(log_ndtr(10) == Approx(-7.619853024160593e-24).epsilon(1e-10));
  CHECK(std::exp(log_gauss_mass(-1, 1)) == Approx(0.6826894921370859).epsilon(1e-14));
  CHECK(log_gauss_mass(8, 9) == Approx(std::log(6.220960574271819e-16 - 1.1285884059538422e-19)).epsilon(1e-10));
  CHECK(log_gauss_mass(-9, -8) == Approx(log_gauss_mass(8, 9)).epsilon(1e-14));
  // The inverse CDF of a truncated normal: its ends, its median, and far out of the middle.
  CHECK(truncnorm_ppf(0.0, -1, 2) == -1);
  CHECK(truncnorm_ppf(0.5, -1, 1) == Approx(0).margin(1e-15));
  CHECK(truncnorm_ppf(0.5, 0, 1e9) == Approx(0.6744897501960817).epsilon(1e-12));
  CHECK(truncnorm_ppf(0.5, 10, 11) == Approx(10.068409369547616).epsilon(1e-12));
  for (double q : {0.01, 0.3, 0.77, 0.999}) {
    const double z = truncnorm_ppf(q, -0.5, 3);
    CHECK(std::exp(log_gauss_mass(-0.5, z) - log_gauss_mass(-0.5, 3)) == Approx(q).epsilon(1e-12));
  }
}
