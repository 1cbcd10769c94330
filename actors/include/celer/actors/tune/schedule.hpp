#pragma once
/// Trial schedulers: what a running trial does after each reported result. FIFO (run to the
/// end), ASHA (Ray Tune's ASHAScheduler), the median stopping rule (Ray's
/// MedianStoppingRule) and population based training (Ray's PopulationBasedTraining). Pure
/// policy: the app runs trials as actors and acts on the decisions.
///
///   auto asha = celer::tune::make_asha({.mode = celer::tune::direction::maximize,
///                                       .max_t = 81, .grace_period = 1,
///                                       .reduction_factor = 3});
///   if (!asha) { std::cerr << asha.error().message(); return 1; }
///   (*asha)->on_add(id, p);
///   // ... each epoch of trial `id`:
///   auto d = (*asha)->on_result(id, /*iteration=*/epoch, accuracy);
///   if (d.what == celer::tune::decision::action::stop) { stop the trial; }
///   // ... when the trial ends, however it ends:
///   (*asha)->on_complete(id);
///
/// PBT's decisions also say when to keep a checkpoint (save_checkpoint) and when a trial
/// must take another's (exploit: load `source`'s checkpoint of `source_iteration`, go on
/// from that iteration with `new_params`). Every random choice comes from the seed.

#include <celer/actors/tune/search.hpp>
#include <celer/actors/tune/space.hpp>
#include <celer/error.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace celer::tune {

/// A trial's number in its experiment.
using trial_id = std::int64_t;

/// What the trial that reported a result does next.
struct decision {
  enum class action : unsigned char {
    continue_,  ///< keep training
    stop,       ///< stop now; the trial is finished (call on_complete)
    exploit,    ///< PBT: load source's checkpoint, take new_params, and keep training
  };
  action what = action::continue_;
  /// PBT: this trial is in the top quantile; save its checkpoint of this iteration and keep
  /// it until the trial's next perturbation, as others may exploit it.
  bool save_checkpoint = false;
  /// exploit: the trial whose checkpoint to copy, and that checkpoint's iteration (the
  /// exploiting trial goes on counting from there).
  trial_id source = -1;
  std::int64_t source_iteration = 0;
  /// exploit: the source's params, perturbed; the trial's params from now on.
  params new_params;
  /// Why, for the progress table and logs ("below the cutoff 0.71 at rung 4").
  std::string reason;
};

/// "continue", "stop" or "exploit".
[[nodiscard]] std::string_view to_string(decision::action a) noexcept;

/// Decides, result by result, whether trials go on. Not thread-safe: one caller (the tuning
/// driver actor) owns it. Iterations are the trial's own count of training steps (epochs),
/// 1 for the first result, increasing.
class scheduler {
public:
  virtual ~scheduler() = default;
  /// A new trial and its params (PBT needs them; the others ignore them).
  virtual void on_add(trial_id /*trial*/, const params& /*p*/) {}
  /// A result: the objective `value` after `iteration`. A NaN value counts as the worst.
  [[nodiscard]] virtual decision on_result(trial_id trial, std::int64_t iteration,
                                           double value) = 0;
  /// The trial finished (stopped, ended on its own, or failed).
  virtual void on_complete(trial_id trial) = 0;
  /// "fifo", "asha", "median_stopping" or "pbt".
  [[nodiscard]] virtual std::string_view name() const noexcept = 0;
};

/// Never stops a trial early.
[[nodiscard]] std::unique_ptr<scheduler> make_fifo();

/// ASHA's settings; the defaults are Ray's (time_attr = iterations).
struct asha_options {
  direction mode = direction::minimize;
  /// A trial stops when it reaches this many iterations.
  std::int64_t max_t = 100;
  /// The first rung: no trial stops before this many iterations.
  std::int64_t grace_period = 1;
  /// Rungs at grace_period * reduction_factor^k (below max_t); a trial at a rung goes on only
  /// if its value is in the top 1/reduction_factor of those recorded there so far.
  double reduction_factor = 4;
};

/// Asynchronous successive halving (Ray's ASHAScheduler with brackets = 1). A trial's result
/// at or past a rung it has not yet passed is compared with the (1 - 1/reduction_factor)
/// percentile (linear interpolation) of the values recorded at that rung by trials before it,
/// then recorded there; it stops if strictly worse. invalid_argument unless max_t > 0,
/// 0 < grace_period <= max_t and reduction_factor > 1.
[[nodiscard]] expected<std::unique_ptr<scheduler>> make_asha(asha_options options = {});

/// The median stopping rule's settings; the defaults are Ray's (its grace period is 60 of
/// its time unit, seconds by default: set one that suits iterations).
struct median_stopping_options {
  direction mode = direction::minimize;
  /// No trial stops before this iteration, and running means start here.
  std::int64_t grace_period = 60;
  /// How many other trials must have reached the iteration before the rule applies.
  std::size_t min_samples_required = 3;
  /// Compare the trial's running mean instead of its best value (Ray compares the best).
  bool use_running_mean = false;
};

/// Stops a trial at iteration t (t >= grace_period) whose best value so far is strictly worse
/// than the median, over the other trials that reached t, of their running means of the
/// values from grace_period to t (Ray's MedianStoppingRule, hard stop). invalid_argument for
/// a negative grace period.
[[nodiscard]] expected<std::unique_ptr<scheduler>> make_median_stopping(
  median_stopping_options options = {});

/// Population based training's settings; the defaults are Ray's.
struct pbt_options {
  direction mode = direction::minimize;
  /// A trial is considered for exploit and explore every this many iterations.
  std::int64_t perturbation_interval = 60;
  /// ... and not before this iteration.
  std::int64_t burn_in_period = 0;
  /// The bottom this fraction of trials exploit the top this fraction; in [0, 0.5].
  double quantile_fraction = 0.25;
  /// The chance that explore draws a parameter afresh instead of perturbing it.
  double resample_probability = 0.25;
  /// Reals (and integers, rounded) are multiplied by one of these when perturbed.
  std::vector<double> perturbation_factors = {1.2, 0.8};
  /// Seeds the scheduler's std::mt19937_64 (which top trial to copy, and explore).
  std::uint64_t seed = 0;
};

/// Asynchronous population based training (Ray's PopulationBasedTraining, synch = false).
/// When a trial reports at least perturbation_interval iterations after its last
/// perturbation, the live trials that have reported are ranked by their last such value: a
/// top-quantile trial is told to save its checkpoint; a bottom-quantile trial exploits a
/// top-quantile one chosen at random (if that one has a checkpoint), taking its params
/// perturbed by explore: for each parameter of `mutations`, with resample_probability a
/// fresh draw, otherwise reals and integers times a perturbation factor (kept within the
/// bounds: Ray lets them leave), categorical and grid values moved to a neighbour in their
/// list. Trials must be added with on_add (their params); results of others are ignored.
/// invalid_argument for a bad space or options.
[[nodiscard]] expected<std::unique_ptr<scheduler>> make_pbt(const search_space& mutations,
                                                           pbt_options options = {});

} // namespace celer::tune
