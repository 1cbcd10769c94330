// The searchers: random, grid and TPE (Optuna's TPESampler; the estimators are in parzen.cpp).
#include "parzen.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace celer::tune {
namespace {

using detail::rng_type;

error invalid(std::string message) { return error(error_code::invalid_argument, std::move(message)); }

/// Every random choice is drawn independently.
class random_search final : public searcher {
public:
  random_search(search_space space, search_options options)
    : space_(std::move(space)), options_(options), rng_(options.seed) {}

  std::optional<params> suggest() override {
    if (options_.num_samples != 0 && suggested_ >= options_.num_samples) return std::nullopt;
    ++suggested_;
    return detail::draw(space_, rng_);
  }
  expected<void> observe(const params& p, double) override { return space_.check(p); }
  std::string_view name() const noexcept override { return "random"; }

private:
  search_space space_;
  search_options options_;
  rng_type rng_;
  std::size_t suggested_ = 0;
};

/// The cartesian product of the grid parameters, as an odometer whose last digit turns
/// fastest; the other parameters drawn at random for each point.
class grid_search final : public searcher {
public:
  grid_search(search_space space, search_options options)
    : space_(std::move(space)), rng_(options.seed) {
    for (std::size_t i = 0; i < space_.size(); ++i)
      if (space_.parameters()[i].kind == distribution::grid) grid_.push_back(i);
    points_ = 1;
    for (auto i : grid_) points_ *= space_.parameters()[i].choices.size();
    total_ = points_ * std::max<std::size_t>(options.num_samples, 1);
  }

  std::optional<params> suggest() override {
    if (next_ >= total_) return std::nullopt;
    std::size_t rest = next_++ % points_;
    params p;
    std::vector<std::size_t> digit(grid_.size());
    for (std::size_t g = grid_.size(); g-- > 0;) {
      const std::size_t n = space_.parameters()[grid_[g]].choices.size();
      digit[g] = rest % n;
      rest /= n;
    }
    std::size_t g = 0;
    for (std::size_t i = 0; i < space_.size(); ++i) {
      const parameter& param = space_.parameters()[i];
      if (param.kind == distribution::grid) {
        p.set(param.name, param.choices[digit[g++]]);
      } else {
        p.set(param.name, detail::draw(param, rng_));
      }
    }
    return p;
  }
  expected<void> observe(const params& p, double) override { return space_.check(p); }
  std::string_view name() const noexcept override { return "grid"; }

private:
  search_space space_;
  rng_type rng_;
  std::vector<std::size_t> grid_;  // indices of the grid parameters
  std::size_t points_ = 1;
  std::size_t total_ = 0;
  std::size_t next_ = 0;
};

/// Optuna's default gamma: the best ceil(0.1 n) trials, at most 25, make the "good" density.
std::size_t default_gamma(std::size_t n) {
  return std::min<std::size_t>((n + 9) / 10, 25);
}

class tpe_search final : public searcher {
public:
  tpe_search(search_space space, search_options options, tpe_options tpe)
    : space_(std::move(space)), options_(options), tpe_(tpe), rng_(options.seed) {}

