// A trial's actor, model or synthetic (trial_actor.hpp).
#include "trial_actor.hpp"

#include <type_traits>

namespace celer::tune_app {
namespace {

/// The actor class of a handle (trial or synthetic_trial), whose methods have the same names.
template <class Handle>
using actor_class = typename std::decay_t<Handle>::actor_type;

} // namespace

trial_actor trial_actor::create(const trial_spec& spec, const actor_options& options) {
  trial_actor a;
  if (spec.data == "synthetic") a.handle_ = actor(make_synthetic_trial).options(options).remote(spec);
  else a.handle_ = actor(make_trial).options(options).remote(spec);
  return a;
}

object_ref<epoch_metrics> trial_actor::train_epoch() const {
  return std::visit([](const auto& h) { return h.task(&actor_class<decltype(h)>::train_epoch).remote(); }, handle_);
}

object_ref<checkpoint::snapshot> trial_actor::save_state() const {
  return std::visit([](const auto& h) { return h.task(&actor_class<decltype(h)>::save_state).remote(); }, handle_);
}

object_ref<std::int64_t> trial_actor::load_state(checkpoint::snapshot state, tune::params params) const {
  return std::visit(
    [&](const auto& h) {
      return h.task(&actor_class<decltype(h)>::load_state).remote(std::move(state), std::move(params));
    },
    handle_);
}

void kill(const trial_actor& a) {
  std::visit([](const auto& h) { celer::kill(h); }, a.handle_);
}

} // namespace celer::tune_app
