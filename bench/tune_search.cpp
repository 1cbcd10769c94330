// celer-bench-tune-search: the tuning searchers of celer::tune (actors/tune/) on two standard
// test functions, against each other; bench/peers/optuna_tpe.py runs Optuna's TPESampler on
// the same and prints the same table.
//
//   Branin      2-D, x1 in [-5, 10], x2 in [0, 15], minimum 0.397887 (three minimisers)
//   Hartmann-6  6-D, [0, 1]^6, minimum -3.32237
//
// For each function and method, `--seeds` runs (seeds 0..N-1, the searcher's seed) of
// `--trials` sequential trials (suggest, evaluate, observe); the figure is the median over the
// seeds of the best value found after 50 trials and after all of them, with the 25th and 75th
// percentiles. Methods: random search, TPE with Optuna 5's defaults (tune::tpe_options{}:
// multivariate densities), and TPE with univariate densities (Optuna 4's default).
//
//   build/bench/celer-bench-tune-search [--seeds 30] [--trials 100] [--json FILE] [--smoke]
//
// A suggestion outside the space, or a best value below a function's known minimum, prints
// "CHECK FAILED" and the program exits 1.
#include <celer/actors/tune.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <numbers>
#include <string>
#include <vector>

namespace tune = celer::tune;

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  if (ok) return;
  if (++failures <= 10) std::cout << "CHECK FAILED: " << what << "\n";
}

double branin(const std::vector<double>& x) {
  constexpr double pi = std::numbers::pi;
  const double a = 1, b = 5.1 / (4 * pi * pi), c = 5 / pi, r = 6, s = 10, t = 1 / (8 * pi);
  const double u = x[1] - b * x[0] * x[0] + c * x[0] - r;
  return a * u * u + s * (1 - t) * std::cos(x[0]) + s;
}

double hartmann6(const std::vector<double>& x) {
  static constexpr std::array<double, 4> alpha = {1.0, 1.2, 3.0, 3.2};
  static constexpr double a[4][6] = {{10, 3, 17, 3.5, 1.7, 8},
                                     {0.05, 10, 17, 0.1, 8, 14},
                                     {3, 3.5, 1.7, 10, 17, 8},
                                     {17, 8, 0.05, 10, 0.1, 14}};
  static constexpr double p[4][6] = {{0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886},
                                     {0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991},
                                     {0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650},
                                     {0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381}};
  double sum = 0;
  for (int i = 0; i < 4; ++i) {
    double inner = 0;
    for (int j = 0; j < 6; ++j) inner += a[i][j] * (x[j] - p[i][j]) * (x[j] - p[i][j]);
    sum += alpha[i] * std::exp(-inner);
  }
  return -sum;
}

struct test_function {
  std::string name;
  double minimum;
  tune::search_space space;
  std::function<double(const std::vector<double>&)> f;
};

std::vector<test_function> functions() {
  tune::search_space h;
  for (int i = 1; i <= 6; ++i) h.uniform("x" + std::to_string(i), 0, 1);
  return {{"branin", 0.397887, tune::search_space{}.uniform("x1", -5, 10).uniform("x2", 0, 15), branin},
          {"hartmann6", -3.32237, h, hartmann6}};
}

struct method {
  std::string name;
  std::function<celer::expected<std::unique_ptr<tune::searcher>>(const tune::search_space&, std::uint64_t)> make;
};

std::vector<method> methods() {
  return {{"random", [](auto& s, auto seed) { return tune::make_random_search(s, {.seed = seed}); }},
          {"tpe", [](auto& s, auto seed) { return tune::make_tpe_search(s, {.seed = seed}); }},
          {"tpe_univariate", [](auto& s, auto seed) {
             return tune::make_tpe_search(s, {.seed = seed}, {.multivariate = false});
           }}};
}

double quantile(std::vector<double> v, double q) {  // linear, as numpy's default
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(pos);
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

} // namespace

int main(int argc, char** argv) {
  bool smoke = false;
  int seeds = 30;
  int trials = 100;
  std::string json_path;
  CLI::App app{"celer-bench-tune-search: random search and TPE (celer::tune) on Branin and Hartmann-6; "
               "the median best value over seeds after 50 trials and after all"};
  app.add_flag("--smoke", smoke, "2 seeds: checks that it runs");
  app.add_option("--seeds", seeds, "runs per function and method, seeds 0..N-1 (default 30)")->check(CLI::PositiveNumber);
  app.add_option("--trials", trials, "trials per run (default 100)")->check(CLI::Range(50, 100000));
  app.add_option("--json", json_path, "also write the figures (and every run's best values) to FILE");
  CLI11_PARSE(app, argc, argv);
  if (smoke) seeds = std::min(seeds, 2);

  nlohmann::json out;
  out["seeds"] = seeds;
  out["trials"] = trials;
  std::printf("== best value found, median over %d seeds [25th-75th percentile]; %d trials each\n", seeds, trials);
  std::printf("%-10s %-17s %28s %28s %10s\n", "function", "method", "best@50", ("best@" + std::to_string(trials)).c_str(),
              "ms/trial");
  for (auto& fn : functions()) {
    out["functions"][fn.name]["minimum"] = fn.minimum;
    for (auto& m : methods()) {
      std::vector<double> at50, at_end;
      double seconds = 0;
      for (int seed = 0; seed < seeds; ++seed) {
        auto searcher = m.make(fn.space, static_cast<std::uint64_t>(seed));
        if (!searcher) {
          std::cerr << searcher.error().message() << "\n";
          return 2;
        }
        double best = std::numeric_limits<double>::infinity();
        for (int t = 0; t < trials; ++t) {
          const auto start = std::chrono::steady_clock::now();
          auto p = (*searcher)->suggest();
          seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          check(p.has_value(), m.name + " ran out of suggestions");
          if (!p) break;
          check(fn.space.check(*p).has_value(), m.name + " suggested a point outside the space: " + to_string(*p));
          std::vector<double> x;
          for (auto& param : fn.space.parameters()) x.push_back(p->number(param.name).value());
          const double y = fn.f(x);
          best = std::min(best, y);
          const auto observe_start = std::chrono::steady_clock::now();
          check((*searcher)->observe(*p, y).has_value(), "observe refused a suggestion");
          seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - observe_start).count();
          if (t + 1 == 50) at50.push_back(best);
        }
        at_end.push_back(best);
        check(best >= fn.minimum - 1e-5, fn.name + ": a best value below the known minimum");
      }
      auto cell = [](const std::vector<double>& v) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.5f [%.4f-%.4f]", quantile(v, 0.5), quantile(v, 0.25), quantile(v, 0.75));
        return std::string(buf);
      };
      const double ms = 1000 * seconds / (static_cast<double>(seeds) * trials);
      std::printf("%-10s %-17s %28s %28s %10.3f\n", fn.name.c_str(), m.name.c_str(), cell(at50).c_str(),
                  cell(at_end).c_str(), ms);
      auto& j = out["functions"][fn.name]["methods"][m.name];
      j["median_best_at_50"] = quantile(at50, 0.5);
      j["median_best_at_end"] = quantile(at_end, 0.5);
      j["best_at_50"] = at50;
      j["best_at_end"] = at_end;
      j["ms_per_trial"] = ms;
    }
  }
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
  return failures == 0 ? 0 : 1;
}
