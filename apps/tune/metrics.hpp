#pragma once
// What a trial reports after one epoch: the trial actor returns it (trial.hpp,
// synthetic.hpp) and the experiment records it, with how the trial got there, as a line of
// result.jsonl (experiment.hpp's epoch_result).

#include <celer/codec.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace celer::tune_app {

/// One epoch's figures.
struct epoch_metrics {
  std::int64_t epoch = 0;
  /// The figures the trainable reports, by name, in the order it reports them: a model
  /// trial's train_loss, train_accuracy, val_loss and val_accuracy, a synthetic trial's score
  /// (config.hpp lists each trainable's). The experiment's metric is one of them.
  std::vector<std::pair<std::string, double>> values;
  /// Training and evaluation time (the synthetic trainable: its spin).
  double seconds = 0;

  /// The figure named `name`; NaN when the trainable does not report it.
  [[nodiscard]] double value(std::string_view name) const {
    for (const auto& [n, v] : values)
      if (n == name) return v;
    return std::numeric_limits<double>::quiet_NaN();
  }
  MSGPACK_DEFINE(epoch, values, seconds)
};

} // namespace celer::tune_app
