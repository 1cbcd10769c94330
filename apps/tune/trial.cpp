// The trial actor (trial.hpp): the one file of celer-tune that includes LibTorch.
#include "trial.hpp"

#include <celer/actors/data.hpp>
#include <celer/actors/torch/checkpoint.hpp>
#include <celer/actors/torch/model.hpp>
#include <celer/actors/tune/space.hpp>

#include <torch/torch.h>

#include <cstdlib>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include <unistd.h>

namespace celer::tune_app {
namespace {

/// The validation split: 20% of each class, the same split for every trial of every run.
constexpr double validation_fraction = 0.2;
constexpr std::uint64_t split_seed = 20240601;

/// torch::manual_seed and the initial weights use LibTorch's one global generator; trials
/// that are threads of one process (embedded) build their models one at a time, so that
/// each gets the weights its seed gives.
std::mutex& model_building() {
  static std::mutex m;
  return m;
}

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what); }

template <class T>
T need(expected<T> v, const std::string& what) {
  if (!v) fail(what + ": " + v.error().message());
  return std::move(*v);
}

/// The trial's seeds: distinct per trial, fixed by the experiment's seed.
std::uint64_t mix(std::uint64_t seed, std::int64_t id, std::uint64_t salt) {
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(id) * 0xBF58476D1CE4E5B9ull + salt;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// What the params ask of the model and the optimiser.
struct settings {
  actors::model_spec model;
  actors::optimizer_spec optimizer;
  std::int64_t batch_size = 64;

  static settings from(const tune::params& p, std::uint64_t model_seed) {
    settings s;
    s.model.kind = need(p.text("model"), "param model");
    s.model.width = static_cast<int>(need(p.integer("width"), "param width"));
    s.model.depth = static_cast<int>(need(p.integer("depth"), "param depth"));
    s.model.dropout = need(p.number("dropout"), "param dropout");
    s.model.seed = model_seed;
    s.optimizer.name = need(p.text("optimizer"), "param optimizer");
    s.optimizer.lr = need(p.number("lr"), "param lr");
    s.optimizer.weight_decay = need(p.number("weight_decay"), "param weight_decay");
    s.optimizer.momentum = need(p.number("momentum"), "param momentum");
    s.batch_size = need(p.integer("batch_size"), "param batch_size");
    return s;
  }
  /// Whether the model and optimiser have the same shape (a state of one loads into the other).
  [[nodiscard]] bool same_build(const settings& o) const {
    return model.kind == o.model.kind && model.width == o.model.width && model.depth == o.model.depth &&
           (model.dropout > 0) == (o.model.dropout > 0) && optimizer.name == o.optimizer.name;
  }
};

actors::dataset load_data(const trial_spec& spec) {
  auto all = actors::load_dataset(spec.data, spec.limit);
  if (!all) fail("cannot load the " + spec.data + " data: " + all.error().message());
  return std::move(*all);
}

} // namespace

struct trial::impl {
  trial_spec spec;
  tune::params params;
  settings now;
  actors::dataset train;
  actors::dataset valid;
  torch::nn::Sequential net{nullptr};
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::mt19937_64 order;
  std::int64_t epoch = 0;
  int failures_left = 0;

  /// A fresh model and optimiser for `s`: the initial weights its seed gives, epoch 0.
  void build(const settings& s) {
    std::lock_guard lock(model_building());
    auto made = actors::make_model(s.model, train.sample_shape, train.classes);
    if (!made) fail("these params do not make a model: " + made.error().message());
    net = std::move(*made);
    auto opt = actors::make_optimizer(net, s.optimizer);
    if (!opt) fail("these params do not make an optimiser: " + opt.error().message());
    optimizer = std::move(*opt);
    now = s;
    order.seed(mix(spec.seed, spec.id, 2));
    epoch = 0;
  }

