// TPE's Parzen estimators and the truncated-normal arithmetic under them (see parzen.hpp).
#include "parzen.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <numeric>

namespace celer::tune::detail {
namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
const double log_sqrt_2pi = 0.5 * std::log(2 * std::numbers::pi);

double ndtr(double x) { return 0.5 * std::erfc(-x / std::numbers::sqrt2); }

/// log(e^p − e^q) for p >= q.
double log_diff(double log_p, double log_q) { return log_p + std::log1p(-std::exp(log_q - log_p)); }

double log_add(double log_p, double log_q) {
  if (log_p == -inf) return log_q;
  if (log_q == -inf) return log_p;
  const double m = std::max(log_p, log_q);
  return m + std::log1p(std::exp(-std::abs(log_p - log_q)));
}

/// x such that log Φ(x) = y (y <= 0).
double ndtri_exp(double y) {
  if (y > -std::numbers::ln2) return -ndtri(-std::expm1(y));  // Φ(x) > 1/2: use the upper tail
  const double p = std::exp(y);
  if (p > 1e-300) return ndtri(p);
  // Far in the left tail: start from log Φ(x) ≈ −x²/2 − log √(2π) − log(−x) and refine with
  // Newton's method on log Φ(x) − y (d/dx log Φ = φ/Φ).
  double x = -std::sqrt(-2.0 * (y + log_sqrt_2pi));
  for (int i = 0; i < 50; ++i) {
    const double lphi = log_ndtr(x);
    const double dx = (lphi - y) * std::exp(lphi - (-0.5 * x * x - log_sqrt_2pi));
    x -= dx;
    if (std::abs(dx) < 1e-12 * std::abs(x)) break;
  }
  return x;
}

/// Optuna's default_weights: ones for fewer than 25 trials; past that, the oldest n − 25 on a
/// ramp from 1/n up to 1 and the newest 25 at 1.
std::vector<double> default_weights(std::size_t n) {
  std::vector<double> w(n, 1.0);
  if (n < 25) return w;
  const std::size_t ramp = n - 25;
  const double start = 1.0 / static_cast<double>(n);
  for (std::size_t i = 0; i < ramp; ++i)
    w[i] = ramp == 1 ? start : start + (1.0 - start) * static_cast<double>(i) / static_cast<double>(ramp - 1);
  return w;
}

} // namespace

double log_ndtr(double x) {
  if (x > 6) return std::log1p(-ndtr(-x));
  if (x > -20) return std::log(ndtr(x));
  // Asymptotic series of the left tail: Φ(x) ≈ φ(x)/(−x) · Σ (−1)^i (2i−1)!! / x^(2i).
  const double log_lhs = -0.5 * x * x - std::log(-x) - log_sqrt_2pi;
  double last = 0, sum = 1, numerator = 1, denominator = 1, sign = 1;
  const double step = 1 / (x * x);
  for (int i = 1; i < 100 && std::abs(last - sum) > std::numeric_limits<double>::epsilon(); ++i) {
    last = sum;
    sign = -sign;
    denominator *= step;
    numerator *= 2 * i - 1;
    sum += sign * numerator * denominator;
  }
  return log_lhs + std::log(sum);
}

double log_gauss_mass(double a, double b) {
  // The right tail loses precision, so it is mirrored into the left one.
  if (b <= 0) return log_diff(log_ndtr(b), log_ndtr(a));
  if (a > 0) return log_diff(log_ndtr(-a), log_ndtr(-b));
  return std::log1p(-ndtr(a) - ndtr(-b));
}

