#pragma once
// The Parzen estimators of TPE (Optuna's optuna/samplers/_tpe/parzen_estimator.py and
// probability_distributions.py, written afresh): a mixture over observed trials plus a prior,
// each component a product over parameters of a truncated Gaussian (reals, in log space for
// log parameters), the mass of a Gaussian over an integer's bin [k - 0.5, k + 0.5], or a
// smoothed one-hot distribution (categoricals). Also the truncated-normal arithmetic it
// rests on (Optuna's _truncnorm.py, after SciPy).
#include "draw.hpp"

#include <celer/actors/tune/search.hpp>

#include <cstddef>
#include <vector>

namespace celer::tune::detail {

/// log Φ(x), accurate in both tails.
double log_ndtr(double x);
/// log(Φ(b) − Φ(a)) for a < b, accurate in the tails.
double log_gauss_mass(double a, double b);
/// Φ⁻¹(p) for 0 < p < 1 (Wichura's AS241, about 16 digits).
double ndtri(double p);
/// A standard normal truncated to [a, b] at quantile q in [0, 1) (inverse CDF).
double truncnorm_ppf(double q, double a, double b);

/// One mixture for all parameters of a space. Values are given per parameter in the space's
/// order as doubles: reals and integers as they are, categorical and grid values as their
/// index in `choices`.
class parzen_estimator {
public:
  /// `observations` are trials (oldest first), each a value per parameter; the weights are
  /// Optuna's default_weights (the oldest of more than 25 weighed down on a ramp) and the
  /// prior's weight, normalised.
  parzen_estimator(const search_space& space, const std::vector<std::vector<double>>& observations,
                   const tpe_options& options);

  /// A joint draw: one component for every parameter.
  [[nodiscard]] std::vector<double> sample(rng_type& rng) const;
  /// A draw of parameter `d` alone (its own component).
  [[nodiscard]] double sample(std::size_t d, rng_type& rng) const;
  /// The joint density's log at `x`.
  [[nodiscard]] double log_pdf(const std::vector<double>& x) const;
  /// The density of parameter `d` alone, its log at `x`.
  [[nodiscard]] double log_pdf(std::size_t d, double x) const;

private:
  struct dimension {
    bool categorical = false;
    bool log = false;
    bool discrete = false;
    double low = 0, high = 0;            // the parameter's own bounds
    double adapted_low = 0, adapted_high = 0;  // widened by half a step for integers, then log
    std::vector<double> mu, sigma;       // per component (numeric)
    std::vector<double> log_mass;        // log_gauss_mass of the bounds per component
    std::vector<std::vector<double>> probs;  // per component (categorical)
  };

  [[nodiscard]] std::size_t component(rng_type& rng) const;
  [[nodiscard]] double sample_kernel(const dimension& dim, std::size_t k, rng_type& rng) const;
  [[nodiscard]] double log_kernel(const dimension& dim, std::size_t k, double x) const;

  std::vector<double> weights_;      // per component, summing to 1; the prior last
  std::vector<double> log_weights_;
  std::vector<dimension> dims_;
};

} // namespace celer::tune::detail
