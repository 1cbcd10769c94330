#pragma once
/// Searchers: which hyperparameters the next trial runs with. Random search, grid search
/// (Ray Tune's grid_search, mixed with random draws for the other parameters) and TPE
/// (Optuna's TPESampler, same defaults). One interface: suggest() the next params, observe()
/// a finished trial's objective.
///
///   auto tpe = celer::tune::make_tpe_search(space, {.mode = celer::tune::direction::minimize,
///                                                   .seed = 7});
///   if (!tpe) { std::cerr << tpe.error().message(); return 1; }
///   while (auto p = (*tpe)->suggest()) {          // nothing once num_samples are out
///     double loss = train(*p);
///     if (auto ok = (*tpe)->observe(*p, loss); !ok) std::cerr << ok.error().message();
///   }
///
/// suggest() may be called while earlier trials are still running: TPE models only the
/// trials observed so far (a concurrency limit is the caller's). Every random choice comes
/// from the seed, so the same seed and the same calls in the same order give the same
/// suggestions: a resumed experiment replays its suggest/observe sequence, or observes the
/// finished trials it read back and carries on from there.

#include <celer/actors/tune/space.hpp>
#include <celer/error.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

namespace celer::tune {

/// Whether smaller or larger objective values are better.
enum class direction : unsigned char { minimize, maximize };

/// "minimize" or "maximize".
[[nodiscard]] std::string_view to_string(direction d) noexcept;

/// What every searcher takes.
struct search_options {
  direction mode = direction::minimize;
  /// Seeds the searcher's std::mt19937_64.
  std::uint64_t seed = 0;
  /// Random and TPE: how many suggestions in all, 0 for no limit. Grid: how many times the
  /// whole grid is run (Ray's num_samples), 0 meaning once.
  std::size_t num_samples = 0;
};

/// Optuna's TPESampler settings; the defaults are Optuna's.
struct tpe_options {
  /// Trials drawn at random before the model takes over (counting observed trials).
  std::size_t n_startup_trials = 10;
  /// Candidates drawn from the good trials' density; the one with the highest l(x)/g(x) wins.
  std::size_t n_ei_candidates = 24;
  /// Weight of the prior component (the whole range, centred) in each density.
  double prior_weight = 1.0;
  /// Keep each kernel's width at least range / min(100, observations + 2).
  bool consider_magic_clip = true;
  /// Let the outermost kernels' widths reach the bounds.
  bool consider_endpoints = false;
  /// true: one joint density of products of the same kernels (Optuna 5's default for one
  /// objective), which follows parameters that interact. false: one density per parameter,
  /// each chosen separately (Optuna up to 4.x's default; behind on Branin and Hartmann-6,
  /// docs/benchmarks.md).
  bool multivariate = true;
};

/// Suggests params and learns from finished trials. Not thread-safe: one caller (the tuning
/// driver actor) owns it.
class searcher {
public:
  virtual ~searcher() = default;
  /// The next trial's params, or nothing when the searcher is done (the grid is exhausted, or
  /// num_samples suggestions were made).
  [[nodiscard]] virtual std::optional<params> suggest() = 0;
  /// Records a finished trial's objective. `p` need not have come from suggest() (a resumed
  /// experiment observes the trials it read back). A NaN value marks a failed trial: counted,
  /// never modelled. invalid_argument when `p` does not fit the space.
  [[nodiscard]] virtual expected<void> observe(const params& p, double value) = 0;
  /// "random", "grid" or "tpe".
  [[nodiscard]] virtual std::string_view name() const noexcept = 0;
};

/// Every parameter drawn independently: reals uniformly (in log space for log ones),
/// integers each equally likely (log ones uniform in log space, then rounded), categorical
/// and grid values each equally likely. invalid_argument for a bad space.
[[nodiscard]] expected<std::unique_ptr<searcher>> make_random_search(const search_space& space,
                                                                     search_options options = {});

/// Every combination of the grid parameters once per pass (the last one varying fastest), the
/// other parameters drawn at random for each. invalid_argument for a bad space.
[[nodiscard]] expected<std::unique_ptr<searcher>> make_grid_search(const search_space& space,
                                                                   search_options options = {});

/// Tree-structured Parzen Estimator, as Optuna's TPESampler: random for the first
/// n_startup_trials observed; then the observed trials split into the best gamma(n) =
/// min(ceil(0.1 n), 25) and the rest, a truncated-Gaussian mixture (log space for log
/// parameters, bins for integers, weighted counts for categoricals, plus a prior) fitted to
/// each, n_ei_candidates drawn from the good one, and the candidate maximising
/// l(x)/g(x) suggested. invalid_argument for a bad space or options.
[[nodiscard]] expected<std::unique_ptr<searcher>> make_tpe_search(const search_space& space,
                                                                  search_options options = {},
                                                                  tpe_options tpe = {});

} // namespace celer::tune