  /// Sets what PBT may change in a running trial: lr, weight_decay, momentum, batch size.
  void set_hyperparameters(const settings& s) {
    for (auto& group : optimizer->param_groups()) {
      auto& o = group.options();
      o.set_lr(s.optimizer.lr);
      if (auto* sgd = dynamic_cast<torch::optim::SGDOptions*>(&o)) {
        sgd->weight_decay(s.optimizer.weight_decay);
        sgd->momentum(s.optimizer.momentum);
      } else if (auto* adam = dynamic_cast<torch::optim::AdamOptions*>(&o)) {
        adam->weight_decay(s.optimizer.weight_decay);
      } else if (auto* adamw = dynamic_cast<torch::optim::AdamWOptions*>(&o)) {
        adamw->weight_decay(s.optimizer.weight_decay);
      }
    }
    now.optimizer = s.optimizer;
    now.batch_size = s.batch_size;
  }
};

trial::trial(const trial_spec& spec) : impl_(std::make_unique<impl>()) {
  impl_->spec = spec;
  impl_->failures_left = spec.fail_times;
  torch::set_num_threads(std::max(1, spec.threads));
  impl_->params = spec.params;
  auto [train, valid] = actors::split(load_data(spec), validation_fraction, split_seed);
  train.x.shrink_to_fit();
  impl_->train = std::move(train);
  impl_->valid = std::move(valid);
  impl_->build(settings::from(impl_->params, mix(spec.seed, spec.id, 1)));
}

trial::~trial() = default;

epoch_metrics trial::train_epoch() {
  auto& t = *impl_;
  torch::set_num_threads(std::max(1, t.spec.threads));
  if (t.spec.fail_at_epoch == t.epoch + 1 && t.spec.fail_by_exit && ::getpid() != t.spec.driver_pid &&
      !celer::was_restarted()) {
    std::_Exit(3);  // the worker process dies: celer restarts the actor (max_restarts)
  }
  if (t.spec.fail_at_epoch == t.epoch + 1 && t.failures_left > 0 && !t.spec.fail_by_exit) {
    --t.failures_left;
    fail("injected failure at epoch " + std::to_string(t.epoch + 1) + " (CELER_TUNE_INJECT_FAILURE)");
  }
  const auto fit = actors::train_epoch(t.net, *t.optimizer, t.train, t.now.batch_size, t.order);
  const auto val = actors::evaluate(t.net, t.valid);
  ++t.epoch;
  return {.epoch = t.epoch,
          .values = {{"train_loss", fit.loss},
                     {"train_accuracy", fit.accuracy},
                     {"val_loss", val.loss},
                     {"val_accuracy", val.accuracy}},
          .seconds = fit.seconds + val.seconds};
}

checkpoint::snapshot trial::save_state() {
  auto& t = *impl_;
  checkpoint::snapshot s;
  // Copies: the snapshot is this call's result, packed after the call returns.
  checkpoint::add_module(s, "model", *t.net, checkpoint::tensor_bytes::copy);
  if (auto ok = checkpoint::add_optimizer(s, "optimizer", *t.optimizer); !ok) fail(ok.error().message());
  checkpoint::add_torch_rng(s, "rng/torch");
  s.add_rng("rng/order", t.order);
  s.add_int("epoch", t.epoch);
  s.add_text("params", t.params.to_json());
  s.set_step(t.epoch);
  return s;
}

std::int64_t trial::load_state(checkpoint::snapshot state, tune::params params) {
  auto& t = *impl_;
  const auto wanted = settings::from(params, mix(t.spec.seed, t.spec.id, 1));
  const bool fresh = state.entries().empty();
  // A state of another shape (PBT copies a trial of another width), or none: build afresh.
  if (!wanted.same_build(t.now) || fresh) t.build(wanted);
  t.params = std::move(params);
  if (!fresh) {
    auto load = [](expected<void> ok) {
      if (!ok) fail("the checkpoint does not fit this trial: " + ok.error().message());
    };
    load(checkpoint::load_module(state, "model", *t.net));
    load(checkpoint::load_optimizer(state, "optimizer", *t.optimizer));
    load(checkpoint::load_torch_rng(state, "rng/torch"));
    load(state.get_rng("rng/order", t.order));
    t.epoch = need(state.get_int("epoch"), "the checkpoint's epoch");
  }
  t.set_hyperparameters(wanted);
  return t.epoch;
}

std::unique_ptr<trial> make_trial(trial_spec spec) { return std::make_unique<trial>(spec); }

} // namespace celer::tune_app

CELER_REMOTE(celer::tune_app::make_trial, &celer::tune_app::trial::train_epoch,
             &celer::tune_app::trial::save_state, &celer::tune_app::trial::load_state);
