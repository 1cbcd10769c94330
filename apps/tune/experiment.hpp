#pragma once
// What an experiment is made of, as the driver, the progress table, the files and the
// report see it: trials, their states and their epochs' results. No runtime calls, no
// LibTorch.
#include "metrics.hpp"

#include <celer/actors/tune.hpp>
#include <celer/error.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace celer::tune_app {

/// A trial's life: PENDING (waiting for resources), RUNNING, and one of the ends:
/// TERMINATED (ran max_epochs), STOPPED (the scheduler stopped it early) or ERROR (failed
/// more than max_failures times).
enum class trial_state : unsigned char { pending, running, terminated, stopped, error };

/// "PENDING", "RUNNING", "TERMINATED", "STOPPED" or "ERROR".
[[nodiscard]] std::string_view to_string(trial_state s) noexcept;
[[nodiscard]] std::optional<trial_state> trial_state_from(std::string_view s) noexcept;
[[nodiscard]] inline bool finished(trial_state s) noexcept {
  return s == trial_state::terminated || s == trial_state::stopped || s == trial_state::error;
}

/// One epoch of one trial, and how the trial came to it: a line of its result.jsonl.
struct epoch_result : epoch_metrics {
  /// Set on the first epoch after the trial took a saved state: why ("resume", "restart"
  /// after a failure, "pbt" exploit), whose state (a trial id) and of which epoch.
  std::string restored_why;
  tune::trial_id restored_trial = -1;
  std::int64_t restored_epoch = 0;
  /// Set when the trial's params changed before this epoch (PBT's explore).
  std::optional<tune::params> params;
};

/// One line of JSON, without the newline.
[[nodiscard]] std::string to_json_line(const epoch_result& r);
/// Reads what to_json_line wrote; invalid_argument for anything else.
[[nodiscard]] expected<epoch_result> epoch_result_from_json(std::string_view line);

/// The metric to optimise and which way.
struct objective {
  std::string metric = "val_accuracy";
  tune::direction mode = tune::direction::maximize;

  /// The metric's value in a result; NaN when the result has no such figure.
  [[nodiscard]] double of(const epoch_result& r) const;
  /// Whether `a` is strictly better than `b` (NaN is worst).
  [[nodiscard]] bool better(double a, double b) const;
};

/// A trial as it stands: what the table shows, the CSV holds and the report draws.
struct trial_summary {
  tune::trial_id id = 0;
  trial_state state = trial_state::pending;
  /// The params it runs with now (PBT may have changed them; params.json has the first).
  tune::params params;
  std::vector<epoch_result> results;
  /// Why it ended (the scheduler's reason, or the error), or the last thing that happened.
  std::string reason;
  int failures = 0;

  /// The index of its best result, if any.
  [[nodiscard]] std::optional<std::size_t> best_index(const objective& o) const;
  [[nodiscard]] std::optional<double> best(const objective& o) const;
  [[nodiscard]] std::optional<double> last(const objective& o) const;
};

/// The trial with the best result, if any has one.
[[nodiscard]] const trial_summary* best_trial(const std::vector<trial_summary>& trials, const objective& o);

/// What the tuning cost beyond the trials' own compute, counted as
/// bench/peers/ray_tune_synthetic.py counts Ray Tune's: the CPU-seconds the run held (wall
/// time x the CPUs its trials hold at once) less the compute the trials are known to need
/// (each iteration's cost), per trial and per iteration. Known only for the synthetic
/// trainable, whose iterations cost cost_ms each.
struct tuning_overhead {
  double wall_seconds = 0;
  /// The CPUs the trials hold at once: trials at once x cpus_per_trial (Ray's num_cpus).
  double cpus = 0;
  std::size_t trials = 0;
  std::size_t iterations = 0;
  /// The sum over trials of iterations x cost_ms.
  double compute_seconds = 0;

  /// wall_seconds x cpus - compute_seconds.
  [[nodiscard]] double cpu_seconds() const { return wall_seconds * cpus - compute_seconds; }
  [[nodiscard]] double per_trial_ms() const { return trials > 0 ? 1000 * cpu_seconds() / static_cast<double>(trials) : 0; }
  [[nodiscard]] double per_iteration_ms() const {
    return iterations > 0 ? 1000 * cpu_seconds() / static_cast<double>(iterations) : 0;
  }
};

/// The overhead of synthetic trials (each iteration costing the trial's cost_ms param).
[[nodiscard]] tuning_overhead synthetic_overhead(const std::vector<trial_summary>& trials, double wall_seconds,
                                                 double cpus);
/// "64 trials, 862 iterations in 11.2 s on 2 CPUs (17.2 s of compute): overhead 82 ms per
/// trial, 6.1 ms per iteration", as ray_tune_synthetic.py prints it.
[[nodiscard]] std::string to_string(const tuning_overhead& o);

/// "trial_0007".
[[nodiscard]] std::string trial_name(tune::trial_id id);

/// A duration as "1m05s" / "12.3s".
[[nodiscard]] std::string format_duration(double seconds);

/// A value as the table prints it: reals to 4 significant digits, strings bare.
[[nodiscard]] std::string format_value(const tune::value& v);

} // namespace celer::tune_app
