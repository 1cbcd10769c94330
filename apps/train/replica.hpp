#pragma once
// The model side of a trainer worker (worker.cpp): what it trains on (a dataset's rows or a
// text's windows) and the replica it trains (an MLP or CNN classifier, or the character-level
// transformer), with the forward pass in float32 or under LibTorch's CPU autocast to bfloat16.
// Internal to celer-train and, like worker.cpp, it includes LibTorch.
//
//   auto data = training_data::load(spec);                     // throws, naming the cause
//   replica model(spec, data);
//   auto loader = make_data_loader(data.source(), ...);
//   auto b = loader->next();
//   auto fit = model.forward_backward(*b, /*loss_scale=*/1.0);  // gradients add up in .grad()
//   auto val = model.evaluate(data);
//
// One owner (the worker actor); not thread-safe. Autocast is per thread in LibTorch, so
// workers that are threads of one process do not see each other's setting.
#include "worker.hpp"

#include <celer/actors/data.hpp>
#include <celer/actors/loader.hpp>
#include <celer/actors/text.hpp>
#include <celer/actors/torch/transformer.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace celer::train_app {

/// What a worker trains and validates on: rows (digits, fashion-mnist: a stratified 80/20
/// split) or a text (fortunes: 10% of the fortunes held out, whole ones, as windows of
/// `context` characters). The same on every worker.
struct training_data {
  actors::dataset train;
  actors::dataset valid;
  std::optional<actors::char_corpus> text;
  std::int64_t context = 0;

  /// Throws, naming the data and the package to install, when it cannot be read.
  static training_data load(const worker_spec& spec);
  /// The loader's source over the training part (rows, or non-overlapping windows); reads
  /// this object, which must outlive it.
  [[nodiscard]] std::unique_ptr<actors::batch_source> source() const;
  [[nodiscard]] std::int64_t train_samples() const;
  [[nodiscard]] std::int64_t valid_samples() const;
};

/// One micro-batch's figures.
struct micro_figures {
  /// The loss summed over predictions, predictions right, predictions made, samples.
  double loss_sum = 0;
  std::int64_t correct = 0;
  std::int64_t predictions = 0;
  std::int64_t samples = 0;
};

/// A model replica: the classifier of <celer/actors/torch/model.hpp> or the transformer of
/// <celer/actors/torch/transformer.hpp>, its parameters float32 whatever the precision.
class replica {
public:
  /// Builds the model spec names from `spec.config.seed` (under the process's model-building lock,
  /// held by the caller); throws naming what the config gets wrong.
  replica(const worker_spec& spec, const training_data& data);

  [[nodiscard]] std::vector<torch::Tensor> parameters() const;
  [[nodiscard]] torch::nn::Module& module();
  void train_mode();
  /// Forward (in bf16 under autocast when the spec asks), the mean cross-entropy (computed
  /// in float32), and backward of it times `loss_scale`, adding to each parameter's grad.
  micro_figures forward_backward(actors::batch& b, double loss_scale);
  /// Loss and accuracy over the validation part (text: next-character accuracy and bits
  /// per character), without gradients, in the same precision as training.
  validation evaluate(const training_data& data);

private:
  bool bf16_ = false;
  torch::nn::Sequential classifier_{nullptr};
  std::optional<actors::char_transformer> transformer_;
  std::vector<std::int64_t> sample_shape_;
};

} // namespace celer::train_app
