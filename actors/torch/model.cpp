// The apps' models and their training loop (<celer/actors/torch/model.hpp>).
#include <celer/actors/torch/model.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <numeric>

namespace celer::actors {
namespace {

/// The samples as one tensor shaped {N, sample_shape...}, over the dataset's own floats (no
/// copy; the dataset outlives every use in this file).
torch::Tensor features_of(const dataset& d, const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> sizes{static_cast<std::int64_t>(d.size())};
  sizes.insert(sizes.end(), shape.begin(), shape.end());
  return torch::from_blob(const_cast<float*>(d.x.data()), sizes, torch::kFloat);
}

/// The shape a model reads its samples in: a cnn reads a flat square sample as one channel.
std::vector<std::int64_t> input_shape(const model_spec& spec, const std::vector<std::int64_t>& sample) {
  if (spec.kind == "cnn" && sample.size() == 1) {
    const auto side = static_cast<std::int64_t>(std::lround(std::sqrt(static_cast<double>(sample[0]))));
    if (side * side == sample[0]) return {1, side, side};
  }
  return sample;
}

} // namespace

expected<torch::nn::Sequential> make_model(const model_spec& spec,
                                           const std::vector<std::int64_t>& sample_shape, int classes) {
  if (spec.width < 1 || spec.depth < 1) {
    return error(error_code::invalid_argument, "a model needs width >= 1 and depth >= 1");
  }
  if (spec.dropout < 0 || spec.dropout >= 1) {
    return error(error_code::invalid_argument, "dropout must be in [0, 1), not " + std::to_string(spec.dropout));
  }
  if (classes < 2) return error(error_code::invalid_argument, "a classifier needs at least 2 classes");
  torch::manual_seed(spec.seed);
  torch::nn::Sequential net;
  const auto shape = input_shape(spec, sample_shape);
  if (spec.kind == "mlp") {
    std::int64_t in = 1;
    for (auto d : shape) in *= d;
    net->push_back(torch::nn::Flatten());
    for (int i = 0; i < spec.depth; ++i) {
      net->push_back(torch::nn::Linear(in, spec.width));
      net->push_back(torch::nn::ReLU());
      if (spec.dropout > 0) net->push_back(torch::nn::Dropout(spec.dropout));
      in = spec.width;
    }
    net->push_back(torch::nn::Linear(in, classes));
  } else if (spec.kind == "cnn") {
    if (shape.size() != 3) {
      return error(error_code::invalid_argument,
                   "a cnn needs samples shaped {channels, height, width} (or a flat square image)");
    }
    if (shape != sample_shape) {
      net->push_back(torch::nn::Unflatten(torch::nn::UnflattenOptions(1, shape)));
    }
    std::int64_t channels = shape[0];
    std::int64_t h = shape[1];
    std::int64_t w = shape[2];
    for (int i = 0; i < spec.depth; ++i) {
      if (h < 2 || w < 2) {
        return error(error_code::invalid_argument,
                     "a cnn of depth " + std::to_string(spec.depth) + " halves " +
                       std::to_string(shape[1]) + "x" + std::to_string(shape[2]) + " images to nothing");
      }
      net->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(channels, spec.width, 3).padding(1)));
      net->push_back(torch::nn::ReLU());
      net->push_back(torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(2)));
      channels = spec.width;
      h /= 2;
      w /= 2;
    }
    net->push_back(torch::nn::Flatten());
    if (spec.dropout > 0) net->push_back(torch::nn::Dropout(spec.dropout));
    net->push_back(torch::nn::Linear(channels * h * w, spec.width));
    net->push_back(torch::nn::ReLU());
    net->push_back(torch::nn::Linear(spec.width, classes));
  } else {
    return error(error_code::invalid_argument, "unknown model kind \"" + spec.kind + "\" (mlp or cnn)");
  }
  return net;
}

expected<std::unique_ptr<torch::optim::Optimizer>> make_optimizer(torch::nn::Sequential& model,
                                                                  const optimizer_spec& spec) {
  return make_optimizer(model->parameters(), spec);
}

