#pragma once
// A trial's actor, whichever trainable it runs: a model trial (trial.hpp) or a synthetic one
// (synthetic.hpp), chosen by the spec's data. The driver makes the same calls on either:
//
//   trial_actor a = trial_actor::create(spec, {.num_cpus = 1, .max_restarts = 1});
//   object_ref<epoch_metrics> m = a.train_epoch();
//   object_ref<checkpoint::snapshot> state = a.save_state();
//   kill(a);
#include "synthetic.hpp"
#include "trial.hpp"

#include <celer/celer.hpp>

#include <cstdint>
#include <string>
#include <variant>

namespace celer::tune_app {

class trial_actor {
public:
  trial_actor() = default;
  /// Creates the actor: a synthetic trial when `spec.data` is "synthetic", else a model trial.
  /// Throws as celer::actor(...).remote() does when celer refuses it.
  [[nodiscard]] static trial_actor create(const trial_spec& spec, const actor_options& options);

  /// The calls of trial.hpp (and synthetic.hpp), on whichever actor this is.
  [[nodiscard]] object_ref<epoch_metrics> train_epoch() const;
  [[nodiscard]] object_ref<checkpoint::snapshot> save_state() const;
  [[nodiscard]] object_ref<std::int64_t> load_state(checkpoint::snapshot state, tune::params params) const;

  /// Stops the actor now (celer::kill).
  friend void kill(const trial_actor& a);

private:
  std::variant<actor_handle<trial>, actor_handle<synthetic_trial>> handle_;
};

void kill(const trial_actor& a);

} // namespace celer::tune_app