  std::optional<params> suggest() override {
    if (options_.num_samples != 0 && suggested_ >= options_.num_samples) return std::nullopt;
    ++suggested_;
    if (trials_.size() < tpe_.n_startup_trials) return detail::draw(space_, rng_);

    // Split the finished trials into the best gamma(n) and the rest, each kept in the
    // order observed (the weights favour the newest).
    const std::size_t n = trials_.size();
    const std::size_t n_below = std::min(default_gamma(n), n);
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](auto i, auto j) { return trials_[i].score < trials_[j].score; });
    std::vector<std::size_t> below(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n_below));
    std::vector<std::size_t> above(order.begin() + static_cast<std::ptrdiff_t>(n_below), order.end());
    std::sort(below.begin(), below.end());
    std::sort(above.begin(), above.end());
    auto points = [&](const std::vector<std::size_t>& which) {
      std::vector<std::vector<double>> out;
      for (auto i : which) out.push_back(trials_[i].x);
      return out;
    };
    const detail::parzen_estimator good(space_, points(below), tpe_);
    const detail::parzen_estimator bad(space_, points(above), tpe_);

    std::vector<double> x(space_.size());
    if (tpe_.multivariate) {
      double best = -std::numeric_limits<double>::infinity();
      for (std::size_t c = 0; c < tpe_.n_ei_candidates; ++c) {
        auto candidate = good.sample(rng_);
        const double score = good.log_pdf(candidate) - bad.log_pdf(candidate);
        if (c == 0 || score > best) {
          best = score;
          x = std::move(candidate);
        }
      }
    } else {
      // Each parameter on its own, in declaration order, as Optuna's independent sampling.
      for (std::size_t d = 0; d < space_.size(); ++d) {
        std::vector<double> candidates(tpe_.n_ei_candidates);
        for (auto& c : candidates) c = good.sample(d, rng_);
        double best = -std::numeric_limits<double>::infinity();
        for (std::size_t c = 0; c < candidates.size(); ++c) {
          const double score = good.log_pdf(d, candidates[c]) - bad.log_pdf(d, candidates[c]);
          if (c == 0 || score > best) {
            best = score;
            x[d] = candidates[c];
          }
        }
      }
    }
    return to_params(x);
  }

  expected<void> observe(const params& p, double objective) override {
    if (auto ok = space_.check(p); !ok) return ok;
    if (std::isnan(objective)) return {};  // a failed trial: Optuna leaves those out too
    trial t;
    t.score = options_.mode == direction::minimize ? objective : -objective;
    for (auto& param : space_.parameters()) {
      const value& v = *p.find(param.name);
      t.x.push_back(param.numeric() ? detail::as_number(v) : static_cast<double>(*param.index_of(v)));
    }
    trials_.push_back(std::move(t));
    return {};
  }

  std::string_view name() const noexcept override { return "tpe"; }

private:
  struct trial {
    std::vector<double> x;  // per parameter: the number, or the choice's index
    double score = 0;       // lower is better
  };

  params to_params(const std::vector<double>& x) const {
    params p;
    for (std::size_t d = 0; d < space_.size(); ++d) {
      const parameter& param = space_.parameters()[d];
      if (!param.numeric()) {
        p.set(param.name, param.choices[static_cast<std::size_t>(x[d])]);
      } else if (param.integral()) {
        p.set(param.name, static_cast<std::int64_t>(x[d]));
      } else {
        p.set(param.name, x[d]);
      }
    }
    return p;
  }

  search_space space_;
  search_options options_;
  tpe_options tpe_;
  rng_type rng_;
  std::vector<trial> trials_;  // observed, NaN left out, oldest first
  std::size_t suggested_ = 0;
};

} // namespace

std::string_view to_string(direction d) noexcept {
  return d == direction::minimize ? "minimize" : "maximize";
}

expected<std::unique_ptr<searcher>> make_random_search(const search_space& space, search_options options) {
  if (auto ok = space.validate(); !ok) return ok.error();
  return std::unique_ptr<searcher>(new random_search(space, options));
}

expected<std::unique_ptr<searcher>> make_grid_search(const search_space& space, search_options options) {
  if (auto ok = space.validate(); !ok) return ok.error();
  return std::unique_ptr<searcher>(new grid_search(space, options));
}

expected<std::unique_ptr<searcher>> make_tpe_search(const search_space& space, search_options options,
                                                    tpe_options tpe) {
  if (auto ok = space.validate(); !ok) return ok.error();
  if (tpe.n_ei_candidates == 0) return invalid("TPE needs n_ei_candidates >= 1");
  if (!(tpe.prior_weight > 0) || !std::isfinite(tpe.prior_weight))
    return invalid("TPE needs a finite prior_weight > 0, got " + std::to_string(tpe.prior_weight));
  return std::unique_ptr<searcher>(new tpe_search(space, options, tpe));
}

} // namespace celer::tune
