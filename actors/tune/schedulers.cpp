// FIFO, ASHA (Ray Tune's AsyncHyperBandScheduler, one bracket) and the median stopping rule
// (Ray's MedianStoppingRule). PBT is in pbt.cpp.
#include "score.hpp"

#include <celer/actors/tune/schedule.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

namespace celer::tune {
namespace {

error invalid(std::string message) { return error(error_code::invalid_argument, std::move(message)); }

std::string number_text(double d) {
  std::ostringstream out;
  out.precision(6);
  out << d;
  return out.str();
}

/// A score back in the user's terms, for messages.
double as_value(direction mode, double score) { return mode == direction::maximize ? score : -score; }

/// The q-th percentile (0..100) of `v`, interpolating linearly between the closest ranks as
/// numpy does by default; an infinity at either rank wins.
double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double position = q / 100.0 * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(position));
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  const double t = position - static_cast<double>(lo);
  if (t == 0 || v[lo] == v[hi]) return v[lo];
  if (std::isinf(v[lo])) return v[lo];
  if (std::isinf(v[hi])) return v[hi];
  return v[lo] + (v[hi] - v[lo]) * t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

class fifo final : public scheduler {
public:
  decision on_result(trial_id, std::int64_t, double) override { return {}; }
  void on_complete(trial_id) override {}
  std::string_view name() const noexcept override { return "fifo"; }
};

class asha final : public scheduler {
public:
  explicit asha(asha_options options) : options_(options) {
    // Ray's MAX_RUNGS = int(log(max_t / grace) / log(rf) + 1); the small allowance keeps a
    // rung that falls exactly on max_t when the logarithms round down (log(1000)/log(10)).
    const auto grace = static_cast<double>(options.grace_period);
    const double span = std::log(static_cast<double>(options.max_t) / grace) / std::log(options.reduction_factor);
    const auto rungs = static_cast<int>(std::floor(span + 1e-9)) + 1;
    for (int k = rungs - 1; k >= 0; --k) rungs_.push_back({grace * std::pow(options.reduction_factor, k), {}});
  }

  decision on_result(trial_id trial, std::int64_t iteration, double value) override {
    last_[trial] = {iteration, value};
    if (iteration >= options_.max_t) {
      return {.what = decision::action::stop, .reason = "reached max_t = " + std::to_string(options_.max_t)};
    }
    return promote(trial, iteration, value);
  }

  void on_complete(trial_id trial) override {
    // As Ray does, a trial that ends records its last result at the highest rung it reached
    // (a trial stopped at max_t records it here, at the top rung).
    auto it = last_.find(trial);
    if (it == last_.end()) return;
    (void)promote(trial, it->second.first, it->second.second);
    last_.erase(it);
  }

  std::string_view name() const noexcept override { return "asha"; }

private:
  struct rung {
    double milestone = 0;
    std::map<trial_id, double> recorded;  // scores of the trials that reached it
  };

  /// The highest rung at or below `iteration` that the trial has not been compared at yet:
  /// compared with the cutoff of those recorded before it, then recorded.
  decision promote(trial_id trial, std::int64_t iteration, double value) {
    const double s = detail::score(options_.mode, value);
    for (auto& r : rungs_) {  // highest first
      if (static_cast<double>(iteration) < r.milestone || r.recorded.contains(trial)) continue;
      decision d;
      if (!r.recorded.empty()) {
        std::vector<double> scores;
        for (auto& [id, v] : r.recorded) scores.push_back(v);
        const double cutoff = percentile(std::move(scores), (1 - 1 / options_.reduction_factor) * 100);
        if (s < cutoff) {
          d.what = decision::action::stop;
          d.reason = "rung " + number_text(r.milestone) + ": " + number_text(value) + " is worse than the cutoff " +
                     number_text(as_value(options_.mode, cutoff)) + " (top 1/" +
                     number_text(options_.reduction_factor) + " of " + std::to_string(r.recorded.size()) +
                     " recorded)";
        }
      }
      r.recorded[trial] = s;
      return d;
    }
    return {};
  }

  asha_options options_;
  std::vector<rung> rungs_;  // highest milestone first
  std::map<trial_id, std::pair<std::int64_t, double>> last_;  // each live trial's last result
};

class median_stopping final : public scheduler {
public:
  explicit median_stopping(median_stopping_options options) : options_(options) {}

  decision on_result(trial_id trial, std::int64_t iteration, double value) override {
    auto& mine = results_[trial];
    mine.push_back({iteration, detail::score(options_.mode, value)});
    if (iteration < options_.grace_period) return {};

    std::vector<double> means;
    for (auto& [other, results] : results_) {
      if (other != trial && results.back().first >= iteration) means.push_back(running_mean(results, iteration));
    }
    if (means.size() < options_.min_samples_required) return {};
    const double median_score = median(means);
    double mine_score = running_mean(mine, iteration);
    if (!options_.use_running_mean) {
      mine_score = mine.front().second;
      for (auto& [t, s] : mine) mine_score = std::max(mine_score, s);
    }
    if (median_score <= mine_score) return {};
    return {.what = decision::action::stop,
            .reason = std::string(options_.use_running_mean ? "running mean " : "best ") +
                      number_text(as_value(options_.mode, mine_score)) + " is worse than the median " +
                      number_text(as_value(options_.mode, median_score)) + " of " + std::to_string(means.size()) +
                      " other trials' running means at iteration " + std::to_string(iteration)};
  }

  void on_complete(trial_id) override {}  // a finished trial's results still count
  std::string_view name() const noexcept override { return "median_stopping"; }

private:
  using history = std::vector<std::pair<std::int64_t, double>>;  // (iteration, score)

  /// The mean score of the results from the grace period up to `iteration`.
  double running_mean(const history& results, std::int64_t iteration) const {
    double sum = 0;
    std::size_t n = 0;
    for (auto& [t, s] : results) {
      if (t >= options_.grace_period && t <= iteration) {
        sum += s;
        ++n;
      }
    }
    return n == 0 ? -std::numeric_limits<double>::infinity() : sum / static_cast<double>(n);
  }

  median_stopping_options options_;
  std::map<trial_id, history> results_;  // every trial's results, kept after it finishes
};

} // namespace

std::string_view to_string(decision::action a) noexcept {
  switch (a) {
  case decision::action::continue_: return "continue";
  case decision::action::stop: return "stop";
  case decision::action::exploit: return "exploit";
  }
  return "?";
}

std::unique_ptr<scheduler> make_fifo() { return std::make_unique<fifo>(); }

expected<std::unique_ptr<scheduler>> make_asha(asha_options options) {
  if (options.max_t <= 0) return invalid("ASHA needs max_t > 0, got " + std::to_string(options.max_t));
  if (options.grace_period <= 0 || options.grace_period > options.max_t)
    return invalid("ASHA needs 0 < grace_period <= max_t, got grace_period = " + std::to_string(options.grace_period) +
                   ", max_t = " + std::to_string(options.max_t));
  if (!(options.reduction_factor > 1) || !std::isfinite(options.reduction_factor))
    return invalid("ASHA needs a reduction_factor > 1, got " + number_text(options.reduction_factor));
  return std::unique_ptr<scheduler>(new asha(options));
}

expected<std::unique_ptr<scheduler>> make_median_stopping(median_stopping_options options) {
  if (options.grace_period < 0)
    return invalid("the median stopping rule needs grace_period >= 0, got " + std::to_string(options.grace_period));
  return std::unique_ptr<scheduler>(new median_stopping(options));
}

} // namespace celer::tune