expected<std::unique_ptr<torch::optim::Optimizer>> make_optimizer(std::vector<torch::Tensor> parameters,
                                                                  const optimizer_spec& spec) {
  if (!(spec.lr > 0)) return error(error_code::invalid_argument, "the learning rate must be > 0");
  if (spec.name == "sgd") {
    return std::unique_ptr<torch::optim::Optimizer>(std::make_unique<torch::optim::SGD>(
      std::move(parameters), torch::optim::SGDOptions(spec.lr)
                               .momentum(spec.momentum)
                               .nesterov(spec.momentum > 0)
                               .weight_decay(spec.weight_decay)));
  }
  if (spec.name == "adam") {
    return std::unique_ptr<torch::optim::Optimizer>(std::make_unique<torch::optim::Adam>(
      std::move(parameters), torch::optim::AdamOptions(spec.lr).weight_decay(spec.weight_decay)));
  }
  if (spec.name == "adamw") {
    return std::unique_ptr<torch::optim::Optimizer>(std::make_unique<torch::optim::AdamW>(
      std::move(parameters), torch::optim::AdamWOptions(spec.lr).weight_decay(spec.weight_decay)));
  }
  return error(error_code::invalid_argument, "unknown optimiser \"" + spec.name + "\" (sgd, adam or adamw)");
}

epoch_stats train_epoch(torch::nn::Sequential& model, torch::optim::Optimizer& optimizer,
                        const dataset& data, std::int64_t batch_size, std::mt19937_64& order) {
  const auto start = std::chrono::steady_clock::now();
  model->train();
  const auto x = features_of(data, data.sample_shape);
  const auto y = torch::from_blob(const_cast<std::int64_t*>(data.y.data()),
                                  {static_cast<std::int64_t>(data.size())}, torch::kLong);
  std::vector<std::int64_t> perm(data.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), order);
  const auto index = torch::from_blob(perm.data(), {static_cast<std::int64_t>(perm.size())}, torch::kLong);
  epoch_stats s;
  double loss_sum = 0;
  std::int64_t right = 0;
  for (std::int64_t first = 0; first < static_cast<std::int64_t>(perm.size()); first += batch_size) {
    const auto rows = index.slice(0, first, std::min<std::int64_t>(first + batch_size, index.size(0)));
    const auto bx = x.index_select(0, rows);
    const auto by = y.index_select(0, rows);
    optimizer.zero_grad();
    const auto out = model->forward(bx);
    const auto loss = torch::nn::functional::cross_entropy(out, by);
    loss.backward();
    optimizer.step();
    loss_sum += loss.item<double>() * static_cast<double>(rows.size(0));
    right += out.argmax(1).eq(by).sum().item<std::int64_t>();
    s.samples += rows.size(0);
  }
  s.loss = s.samples > 0 ? loss_sum / static_cast<double>(s.samples) : 0;
  s.accuracy = s.samples > 0 ? static_cast<double>(right) / static_cast<double>(s.samples) : 0;
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return s;
}

epoch_stats evaluate(torch::nn::Sequential& model, const dataset& data, std::int64_t batch_size) {
  const auto start = std::chrono::steady_clock::now();
  torch::NoGradGuard no_grad;
  model->eval();
  const auto x = features_of(data, data.sample_shape);
  const auto y = torch::from_blob(const_cast<std::int64_t*>(data.y.data()),
                                  {static_cast<std::int64_t>(data.size())}, torch::kLong);
  epoch_stats s;
  double loss_sum = 0;
  std::int64_t right = 0;
  for (std::int64_t first = 0; first < x.size(0); first += batch_size) {
    const auto bx = x.slice(0, first, std::min<std::int64_t>(first + batch_size, x.size(0)));
    const auto by = y.slice(0, first, std::min<std::int64_t>(first + batch_size, y.size(0)));
    const auto out = model->forward(bx);
    loss_sum += torch::nn::functional::cross_entropy(out, by, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum)).item<double>();
    right += out.argmax(1).eq(by).sum().item<std::int64_t>();
    s.samples += bx.size(0);
  }
  s.loss = s.samples > 0 ? loss_sum / static_cast<double>(s.samples) : 0;
  s.accuracy = s.samples > 0 ? static_cast<double>(right) / static_cast<double>(s.samples) : 0;
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  model->train();
  return s;
}

} // namespace celer::actors