double ndtri(double p) {
  // Wichura, M. J. (1988), Algorithm AS 241: the percentage points of the normal distribution.
  const double q = p - 0.5;
  if (std::abs(q) <= 0.425) {
    const double r = 0.180625 - q * q;
    const double num = (((((((2.5090809287301226727e+3 * r + 3.3430575583588128105e+4) * r +
                             6.7265770927008700853e+4) * r + 4.5921953931549871457e+4) * r +
                           1.3731693765509461125e+4) * r + 1.9715909503065514427e+3) * r +
                         1.3314166789178437745e+2) * r + 3.3871328727963666080e+0) * q;
    const double den = ((((((5.2264952788528545610e+3 * r + 2.8729085735721942674e+4) * r +
                             3.9307895800092710610e+4) * r + 2.1213794301586595867e+4) * r +
                           5.3941960214247511077e+3) * r + 6.8718700749205790830e+2) * r +
                         4.2313330701600911252e+1) * r + 1.0;
    return num / den;
  }
  double r = std::sqrt(-std::log(q <= 0 ? p : 1.0 - p));
  double num = 0, den = 0;
  if (r <= 5) {
    r -= 1.6;
    num = ((((((7.7454501427834140764e-4 * r + 2.2723844989269184583e-2) * r +
                2.4178072517745061177e-1) * r + 1.2704582524523683826e+0) * r +
              3.6478483247632046050e+0) * r + 5.7694972214606914055e+0) * r +
            4.6303378461565452959e+0) * r + 1.4234371107496835773e+0;
    den = ((((((1.0507500716444168432e-9 * r + 5.4759380849953445460e-4) * r +
                1.5198666563616457197e-2) * r + 1.4810397642748007459e-1) * r +
              6.8976733498510000455e-1) * r + 1.6763848301838038494e+0) * r +
            2.0531916266377588219e+0) * r + 1.0;
  } else {
    r -= 5;
    num = ((((((2.0103343992922881327e-7 * r + 2.7115555687434875782e-5) * r +
                1.2426609473880784386e-3) * r + 2.6532189526576123093e-2) * r +
              2.9656057182850489123e-1) * r + 1.7848265399172913358e+0) * r +
            5.4637849111641143699e+0) * r + 6.6579046435011037772e+0;
    den = ((((((2.0442631033899397856e-15 * r + 1.4215117583164458887e-7) * r +
                1.8463183175100546818e-5) * r + 7.8686913114561325910e-4) * r +
              1.4875361290850614853e-2) * r + 1.3692988092273580531e-1) * r +
            5.9983220655588793769e-1) * r + 1.0;
  }
  return q < 0 ? -num / den : num / den;
}

double truncnorm_ppf(double q, double a, double b) {
  if (q <= 0) return a;
  const double log_mass = log_gauss_mass(a, b);
  double x = 0;
  if (a < 0) {
    x = ndtri_exp(log_add(log_ndtr(a), std::log(q) + log_mass));
  } else {  // mirrored: the left tail is the accurate one
    x = -ndtri_exp(log_add(log_ndtr(-b), std::log1p(-q) + log_mass));
  }
  return std::clamp(x, a, b);
}

parzen_estimator::parzen_estimator(const search_space& space,
                                   const std::vector<std::vector<double>>& observations,
                                   const tpe_options& options) {
  const std::size_t n = observations.size();
  if (n == 0) {
    weights_ = {1.0};  // the prior alone
  } else {
    weights_ = default_weights(n);
    weights_.push_back(options.prior_weight);
  }
  const double total = std::accumulate(weights_.begin(), weights_.end(), 0.0);
  for (auto& w : weights_) {
    w /= total;
    log_weights_.push_back(std::log(w));
  }

  const auto& parameters = space.parameters();
  for (std::size_t d = 0; d < parameters.size(); ++d) {
    const parameter& p = parameters[d];
    dimension dim;
    if (!p.numeric()) {
      dim.categorical = true;
      const std::size_t choices = p.choices.size();
      const double fill = options.prior_weight / static_cast<double>(n + 1);
      for (std::size_t k = 0; k < n; ++k) {
        std::vector<double> row(choices, fill);
        row[static_cast<std::size_t>(observations[k][d])] += 1.0;
        const double sum = std::accumulate(row.begin(), row.end(), 0.0);
        for (auto& x : row) x /= sum;
        dim.probs.push_back(std::move(row));
      }
      dim.probs.emplace_back(choices, 1.0 / static_cast<double>(choices));  // the prior
      dims_.push_back(std::move(dim));
      continue;
    }
    dim.log = p.log();
    dim.discrete = p.integral();
    dim.low = p.low;
    dim.high = p.high;
    double low = dim.discrete ? p.low - 0.5 : p.low;
    double high = dim.discrete ? p.high + 0.5 : p.high;
    if (dim.log) {
      low = std::log(low);
      high = std::log(high);
    }
    dim.adapted_low = low;
    dim.adapted_high = high;
    std::vector<double> mus(n);
    for (std::size_t k = 0; k < n; ++k) mus[k] = dim.log ? std::log(observations[k][d]) : observations[k][d];

    // Each kernel as wide as the larger gap to its neighbours in sorted order, the bounds
    // counting as neighbours; without consider_endpoints the outermost take the inner gap.
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](auto i, auto j) { return mus[i] < mus[j]; });
    std::vector<double> sorted(n + 2);
    sorted.front() = low;
    sorted.back() = high;
    for (std::size_t i = 0; i < n; ++i) sorted[i + 1] = mus[order[i]];
    std::vector<double> sorted_sigma(n);
    for (std::size_t i = 0; i < n; ++i)
      sorted_sigma[i] = std::max(sorted[i + 1] - sorted[i], sorted[i + 2] - sorted[i + 1]);
    if (!options.consider_endpoints && n >= 2) {
      sorted_sigma.front() = sorted[2] - sorted[1];
      sorted_sigma.back() = sorted[n] - sorted[n - 1];
    }
    const double max_sigma = high - low;
    const double min_sigma = options.consider_magic_clip
                               ? (high - low) / std::min(100.0, static_cast<double>(n) + 2.0)
                               : 1e-12;
    dim.mu = mus;
    dim.sigma.resize(n);
    for (std::size_t i = 0; i < n; ++i) dim.sigma[order[i]] = std::clamp(sorted_sigma[i], min_sigma, max_sigma);
    dim.mu.push_back(0.5 * (low + high));  // the prior
    dim.sigma.push_back(high - low);
    for (std::size_t k = 0; k < dim.mu.size(); ++k)
      dim.log_mass.push_back(log_gauss_mass((low - dim.mu[k]) / dim.sigma[k], (high - dim.mu[k]) / dim.sigma[k]));
    dims_.push_back(std::move(dim));
  }
}

