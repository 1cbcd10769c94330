// The synthetic trainable (synthetic.hpp).
#include "synthetic.hpp"

#include <celer/actors/tune/space.hpp>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include <unistd.h>

namespace celer::tune_app {
namespace {

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what); }

/// Keeps this thread busy until `ms` milliseconds have passed: the cost of an iteration, as
/// ray_tune_synthetic.py's spin() (a loop on time.perf_counter).
double spin(double ms) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto end = start + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double, std::milli>(ms));
  auto now = start;
  while (now < end) now = clock::now();
  return std::chrono::duration<double>(now - start).count();
}

} // namespace

double halton(std::uint64_t index, unsigned base) {
  double f = 1, r = 0;
  for (; index > 0; index /= base) {
    f /= base;
    r += f * static_cast<double>(index % base);
  }
  return r;
}

synthetic_point synthetic_point_of(std::int64_t i) {
  const auto index = static_cast<std::uint64_t>(i) + 1;
  return {.x = halton(index, 2), .y = halton(index, 3)};
}

double synthetic_score(synthetic_point p, std::int64_t iteration) {
  const double q = 1 - (p.x - 0.3) * (p.x - 0.3) - (p.y - 0.7) * (p.y - 0.7);
  return q * (1 - std::exp(-static_cast<double>(iteration) / 5));
}

synthetic_trial::synthetic_trial(const trial_spec& spec) : spec_(spec), failures_left_(spec.fail_times) {
  set_params(spec.params);
}

void synthetic_trial::set_params(const tune::params& p) {
  auto i = p.integer("i");
  auto cost = p.number("cost_ms");
  if (!i || *i < 0) fail("param i: " + (i ? "must be >= 0, not " + std::to_string(*i) : i.error().message()));
  if (!cost || !(*cost >= 0)) fail("param cost_ms: " + (cost ? "must be >= 0" : cost.error().message()));
  point_ = synthetic_point_of(*i);
  cost_ms_ = *cost;
}

epoch_metrics synthetic_trial::train_epoch() {
  // CELER_TUNE_INJECT_FAILURE, as for a model trial (trial.cpp).
  const bool failing_epoch = spec_.fail_at_epoch == iteration_ + 1;
  if (failing_epoch && spec_.fail_by_exit && ::getpid() != spec_.driver_pid && !celer::was_restarted()) {
    std::_Exit(3);  // the worker process dies: celer restarts the actor (max_restarts)
  }
  if (failing_epoch && failures_left_ > 0 && !spec_.fail_by_exit) {
    --failures_left_;
    fail("injected failure at epoch " + std::to_string(iteration_ + 1) + " (CELER_TUNE_INJECT_FAILURE)");
  }
  const double seconds = spin(cost_ms_);
  ++iteration_;
  return {.epoch = iteration_, .values = {{"score", synthetic_score(point_, iteration_)}}, .seconds = seconds};
}

checkpoint::snapshot synthetic_trial::save_state() {
  checkpoint::snapshot s;
  s.add_int("iteration", iteration_);
  s.set_step(iteration_);
  return s;
}

std::int64_t synthetic_trial::load_state(checkpoint::snapshot state, tune::params params) {
  set_params(params);
  if (state.entries().empty()) {
    iteration_ = 0;
  } else {
    auto saved = state.get_int("iteration");
    if (!saved) fail("not a synthetic trial's state: " + saved.error().message());
    iteration_ = *saved;
  }
  return iteration_;
}

std::unique_ptr<synthetic_trial> make_synthetic_trial(trial_spec spec) {
  return std::make_unique<synthetic_trial>(spec);
}

} // namespace celer::tune_app

CELER_REMOTE(celer::tune_app::make_synthetic_trial, &celer::tune_app::synthetic_trial::train_epoch,
             &celer::tune_app::synthetic_trial::save_state, &celer::tune_app::synthetic_trial::load_state);
