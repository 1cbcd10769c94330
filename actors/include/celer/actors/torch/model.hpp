#pragma once
/// The models the bundled apps train, and one epoch of training or evaluation over a
/// celer::actors::dataset: a LibTorch MLP and a small CNN, SGD/Adam/AdamW, cross-entropy.
/// Deterministic on the CPU: the batches' order comes from a seeded std::mt19937_64, and the
/// model's initial weights from torch's generator seeded by model_spec::seed.
///
///   celer::actors::model_spec spec{.kind = "mlp", .width = 128, .depth = 2, .dropout = 0.1};
///   auto net = celer::actors::make_model(spec, train.sample_shape, train.classes);
///   auto opt = celer::actors::make_optimizer(*net, {.name = "adam", .lr = 1e-3});
///   std::mt19937_64 order(7);
///   for (int epoch = 1; epoch <= 10; ++epoch) {
///     auto fit = celer::actors::train_epoch(*net, **opt, train, /*batch_size=*/64, order);
///     auto val = celer::actors::evaluate(*net, valid);
///     std::cout << epoch << " " << fit.loss << " " << val.accuracy << "\n";
///   }

#include <celer/actors/data.hpp>
#include <celer/error.hpp>

#include <torch/nn/modules/container/sequential.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace celer::actors {

/// What network to build.
struct model_spec {
  /// "mlp": depth hidden layers of width units (ReLU, dropout); "cnn": depth conv blocks
  /// (3×3 conv, ReLU, 2×2 max-pool) of width channels, then a width-unit layer. A cnn needs
  /// samples shaped {channels, H, W}; an 8×8 digit ({64}) is read as {1, 8, 8}.
  std::string kind = "mlp";
  int width = 128;
  int depth = 2;
  double dropout = 0.0;
  /// Seeds torch's generator for the initial weights.
  std::uint64_t seed = 0;
};

/// How to train it.
struct optimizer_spec {
  /// "sgd" (with momentum, Nesterov when momentum > 0), "adam" or "adamw".
  std::string name = "adam";
  double lr = 1e-3;
  double weight_decay = 0.0;
  double momentum = 0.9;
};

/// invalid_argument for an unknown kind, a width or depth below 1, dropout outside [0, 1),
/// or a cnn whose samples do not have the shape it needs.
[[nodiscard]] expected<torch::nn::Sequential> make_model(const model_spec& spec,
                                                         const std::vector<std::int64_t>& sample_shape,
                                                         int classes);

/// invalid_argument for an unknown name or lr <= 0.
[[nodiscard]] expected<std::unique_ptr<torch::optim::Optimizer>> make_optimizer(
  torch::nn::Sequential& model, const optimizer_spec& spec);
/// The same over any parameters (`model->parameters()` of any module, such as the
/// transformer of <celer/actors/torch/transformer.hpp>).
[[nodiscard]] expected<std::unique_ptr<torch::optim::Optimizer>> make_optimizer(
  std::vector<torch::Tensor> parameters, const optimizer_spec& spec);

/// One pass's figures.
struct epoch_stats {
  double loss = 0;      ///< mean cross-entropy per sample
  double accuracy = 0;  ///< fraction classified right
  std::int64_t samples = 0;
  double seconds = 0;
};

/// One epoch of minibatch training over `data` in an order drawn from `order`.
epoch_stats train_epoch(torch::nn::Sequential& model, torch::optim::Optimizer& optimizer,
                        const dataset& data, std::int64_t batch_size, std::mt19937_64& order);

/// Loss and accuracy over `data`, without training (dropout off, no gradients).
epoch_stats evaluate(torch::nn::Sequential& model, const dataset& data, std::int64_t batch_size = 512);

} // namespace celer::actors