std::size_t parzen_estimator::component(rng_type& rng) const {
  const double u = unit(rng);
  double cumulative = 0;
  for (std::size_t k = 0; k + 1 < weights_.size(); ++k) {
    cumulative += weights_[k];
    if (u < cumulative) return k;
  }
  return weights_.size() - 1;
}

double parzen_estimator::sample_kernel(const dimension& dim, std::size_t k, rng_type& rng) const {
  if (dim.categorical) {
    const auto& row = dim.probs[k];
    const double u = unit(rng);
    double cumulative = 0;
    for (std::size_t c = 0; c + 1 < row.size(); ++c) {
      cumulative += row[c];
      if (u < cumulative) return static_cast<double>(c);
    }
    return static_cast<double>(row.size() - 1);
  }
  const double mu = dim.mu[k], sigma = dim.sigma[k];
  const double z = truncnorm_ppf(unit(rng), (dim.adapted_low - mu) / sigma, (dim.adapted_high - mu) / sigma);
  double x = std::clamp(mu + z * sigma, dim.adapted_low, dim.adapted_high);
  if (dim.log) x = std::exp(x);
  if (dim.discrete) x = std::nearbyint(x);
  return std::clamp(x, dim.low, dim.high);
}

double parzen_estimator::log_kernel(const dimension& dim, std::size_t k, double x) const {
  if (dim.categorical) return std::log(dim.probs[k][static_cast<std::size_t>(x)]);
  const double mu = dim.mu[k], sigma = dim.sigma[k];
  if (dim.discrete) {
    double left = x - 0.5, right = x + 0.5;
    if (dim.log) {
      left = std::log(left);
      right = std::log(right);
    }
    return log_gauss_mass((left - mu) / sigma, (right - mu) / sigma) - dim.log_mass[k];
  }
  const double t = dim.log ? std::log(x) : x;
  if (t < dim.adapted_low || t > dim.adapted_high) return -inf;
  const double z = (t - mu) / sigma;
  return -0.5 * z * z - log_sqrt_2pi - dim.log_mass[k] - std::log(sigma);
}

std::vector<double> parzen_estimator::sample(rng_type& rng) const {
  const std::size_t k = component(rng);
  std::vector<double> x;
  x.reserve(dims_.size());
  for (auto& dim : dims_) x.push_back(sample_kernel(dim, k, rng));
  return x;
}

double parzen_estimator::sample(std::size_t d, rng_type& rng) const {
  const std::size_t k = component(rng);
  return sample_kernel(dims_[d], k, rng);
}

double parzen_estimator::log_pdf(const std::vector<double>& x) const {
  double out = -inf;
  for (std::size_t k = 0; k < weights_.size(); ++k) {
    double term = log_weights_[k];
    for (std::size_t d = 0; d < dims_.size(); ++d) term += log_kernel(dims_[d], k, x[d]);
    out = log_add(out, term);
  }
  return out;
}

double parzen_estimator::log_pdf(std::size_t d, double x) const {
  double out = -inf;
  for (std::size_t k = 0; k < weights_.size(); ++k) out = log_add(out, log_weights_[k] + log_kernel(dims_[d], k, x));
  return out;
}

} // namespace celer::tune::detail
