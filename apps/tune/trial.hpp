#pragma once
// A trial is a celer actor: it loads its data, builds its model and optimiser from its
// params, and trains one epoch per call. The driver holds a handle and calls it:
//
//   auto t = celer::actor(make_trial).options({.num_cpus = 1, .max_restarts = 1}).remote(spec);
//   epoch_metrics m = celer::get(t.task(&trial::train_epoch).remote());
//   checkpoint::snapshot state = celer::get(t.task(&trial::save_state).remote());
//   celer::get(t.task(&trial::load_state).remote(state, params));   // resume, PBT exploit
//
// This header names no LibTorch type (the trial's model lives behind a pointer), so the
// driver compiles without LibTorch's headers; trial.cpp is the one file that includes them.
#include "metrics.hpp"

#include <celer/actors/checkpoint.hpp>
#include <celer/actors/tune/space.hpp>
#include <celer/celer.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace celer::tune_app {

/// What a trial is made from: the factory's one argument.
struct trial_spec {
  std::int64_t id = 0;
  /// Every param: lr, width, depth, dropout, weight_decay, momentum, batch_size, optimizer,
  /// model (the synthetic trial's: i, cost_ms).
  tune::params params;
  /// "digits" or "fashion-mnist", and how many samples of it (0: all).
  std::string data = "digits";
  std::uint64_t limit = 0;
  /// torch::set_num_threads: at least 1, the trial's CPUs rounded.
  int threads = 1;
  /// Seeds the initial weights and the batches' order (with the trial's id).
  std::uint64_t seed = 0;
  /// For tests: throw at this epoch (0: never), this many times; with `fail_by_exit`, end
  /// the worker process instead, when the trial runs in one (a cluster), not the driver's.
  std::int64_t fail_at_epoch = 0;
  int fail_times = 0;
  bool fail_by_exit = false;
  std::int64_t driver_pid = 0;
  MSGPACK_DEFINE(id, params, data, limit, threads, seed, fail_at_epoch, fail_times, fail_by_exit, driver_pid)
};


/// The trial actor. Runs on a worker (a thread of the driver when embedded, a process on a
/// cluster); its calls run one at a time, in order.
class trial {
public:
  /// Loads the data (a stratified 80/20 split, the same for every trial), builds the model
  /// and optimiser. Throws, naming the cause, when the data is missing or the params do not
  /// make a model (a cnn too deep for 8x8 digits).
  explicit trial(const trial_spec& spec);
  ~trial();
  trial(const trial&) = delete;
  trial& operator=(const trial&) = delete;

  /// Trains one epoch and evaluates on the validation split.
  epoch_metrics train_epoch();
  /// Model (one entry per tensor), optimiser, batch-order generator, LibTorch's generator,
  /// the epoch count and the params, as checkpoint entries (<celer/actors/torch/checkpoint.hpp>).
  checkpoint::snapshot save_state();
  /// Takes a state save_state made (this trial's, or another's for PBT) and `params`
  /// (the params to go on with: the optimiser's lr, weight_decay and momentum and the batch
  /// size are set from them). A snapshot without entries: start again from the initial
  /// weights. Returns the epoch the trial is at.
  std::int64_t load_state(checkpoint::snapshot state, tune::params params);

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// The actor's factory.
std::unique_ptr<trial> make_trial(trial_spec spec);

} // namespace celer::tune_app
