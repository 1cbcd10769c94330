// The model side of a trainer worker (replica.hpp).
#include "replica.hpp"

#include <celer/actors/torch/model.hpp>

#include <ATen/autocast_mode.h>

#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>

namespace celer::train_app {
namespace {

/// The validation split of images: 20% of each class; of text: 10% of the fortunes. The
/// same split on every worker of every run.
constexpr double validation_fraction = 0.2;
constexpr double text_validation_fraction = 0.1;
constexpr std::uint64_t split_seed = 20240601;
/// Windows a validation forward pass takes at once.
constexpr std::int64_t eval_batch = 64;

[[nodiscard]] std::runtime_error failure(const std::string& what) { return std::runtime_error(what); }

/// Within its scope, this thread's forward passes run under LibTorch's CPU autocast to
/// bfloat16 (matrix products and convolutions in bf16, reductions and norms in float32), as
/// Python's `torch.autocast("cpu", dtype=torch.bfloat16)` does; when `on` is false, nothing.
/// Restores the thread's previous setting and, leaving the outermost scope, drops the
/// cached bf16 copies of the weights (they change at each optimiser step).
class cpu_autocast {
public:
  explicit cpu_autocast(bool on) : on_(on) {
    if (!on_) return;
    was_enabled_ = at::autocast::is_cpu_enabled();
    was_dtype_ = at::autocast::get_autocast_cpu_dtype();
    at::autocast::set_cpu_enabled(true);
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    at::autocast::increment_nesting();
  }
  ~cpu_autocast() {
    if (!on_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_cpu_enabled(was_enabled_);
    at::autocast::set_autocast_cpu_dtype(was_dtype_);
  }
  cpu_autocast(const cpu_autocast&) = delete;
  cpu_autocast& operator=(const cpu_autocast&) = delete;

private:
  bool on_;
  bool was_enabled_ = false;
  at::ScalarType was_dtype_ = at::kBFloat16;
};

torch::Tensor ids(std::vector<std::int64_t>& v, std::int64_t rows, std::int64_t context) {
  return torch::from_blob(v.data(), {rows, context}, torch::kLong);
}

} // namespace

training_data training_data::load(const worker_spec& spec) {
  training_data d;
  if (spec.config.data == "fortunes") {
    auto docs = actors::load_fortunes();
    if (!docs) throw failure("cannot load the fortunes text: " + docs.error().message());
    if (spec.config.limit > 0 && spec.config.limit < docs->size()) docs->resize(spec.config.limit);
    auto corpus = actors::make_char_corpus(*docs, text_validation_fraction, split_seed, "fortunes");
    if (!corpus) throw failure("cannot split the fortunes text: " + corpus.error().message());
    d.context = spec.config.context;
    if (static_cast<std::int64_t>(corpus->validation.size()) <= d.context)
      throw failure("the fortunes' validation text (" + std::to_string(corpus->validation.size()) +
                    " characters) is not longer than one window of " + std::to_string(d.context) +
                    ": raise limit or lower context");
    d.text.emplace(std::move(*corpus));
    return d;
  }
  auto all = actors::load_dataset(spec.config.data, spec.config.limit);
  if (!all) throw failure("cannot load the " + spec.config.data + " data: " + all.error().message());
  auto [train, valid] = actors::split(*all, validation_fraction, split_seed);
  d.train = std::move(train);
  d.valid = std::move(valid);
  return d;
}

std::unique_ptr<actors::batch_source> training_data::source() const {
  return text ? actors::text_source(text->train, context) : actors::dataset_source(train);
}

std::int64_t training_data::train_samples() const {
  return text ? static_cast<std::int64_t>(text->train.size() - 1) / context : static_cast<std::int64_t>(train.size());
}

std::int64_t training_data::valid_samples() const {
  return text ? static_cast<std::int64_t>(text->validation.size() - 1) / context
              : static_cast<std::int64_t>(valid.size());
}

replica::replica(const worker_spec& spec, const training_data& data) : bf16_(spec.config.precision == "bf16") {
  if (spec.config.precision != "fp32" && spec.config.precision != "bf16")
    throw failure("unknown precision '" + spec.config.precision + "': fp32 or bf16");
  if (data.text) {
    auto made = actors::make_char_transformer({.vocabulary = data.text->vocabulary.size(), .context = spec.config.context,
                                               .width = spec.config.width, .heads = spec.config.heads, .layers = spec.config.depth,
                                               .dropout = spec.config.dropout, .seed = spec.config.seed});
    if (!made) throw failure("the config does not make a transformer: " + made.error().message());
    transformer_.emplace(std::move(*made));
    return;
  }
  sample_shape_ = data.train.sample_shape;
  const actors::model_spec model{.kind = spec.config.model, .width = spec.config.width, .depth = spec.config.depth,
                                 .dropout = spec.config.dropout, .seed = spec.config.seed};
  auto made = actors::make_model(model, data.train.sample_shape, data.train.classes);
  if (!made) throw failure("the config does not make a model: " + made.error().message());
  classifier_ = std::move(*made);
}

std::vector<torch::Tensor> replica::parameters() const {
  return transformer_ ? (*transformer_)->parameters() : classifier_->parameters();
}

torch::nn::Module& replica::module() {
  if (transformer_) return **transformer_;
  return *classifier_;
}

void replica::train_mode() { module().train(); }

micro_figures replica::forward_backward(actors::batch& b, double loss_scale) {
  micro_figures m;
  const auto n = static_cast<std::int64_t>(b.samples.size());
  m.samples = n;
  torch::Tensor logits, targets;
  {
    cpu_autocast autocast(bf16_);
    if (transformer_) {
      const auto context = static_cast<std::int64_t>(b.inputs.size()) / std::max<std::int64_t>(n, 1);
      logits = (*transformer_)->forward(ids(b.inputs, n, context));
      logits = logits.reshape({-1, logits.size(2)});
      targets = ids(b.y, n, context).reshape({-1});
    } else {
      std::vector<std::int64_t> sizes{n};
      // {N, sample...}: a cnn's model reads flat square samples as one channel itself.
      sizes.insert(sizes.end(), sample_shape_.begin(), sample_shape_.end());
      logits = classifier_->forward(torch::from_blob(b.x.data(), sizes, torch::kFloat));
      targets = torch::from_blob(b.y.data(), {n}, torch::kLong);
    }
  }
  // The loss in float32 whatever the forward pass ran in; backward goes through the same
  // casts, so each parameter's gradient arrives in float32.
  const auto loss = torch::nn::functional::cross_entropy(logits.to(torch::kFloat), targets);
  (loss * loss_scale).backward();
  m.predictions = targets.numel();
  m.loss_sum = loss.item<double>() * static_cast<double>(m.predictions);
  m.correct = logits.argmax(1).eq(targets).sum().item<std::int64_t>();
  return m;
}

validation replica::evaluate(const training_data& data) {
  if (!transformer_) {
    cpu_autocast autocast(bf16_);
    const auto v = actors::evaluate(classifier_, data.valid);
    return {.loss = v.loss, .accuracy = v.accuracy, .samples = v.samples, .seconds = v.seconds};
  }
  const auto began = std::chrono::steady_clock::now();
  torch::NoGradGuard no_grad;
  auto& net = *transformer_;
  net->eval();
  auto w = actors::consecutive_windows(data.text->validation, data.context);
  double loss_sum = 0;
  std::int64_t correct = 0;
  if (w.count > 0) {
    const auto inputs = ids(w.inputs, w.count, w.context);
    const auto targets = ids(w.targets, w.count, w.context);
    for (std::int64_t first = 0; first < w.count; first += eval_batch) {
      const auto last = std::min(first + eval_batch, w.count);
      torch::Tensor logits;
      {
        cpu_autocast autocast(bf16_);
        logits = net->forward(inputs.slice(0, first, last));
      }
      logits = logits.to(torch::kFloat).reshape({-1, logits.size(2)});
      const auto t = targets.slice(0, first, last).reshape({-1});
      loss_sum += torch::nn::functional::cross_entropy(
                    logits, t, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                    .item<double>();
      correct += logits.argmax(1).eq(t).sum().item<std::int64_t>();
    }
  }
  net->train();
  const auto tokens = w.count * w.context;
  const double loss = tokens > 0 ? loss_sum / static_cast<double>(tokens) : 0.0;
  return {.loss = loss,
          .accuracy = tokens > 0 ? static_cast<double>(correct) / static_cast<double>(tokens) : 0.0,
          .samples = w.count,
          .seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count(),
          .bits_per_char = loss / std::log(2.0)};
}

} // namespace celer::train_app
