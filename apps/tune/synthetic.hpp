#pragma once
// The synthetic trainable (`data: synthetic`): no model and no data, a known learning curve
// and a fixed compute cost per iteration, to measure what the tuning itself costs against
// Ray Tune running the same trainable (bench/peers/ray_tune_synthetic.py; docs/benchmarks.md,
// "celer-tune against Ray Tune").
//
// A trial's params are `i` and `cost_ms`. Its point (x, y) is the Halton sequence (bases 2
// and 3) at index i + 1; after iteration t its score is q(x, y) * (1 - exp(-t / 5)), with
// q = 1 - (x - 0.3)^2 - (y - 0.7)^2; each iteration first keeps a CPU busy for cost_ms.
//
//   auto t = celer::actor(make_synthetic_trial).options({.num_cpus = 1}).remote(spec);
//   epoch_metrics m = celer::get(t.task(&synthetic_trial::train_epoch).remote());
//   m.value("score");   // 1 - 0.2^2 - (1/3 - 0.7)^2, times 1 - exp(-1/5), for i = 0
//
// Its calls are the model trial's (trial.hpp), so that the driver runs both alike
// (trial_actor.hpp): a trial's state is its iteration count, and checkpoints, restarts after a
// failure and --resume work as for a model.
#include "metrics.hpp"
#include "trial.hpp"

#include <celer/celer.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace celer::tune_app {

/// The radical inverse of `index` in `base` (>= 2): a coordinate of the Halton sequence.
[[nodiscard]] double halton(std::uint64_t index, unsigned base);

struct synthetic_point {
  double x = 0;
  double y = 0;
};

/// Param i's point: the Halton sequence, bases 2 and 3, at index i + 1 (index 0 is the
/// origin for every base, so it is skipped, as Ray's script skips it).
[[nodiscard]] synthetic_point synthetic_point_of(std::int64_t i);

/// The score at `p` after `iteration` iterations.
[[nodiscard]] double synthetic_score(synthetic_point p, std::int64_t iteration);

/// The synthetic trial actor. Its calls run one at a time, in order, as a model trial's.
class synthetic_trial {
public:
  /// Reads i and cost_ms from the spec's params; throws when one is missing or invalid.
  explicit synthetic_trial(const trial_spec& spec);

  /// Keeps the CPU busy for cost_ms (a spin on steady_clock: the trial's compute), then
  /// reports the next iteration's score; `seconds` is the time spun.
  epoch_metrics train_epoch();
  /// The iteration count, the snapshot's one entry ("iteration") and its step: all the state
  /// a synthetic trial has.
  checkpoint::snapshot save_state();
  /// Takes a state save_state made (this trial's, or another's for PBT) and the params to go
  /// on with. An empty snapshot: iteration 0. Returns the iteration the trial is at.
  std::int64_t load_state(checkpoint::snapshot state, tune::params params);

private:
  void set_params(const tune::params& p);

  trial_spec spec_;
  synthetic_point point_;
  double cost_ms_ = 0;
  std::int64_t iteration_ = 0;
  int failures_left_ = 0;
};

/// The actor's factory.
std::unique_ptr<synthetic_trial> make_synthetic_trial(trial_spec spec);

} // namespace celer::tune_app
