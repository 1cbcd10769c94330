// Population based training: Ray Tune's PopulationBasedTraining, asynchronous (synch=False).
#include "draw.hpp"
#include "score.hpp"

#include <celer/actors/tune/schedule.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

namespace celer::tune {
namespace {

error invalid(std::string message) { return error(error_code::invalid_argument, std::move(message)); }

class pbt final : public scheduler {
public:
  pbt(search_space mutations, pbt_options options)
    : mutations_(std::move(mutations)), options_(std::move(options)), rng_(options_.seed) {}

  void on_add(trial_id trial, const params& p) override {
    if (!members_.contains(trial)) order_.push_back(trial);
    member& m = members_[trial];
    m = member{};
    m.config = p;
    // As Ray does, a parameter to mutate that the trial lacks is drawn from its distribution.
    for (auto& param : mutations_.parameters())
      if (!m.config.find(param.name)) m.config.set(param.name, detail::draw(param, rng_));
  }

  decision on_result(trial_id trial, std::int64_t iteration, double value) override {
    auto found = members_.find(trial);
    if (found == members_.end()) return {.reason = "not added to PBT (on_add): ignored"};
    member& m = found->second;
    if (iteration < options_.burn_in_period) return {};
    if (iteration - m.last_perturbation < options_.perturbation_interval) return {};

    m.last_score = detail::score(options_.mode, value);
    m.last_iteration = iteration;
    m.last_perturbation = iteration;
    auto [lower, upper] = quantiles();

    decision d;
    m.checkpoint.reset();
    if (std::find(upper.begin(), upper.end(), trial) != upper.end()) {
      m.checkpoint = iteration;
      d.save_checkpoint = true;
      d.reason = "in the top " + std::to_string(upper.size()) + " of " + std::to_string(ranked_) + ": keep its checkpoint";
    }
    if (std::find(lower.begin(), lower.end(), trial) == lower.end()) return d;

    const trial_id source = upper[detail::below(rng_, upper.size())];
    const member& from = members_.at(source);
    if (!from.checkpoint) {
      d.reason = "in the bottom " + std::to_string(lower.size()) + ", but trial " + std::to_string(source) +
                 " has no checkpoint to copy yet";
      return d;
    }
    d.what = decision::action::exploit;
    d.source = source;
    d.source_iteration = *from.checkpoint;
    d.new_params = explore(from.config);
    d.reason = "in the bottom " + std::to_string(lower.size()) + " of " + std::to_string(ranked_) +
               ": copies trial " + std::to_string(source) + " at iteration " + std::to_string(d.source_iteration) +
               " with " + to_string(d.new_params);
    m.config = d.new_params;
    // The trial goes on from the copied checkpoint, so it takes the source's clock.
    m.last_perturbation = from.last_perturbation;
    m.last_iteration = from.last_iteration;
    return d;
  }

  void on_complete(trial_id trial) override {
    if (auto it = members_.find(trial); it != members_.end()) it->second.finished = true;
  }

  std::string_view name() const noexcept override { return "pbt"; }

private:
  struct member {
    params config;
    std::optional<double> last_score;        // at its last perturbation
    std::optional<std::int64_t> checkpoint;  // kept when it was last in the top quantile
    std::int64_t last_perturbation = 0;
    std::int64_t last_iteration = 0;
    bool finished = false;
  };

  /// The bottom and top quantile_fraction of the live trials that have a score, worst first
  /// and best last; ties keep the order the trials were added. Empty when fewer than two.
  std::pair<std::vector<trial_id>, std::vector<trial_id>> quantiles() {
    std::vector<trial_id> ranked;
    for (auto id : order_) {
      const member& m = members_.at(id);
      if (m.last_score && !m.finished) ranked.push_back(id);
    }
    std::stable_sort(ranked.begin(), ranked.end(),
                     [&](auto a, auto b) { return *members_.at(a).last_score < *members_.at(b).last_score; });
    ranked_ = ranked.size();
    if (ranked.size() <= 1) return {};
    auto k = static_cast<std::size_t>(std::ceil(static_cast<double>(ranked.size()) * options_.quantile_fraction));
    k = std::min(k, ranked.size() / 2);
    return {std::vector<trial_id>(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(k)),
            std::vector<trial_id>(ranked.end() - static_cast<std::ptrdiff_t>(k), ranked.end())};
  }

  /// Ray's _explore: each parameter of the mutation space drawn afresh with
  /// resample_probability (or when its value is not one of its choices), else reals and
  /// integers scaled by a perturbation factor, choices moved one place left or right.
  params explore(const params& config) {
    params out = config;
    for (auto& param : mutations_.parameters()) {
      const value* current = config.find(param.name);
      if (!param.numeric()) {
        const auto index = current ? param.index_of(*current) : std::nullopt;
        if (!index || detail::unit(rng_) < options_.resample_probability) {
          out.set(param.name, detail::draw(param, rng_));
          continue;
        }
        const bool left = detail::below(rng_, 2) == 0;
        const std::size_t last = param.choices.size() - 1;
        const std::size_t moved = left ? (*index == 0 ? 0 : *index - 1) : std::min(*index + 1, last);
        out.set(param.name, param.choices[moved]);
        continue;
      }
      if (!current || std::holds_alternative<std::string>(*current) ||
          detail::unit(rng_) < options_.resample_probability) {
        out.set(param.name, detail::draw(param, rng_));
        continue;
      }
      const double factor = options_.perturbation_factors[detail::below(rng_, options_.perturbation_factors.size())];
      // Kept within the declared bounds (Ray lets a value drift outside them).
      double x = std::clamp(detail::as_number(*current) * factor, param.low, param.high);
      if (param.integral()) {
        out.set(param.name, static_cast<std::int64_t>(std::clamp(std::nearbyint(x), param.low, param.high)));
      } else {
        out.set(param.name, x);
      }
    }
    return out;
  }

  search_space mutations_;
  pbt_options options_;
  detail::rng_type rng_;
  std::map<trial_id, member> members_;
  std::vector<trial_id> order_;  // in the order added
  std::size_t ranked_ = 0;       // how many trials the last ranking held
};

} // namespace

expected<std::unique_ptr<scheduler>> make_pbt(const search_space& mutations, pbt_options options) {
  if (auto ok = mutations.validate(); !ok) return ok.error();
  if (options.perturbation_interval <= 0)
    return invalid("PBT needs perturbation_interval > 0, got " + std::to_string(options.perturbation_interval));
  if (options.burn_in_period < 0)
    return invalid("PBT needs burn_in_period >= 0, got " + std::to_string(options.burn_in_period));
  if (!(options.quantile_fraction >= 0 && options.quantile_fraction <= 0.5))
    return invalid("PBT needs quantile_fraction in [0, 0.5], got " + std::to_string(options.quantile_fraction));
  if (!(options.resample_probability >= 0 && options.resample_probability <= 1))
    return invalid("PBT needs resample_probability in [0, 1], got " + std::to_string(options.resample_probability));
  if (options.perturbation_factors.empty()) return invalid("PBT needs at least one perturbation factor");
  for (double f : options.perturbation_factors)
    if (!(f > 0) || !std::isfinite(f))
      return invalid("PBT's perturbation factors must be finite and > 0, got " + std::to_string(f));
  return std::unique_ptr<scheduler>(new pbt(mutations, std::move(options)));
}

} // namespace celer::tune
