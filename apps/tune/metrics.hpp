#pragma once
// What a trial reports after one epoch: the trial actor returns it (trial.hpp) and the
// experiment records it, with how the trial got there, as a line of result.jsonl
// (experiment.hpp's epoch_result).

#include <celer/codec.hpp>

#include <cstdint>

namespace celer::tune_app {

/// One epoch's figures.
struct epoch_metrics {
  std::int64_t epoch = 0;
  double train_loss = 0;
  double train_accuracy = 0;
  double val_loss = 0;
  double val_accuracy = 0;
  /// Training and evaluation time.
  double seconds = 0;
  MSGPACK_DEFINE(epoch, train_loss, train_accuracy, val_loss, val_accuracy, seconds)
};

} // namespace celer::tune_app
