// The trainer-worker actor (worker.hpp): the one file of celer-train that includes LibTorch.
#include "worker.hpp"

#include "adaptive_batch.hpp"
#include "replica.hpp"
#include "straggler.hpp"

#include <celer/actors/collective.hpp>
#include <celer/actors/data.hpp>
#include <celer/actors/loader.hpp>
#include <celer/actors/parameter_server.hpp>
#include <celer/actors/torch/checkpoint.hpp>
#include <celer/actors/torch/model.hpp>
#include <celer/actors/trainer/compression.hpp>
#include <celer/actors/trainer/loss_scale.hpp>
#include <celer/actors/trainer/noise_scale.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <optional>
#include <stdexcept>

#include <unistd.h>

namespace celer::train_app {
namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what); }

/// Runs `body`, turning a LibTorch error into one line (its message without the C++
/// backtrace LibTorch appends), which the driver prints.
template <class F>
auto torch_edge(const char* what, F&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const c10::Error& e) {
    fail(std::string(what) + ": " + e.what_without_backtrace());
  }
}

/// torch::manual_seed and the initial weights use LibTorch's one global generator; workers
/// that are threads of one process (embedded) build their models one at a time.
std::mutex& model_building() {
  static std::mutex m;
  return m;
}

} // namespace

struct trainer_worker::impl {
  worker_spec spec;
  training_data data;
  /// The model replica (replica.hpp).
  std::optional<replica> net;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::vector<torch::Tensor> params;
  /// Every parameter's gradient (or weights, for the broadcast), flattened in params' order.
  std::vector<float> flat;
  /// With batch_size_policy noise_scale: the estimate and the batch it gives.
  std::optional<adaptive_batch> adaptive;
  /// With loss_scale dynamic: the scale and its rules (the same decisions on every worker:
  /// they come from the averaged gradient).
  std::optional<trainer::loss_scaler> scaler;
  /// Declared after `data`, which it reads: destroyed first.
  std::optional<actors::data_loader> loader;
  std::optional<collective::group> group;
  /// Guards `group` between the actor's calls and abort_collective, which runs while
  /// run_steps does (on another thread): held to replace the group and to abort it, not
  /// while run_steps uses it (only this worker's call thread replaces it).
  std::mutex group_mutex;
  /// The last step whose update this replica applied (step runs ahead of it while a step
  /// is in progress), and the error-feedback residual as it was before that step's
  /// compression (for a survivor to put back when the step is cut short).
  std::int64_t applied = 0;
  std::vector<float> residual_before;
  /// The figures of the steps the current (or last) run_steps call took.
  std::vector<step_figures> call_figures;
  /// Set by start or rejoin: false in a replacement until it has taken its peers' state.
  bool started = false;
  /// The straggler option: the compute thread (on a second replica), and the allreduce's
  /// buffer: the gradient sum, then the count of workers whose gradient is in it.
  std::unique_ptr<step_thread> stepper;
  std::vector<float> contribution;
  /// With compression: this worker's compressor (it keeps the error-feedback residual), the
  /// packet as fixed-size bytes, and every worker's packets after the allgather.
  std::optional<trainer::sign_compressor> sign;
  std::optional<trainer::topk_compressor> topk;
  std::vector<std::uint8_t> packet;
  std::int64_t step = 0;
  /// After enter_async: the parameter servers every step goes through.
  std::optional<parameter_server::sharded> servers;

  /// Averages `flat` over the group: a ring allreduce of the floats, or, compressed, an
  /// allgather of every worker's packet, each then summed in rank order into `flat` (the
  /// same order everywhere, so every worker gets the same bits).
  expected<void> average(collective::group& g) {
    if (!sign && !topk) return g.allreduce(std::span(flat), collective::op::mean);
    const auto kept = sign ? sign->residual() : topk->residual();
    residual_before.assign(kept.begin(), kept.end());
    const std::size_t n = flat.size();
    std::size_t first = 0;  // bytes of the packet's first part (signs, or indices)
    if (sign) {
      auto p = sign->compress(flat);
      if (!p) return p.error();
      first = p->signs.size();
      packet.assign(p->signs.begin(), p->signs.end());
      const auto* scales = reinterpret_cast<const std::uint8_t*>(p->scales.data());
      packet.insert(packet.end(), scales, scales + p->scales.size() * sizeof(float));
    } else {
      auto p = topk->compress(flat);
      if (!p) return p.error();
      first = p->indices.size() * sizeof(std::uint32_t);
      const auto* idx = reinterpret_cast<const std::uint8_t*>(p->indices.data());
      const auto* val = reinterpret_cast<const std::uint8_t*>(p->values.data());
      packet.assign(idx, idx + first);
      packet.insert(packet.end(), val, val + p->values.size() * sizeof(float));
    }
    auto all = g.allgather(std::span<const std::uint8_t>(packet));
    if (!all) return all.error();
    std::fill(flat.begin(), flat.end(), 0.0f);
    const float weight = 1.0f / static_cast<float>(g.size());
    for (int r = 0; r < g.size(); ++r) {
      const std::uint8_t* at = all->data() + static_cast<std::size_t>(r) * packet.size();
      const std::size_t second = packet.size() - first;
      expected<void> ok;
      if (sign) {
        const trainer::sign_packet p{.size = n, .block_size = static_cast<std::uint32_t>(sign->options().block_size),
                                     .signs = celer::bytes(at, first),
                                     .scales = celer::array<float>(celer::bytes(at + first, second))};
        ok = trainer::accumulate_into(p, flat, weight);
      } else {
        const trainer::topk_packet p{.size = n, .indices = celer::array<std::uint32_t>(celer::bytes(at, first)),
                                     .values = celer::array<float>(celer::bytes(at + first, second))};
        ok = trainer::accumulate_into(p, flat, weight);
      }
      if (!ok) return error(ok.error().code(), "rank " + std::to_string(r) + "'s packet: " + ok.error().message());
    }
    return {};
  }

  /// What joining the run's group takes (start, and rejoin after a failure).
  collective::group_options group_options() const {
    const auto hierarchy = spec.config.hierarchy == "by_node"    ? collective::grouping::by_node
                           : spec.config.hierarchy == "by_label" ? collective::grouping::by_label
                                                          : collective::grouping::none;
    return {.name = spec.group, .world_size = spec.world, .rank = spec.rank,
            .timeout = std::chrono::milliseconds(spec.timeout_ms), .hierarchy = hierarchy, .local_group = spec.local_group};
  }

  /// This worker's micro-batch (batch_split's share, or batch_size).
  std::int64_t micro_batch() const {
    return spec.batch_split.empty() ? spec.config.batch_size : spec.batch_split[static_cast<std::size_t>(spec.rank)];
  }
  /// What this worker's gradient is weighed by before the allreduce's mean: world x its
  /// share of the step's samples (1 with equal batches).
  double gradient_weight() const {
    if (spec.batch_split.empty()) return 1.0;
    std::int64_t total = 0;
    for (auto b : spec.batch_split) total += b;
    return static_cast<double>(spec.world) * static_cast<double>(micro_batch()) / static_cast<double>(total);
  }
  /// One forward and backward pass, slowed to spec.speed_fraction (the test hook).
  micro_figures pass(actors::batch& b, double loss_scale) {
    const auto began = clock_type::now();
    auto m = net->forward_backward(b, loss_scale);
    if (spec.speed_fraction < 1.0 && step >= spec.speed_from_step) {
      const auto took = clock_type::now() - began;
      const auto until = clock_type::now() + std::chrono::duration_cast<clock_type::duration>(took * (1.0 / spec.speed_fraction - 1.0));
      while (clock_type::now() < until) {
      }
    }
    return m;
  }

  void open_loader() {
    loader.reset();
    std::vector<double> weights(spec.batch_split.begin(), spec.batch_split.end());
    auto l = actors::make_data_loader(data.source(),
                                      {.batch_size = static_cast<std::size_t>(micro_batch()),
                                       .threads = static_cast<std::size_t>(std::max(1, spec.config.loader_threads)),
                                       .prefetch = static_cast<std::size_t>(std::max(1, spec.config.prefetch)),
                                       .seed = spec.config.seed,
                                       .rank = static_cast<std::size_t>(spec.rank),
                                       .world = static_cast<std::size_t>(spec.world),
                                       .shard_weights = std::move(weights),
                                       .injected_cost = std::chrono::nanoseconds(std::llround(spec.loader_cost_ms * 1e6))});
    if (!l) fail("worker " + std::to_string(spec.rank) + "'s data loader: " + l.error().message());
    loader.emplace(std::move(*l));
  }

  /// Copies every parameter (weights when `grads` is false) into `flat`, or back.
  void gather(bool grads) {
    std::size_t at = 0;
    for (auto& p : params) {
      const auto n = static_cast<std::size_t>(p.numel());
      const torch::Tensor& t = grads ? p.grad() : p;
      if (!t.defined()) std::fill_n(flat.data() + at, n, 0.0f);
      else std::memcpy(flat.data() + at, t.contiguous().data_ptr<float>(), n * sizeof(float));
      at += n;
    }
  }
  void scatter(bool grads) {
    torch::NoGradGuard no_grad;
    std::size_t at = 0;
    for (auto& p : params) {
      const auto n = p.numel();
      auto src = torch::from_blob(flat.data() + at, p.sizes(), torch::kFloat);
      if (grads) {
        if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
        p.mutable_grad().copy_(src);
      } else {
        p.copy_(src);
      }
      at += static_cast<std::size_t>(n);
    }
  }

  std::vector<step_figures> run_steps(std::int64_t steps);
  /// A synchronous step with the straggler option: the gradients computed by `stepper`
  /// until the deadline, or none; the allreduce of those in; the update.
  void straggler_step(collective::group& g, step_figures& f, clock_type::time_point began);
  /// The rest of an async step, once the gradients are in `flat`: clipping, push_pull,
  /// the pulled weights into the model.
  void async_step(step_figures& f);

  /// The weights and LibTorch optimiser's state, flattened in params' order, with `step`
  /// as the clock: what the parameter servers start from.
  parameter_server::shard_state export_state() {
    parameter_server::shard_state s;
    gather(/*grads=*/false);
    s.weights = flat;
    s.clock = step;
    const bool sgd = spec.config.optimizer == "sgd";
    if (sgd && spec.config.momentum == 0) return s;  // plain SGD keeps no state
    std::vector<float> first(flat.size(), 0.0f), second(sgd ? 0 : flat.size(), 0.0f);
    std::int64_t steps = 0;
    bool found = false;
    const auto& states = optimizer->state();
    std::size_t at = 0;
    for (const auto& p : params) {
      const auto n = static_cast<std::size_t>(p.numel());
      // LibTorch keys a parameter's state by its TensorImpl's address, printed.
      const auto it = states.find(c10::guts::to_string(p.unsafeGetTensorImpl()));
      auto copy = [&](const torch::Tensor& t, std::vector<float>& into) {
        if (t.defined()) std::memcpy(into.data() + at, t.contiguous().data_ptr<float>(), n * sizeof(float));
      };
      if (it != states.end()) {
        found = true;
        if (spec.config.optimizer == "adam") {
          const auto& st = static_cast<const torch::optim::AdamParamState&>(*it->second);
          copy(st.exp_avg(), first);
          copy(st.exp_avg_sq(), second);
          steps = std::max(steps, st.step());
        } else if (spec.config.optimizer == "adamw") {
          const auto& st = static_cast<const torch::optim::AdamWParamState&>(*it->second);
          copy(st.exp_avg(), first);
          copy(st.exp_avg_sq(), second);
          steps = std::max(steps, st.step());
        } else {
          copy(static_cast<const torch::optim::SGDParamState&>(*it->second).momentum_buffer(), first);
          steps = std::max<std::int64_t>(1, step);  // the momentum buffer has started
        }
      }
      at += n;
    }
    if (found) {
      s.first = std::move(first);
      s.second = std::move(second);
      s.optimizer_steps = steps;
    }
    return s;
  }

  collective::group& joined() {
    if (!group) fail("worker " + std::to_string(spec.rank) + " has not joined its group: call start() first");
    return *group;
  }
};

trainer_worker::trainer_worker(const worker_spec& spec) : impl_(std::make_unique<impl>()) {
  auto& w = *impl_;
  w.spec = spec;
  torch::set_num_threads(std::max(1, spec.threads));
  w.data = training_data::load(spec);
  {
    std::lock_guard lock(model_building());
    w.net.emplace(spec, w.data);
  }
  w.params = w.net->parameters();
  auto opt = actors::make_optimizer(w.params, {.name = spec.config.optimizer, .lr = spec.config.lr,
                                               .weight_decay = spec.config.weight_decay, .momentum = spec.config.momentum});
  if (!opt) fail("the config does not make an optimiser: " + opt.error().message());
  w.optimizer = std::move(*opt);
  std::size_t total = 0;
  for (const auto& p : w.params) {
    if (p.scalar_type() != torch::kFloat) fail("only float32 parameters are trained here");
    total += static_cast<std::size_t>(p.numel());
  }
  w.flat.resize(total);
  if (spec.config.compression == "sign") {
    auto c = trainer::sign_compressor::make(total);
    if (!c) fail("sign compression: " + c.error().message());
    w.sign.emplace(std::move(*c));
  } else if (spec.config.compression == "topk") {
    const auto k = std::clamp<std::size_t>(static_cast<std::size_t>(std::llround(spec.config.topk_fraction * static_cast<double>(total))), 1, total);
    auto c = trainer::topk_compressor::make(total, {.k = k});
    if (!c) fail("top-k compression: " + c.error().message());
    w.topk.emplace(std::move(*c));
  } else if (spec.config.compression != "none") {
    fail("unknown compression '" + spec.config.compression + "': none, sign or topk");
  }
  if (spec.config.batch_size_policy == "noise_scale") w.adaptive.emplace(adaptive_batch::make(spec));
  if (spec.config.loss_scale == "dynamic") {
    auto s = trainer::loss_scaler::make({.initial = spec.config.loss_scale_init, .growth_interval = spec.config.loss_scale_growth_interval});
    if (!s) fail("loss scaling: " + s.error().message());
    w.scaler.emplace(std::move(*s));
  } else if (spec.config.loss_scale != "none") {
    fail("unknown loss_scale '" + spec.config.loss_scale + "': none or dynamic");
  }
  w.open_loader();
  if (spec.config.straggler_timeout_ms > 0) {
    // The step thread's copy of the classifier (the config refuses the straggler option
    // with the transformer, bf16 or the noise_scale policy: it runs the plain fp32 step).
    torch::nn::Sequential copy{nullptr};
    {
      std::lock_guard lock(model_building());
      auto made = actors::make_model({.kind = spec.config.model, .width = spec.config.width, .depth = spec.config.depth,
                                      .dropout = spec.config.dropout, .seed = spec.config.seed},
                                     w.data.train.sample_shape, w.data.train.classes);
      if (!made) fail("the config does not make a model: " + made.error().message());
      copy = std::move(*made);
    }
    w.stepper = std::make_unique<step_thread>(std::move(copy), &w.loader,
                                              std::vector<std::int64_t>(w.data.train.sample_shape.begin(), w.data.train.sample_shape.end()),
                                              spec.config.accumulate_steps, std::max(1, spec.threads));
    w.contribution.resize(total + 1);
  }
}

trainer_worker::~trainer_worker() = default;

start_info trainer_worker::start() {
  auto& w = *impl_;
  if (!w.group) {
    auto g = collective::group::join(w.group_options());
    if (!g) fail("worker " + std::to_string(w.spec.rank) + " cannot join group '" + w.spec.group + "': " + g.error().message());
    std::lock_guard lock(w.group_mutex);
    w.group.emplace(std::move(*g));
  }
  // Every replica starts from rank 0's weights, whatever each built.
  w.gather(/*grads=*/false);
  if (auto ok = w.joined().broadcast(std::span(w.flat), /*root=*/0); !ok)
    fail("broadcasting the initial weights: " + ok.error().message());
  w.scatter(/*grads=*/false);
  w.started = true;
  return {.train_samples = w.data.train_samples(),
          .valid_samples = w.data.valid_samples(),
          .parameters = static_cast<std::int64_t>(w.flat.size()),
          .batches_per_epoch = static_cast<std::int64_t>(w.loader->batches_per_epoch())};
}

double trainer_worker::measure_speed() {
  return torch_edge("measuring the worker's speed", [&] {
    auto& w = *impl_;
    torch::set_num_threads(std::max(1, w.spec.threads));
    w.net->train_mode();
    // Two passes to warm up, then at least 16 and 0.3 s of them (at most 256). The median
    // pass: a pass that lost its core to another process for a while does not count.
    constexpr int warm = 2, timed = 16, most = 256;
    std::vector<double> per_sample;
    double seconds = 0;
    for (int i = 0; i < warm + most && (i < warm + timed || seconds < 0.3); ++i) {
      auto b = w.loader->next();
      if (!b) fail("the data loader ended");
      w.optimizer->zero_grad();
      const auto t = clock_type::now();
      const auto m = w.pass(*b, 1.0);
      const double took = seconds_since(t);
      if (i >= warm && m.samples > 0) {
        seconds += took;
        per_sample.push_back(took / static_cast<double>(m.samples));
      }
    }
    w.optimizer->zero_grad();
    w.open_loader();  // the run draws its batches from the start
    if (per_sample.empty()) return 0.0;
    std::nth_element(per_sample.begin(), per_sample.begin() + static_cast<std::ptrdiff_t>(per_sample.size() / 2), per_sample.end());
    const double median = per_sample[per_sample.size() / 2];
    return median > 0 ? 1.0 / median : 0.0;
  });
}

std::int64_t trainer_worker::set_batch_split(std::vector<std::int64_t> split, std::int64_t step) {
  auto& w = *impl_;
  if (static_cast<int>(split.size()) != w.spec.world)
    fail("a batch split of " + std::to_string(split.size()) + " for " + std::to_string(w.spec.world) + " workers");
  for (auto b : split)
    if (b < 1) fail("a batch split holds " + std::to_string(b) + ": every worker needs at least 1 sample a micro-batch");
  w.spec.batch_split = std::move(split);
  if (w.stepper) w.stepper->drain();
  w.open_loader();
  for (std::int64_t i = 0; i < step * w.spec.config.accumulate_steps; ++i) (void)w.loader->next();
  return static_cast<std::int64_t>(w.loader->batches_per_epoch());
}

std::vector<step_figures> trainer_worker::run_steps(std::int64_t steps) {
  return torch_edge("a training step", [&] { return impl_->run_steps(steps); });
}

std::vector<step_figures> trainer_worker::impl::run_steps(std::int64_t steps) {
  auto& w = *this;
  torch::set_num_threads(std::max(1, w.spec.threads));
  w.net->train_mode();
  // Kept in the worker, so that a call cut short by a peer's failure still has the figures
  // of the steps it took (last_call_figures).
  auto& out = w.call_figures;
  out.clear();
  out.reserve(static_cast<std::size_t>(std::max<std::int64_t>(steps, 0)));
  for (std::int64_t s = 0; s < steps; ++s) {
    const auto step_began = clock_type::now();
    step_figures f;
    f.step = ++w.step;
    if (f.step == w.spec.fail_at_step && w.spec.fail_by_exit && ::getpid() != w.spec.driver_pid)
      std::_Exit(3);  // the worker process dies mid-run, as if killed
    if (f.step == w.spec.fail_at_step)
      fail("worker " + std::to_string(w.spec.rank) + ": injected failure at step " + std::to_string(f.step) +
           " (CELER_TRAIN_INJECT_FAILURE)");
    if (w.stepper && !w.servers) {
      w.straggler_step(w.joined(), f, step_began);
      f.step_seconds = seconds_since(step_began);
      out.push_back(f);
      continue;
    }
    w.optimizer->zero_grad();
    double loss_sum = 0;
    // noise_scale: a larger batch is more micro-batches (the same loader, the same memory).
    const std::int64_t micros = w.spec.config.accumulate_steps * (w.adaptive ? w.adaptive->multiplier() : 1);
    f.batch_size = micros * w.micro_batch();
    // sharding speed: a worker of a larger share counts for more in the mean.
    const double weight = w.gradient_weight() / static_cast<double>(micros);
    for (std::int64_t micro = 0; micro < micros; ++micro) {
      const auto asked = clock_type::now();
      auto b = w.loader->next();
      if (!b) fail("the data loader ended");  // epochs = 0: it never does
      const auto got = clock_type::now();
      f.data_wait_seconds += std::chrono::duration<double>(got - asked).count();
      // The mean over micro-batches: accumulated gradients equal one batch's of all of them.
      // With loss scaling, times the scale (divided out of the gradients below).
      const auto m = w.pass(*b, (w.scaler ? w.scaler->scale() : 1.0) * weight);
      loss_sum += m.loss_sum;
      f.correct += m.correct;
      f.predictions += m.predictions;
      f.samples += m.samples;
      f.compute_seconds += seconds_since(got);
    }
    auto t = clock_type::now();
    w.gather(/*grads=*/true);
    bool finite = true;
    if (f.step == w.spec.overflow_at_step && !w.flat.empty())
      w.flat[0] = std::numeric_limits<float>::infinity();  // the test hook
    if (w.scaler) {
      f.loss_scale = w.scaler->scale();
      finite = w.scaler->unscale(w.flat);
    }
    // noise_scale: this worker's squared norm, a gradient of f.samples examples.
    const double local_norm_sq = w.adaptive && finite ? trainer::squared_norm(w.flat) : 0.0;
    f.compute_seconds += seconds_since(t);
    if (w.servers) {
      f.loss = f.predictions > 0 ? loss_sum / static_cast<double>(f.predictions) : 0;
      w.async_step(f);
      f.step_seconds = seconds_since(step_began);
      out.push_back(f);
      continue;
    }
    // Synchronous from here: the group (a worker that joined the servers needs none).
    auto& group = w.joined();
    t = clock_type::now();
    const auto sent_before = group.counters().bytes_sent;
    if (w.scaler && (w.sign || w.topk)) {
      // A compressor would fold an inf into its residual: the workers agree first, and
      // skip the exchange together.
      float overflowed = finite ? 0.0f : 1.0f;
      if (auto ok = group.allreduce(std::span(&overflowed, 1), collective::op::max); !ok)
        fail("checking the gradients for overflow at step " + std::to_string(f.step) + ": " + ok.error().message());
      finite = overflowed == 0.0f;
    }
    if (finite || !(w.sign || w.topk)) {
      if (auto ok = w.average(group); !ok)
        fail("averaging the gradients at step " + std::to_string(f.step) + ": " + ok.error().message());
    }
    // An inf or nan of any worker survives the sum into every worker's mean, so every
    // worker sees the same verdict.
    if (w.scaler && finite) finite = trainer::all_finite(w.flat);
    if (w.scaler && !w.scaler->update(finite)) {
      f.overflow = true;
      f.bytes_sent = group.counters().bytes_sent - sent_before;
      f.allreduce_seconds = seconds_since(t);
      f.lr = w.optimizer->param_groups().front().options().get_lr();
      f.loss = f.predictions > 0 ? loss_sum / static_cast<double>(f.predictions) : 0;
      w.applied = f.step;  // nothing to apply: the step is skipped on every replica
      f.step_seconds = seconds_since(step_began);
      out.push_back(f);
      continue;
    }
    float local_mean = static_cast<float>(local_norm_sq);
    if (w.adaptive) {
      // The workers' mean local squared norm: every worker gets the same bits, so every
      // worker's estimator, and the batch it gives, stays the same.
      if (auto ok = group.allreduce(std::span(&local_mean, 1), collective::op::mean); !ok)
        fail("averaging the gradient norms at step " + std::to_string(f.step) + ": " + ok.error().message());
    }
    f.bytes_sent = group.counters().bytes_sent - sent_before;
    f.allreduce_seconds = seconds_since(t);
    t = clock_type::now();
    double norm2 = 0;
    for (float g : w.flat) norm2 += static_cast<double>(g) * g;
    f.grad_norm = std::sqrt(norm2);
    if (w.adaptive) {
      (void)w.adaptive->observe(f.step, f.samples, static_cast<double>(local_mean), norm2);
      f.noise_scale = w.adaptive->noise_scale().value_or(-1.0);
    }
    if (w.spec.config.clip_grad_norm > 0 && f.grad_norm > w.spec.config.clip_grad_norm) {
      const auto scale = static_cast<float>(w.spec.config.clip_grad_norm / f.grad_norm);
      for (float& g : w.flat) g *= scale;
    }
    w.scatter(/*grads=*/true);
    if (w.adaptive) {
      // The batch this step was drawn at sets its learning rate (the same on every worker).
      const double lr = w.adaptive->lr(w.spec.config.lr, micros / w.spec.config.accumulate_steps);
      for (auto& group : w.optimizer->param_groups()) group.options().set_lr(lr);
    }
    f.lr = w.optimizer->param_groups().front().options().get_lr();
    w.optimizer->step();
    w.applied = f.step;
    f.compute_seconds += seconds_since(t);
    f.loss = f.predictions > 0 ? loss_sum / static_cast<double>(f.predictions) : 0;
    f.step_seconds = seconds_since(step_began);
    out.push_back(f);
  }
  return out;
}

void trainer_worker::impl::straggler_step(collective::group& g, step_figures& f, clock_type::time_point began) {
  // This step's gradients, if the compute thread has them by the deadline (it starts
  // nothing while a dropped step of its still runs).
  gather(/*grads=*/false);
  step_gradients got;
  const bool started = stepper->start(flat);
  const bool in = started && stepper->wait_until(began + std::chrono::milliseconds(spec.config.straggler_timeout_ms), got);
  const std::size_t n = flat.size();
  if (in) {
    std::copy(got.grads.begin(), got.grads.end(), contribution.begin());
    contribution[n] = 1.0f;
    f.loss = got.samples > 0 ? got.loss_sum / static_cast<double>(got.samples) : 0;
    f.correct = got.correct;
    f.samples = got.samples;
    f.data_wait_seconds = got.data_wait_seconds;
    f.compute_seconds = got.compute_seconds;
  } else {
    std::fill(contribution.begin(), contribution.end(), 0.0f);
  }
  f.contributed = in;
  // The sum of the gradients in, and their count, in one allreduce: every worker divides
  // the same sum by the same count, so the replicas stay equal.
  auto t = clock_type::now();
  const auto sent_before = g.counters().bytes_sent;
  if (auto ok = g.allreduce(std::span(contribution), collective::op::sum); !ok)
    fail("averaging the gradients at step " + std::to_string(f.step) + ": " + ok.error().message());
  f.bytes_sent = g.counters().bytes_sent - sent_before;
  f.allreduce_seconds = seconds_since(t);
  const auto count = static_cast<std::int64_t>(std::lround(contribution[n]));
  f.skipped = g.size() - count;
  if (count == 0) {  // no gradient in: no update this step
    applied = f.step;
    return;
  }
  t = clock_type::now();
  const float inv = 1.0f / static_cast<float>(count);
  double norm2 = 0;
  for (std::size_t i = 0; i < n; ++i) {
    flat[i] = contribution[i] * inv;
    norm2 += static_cast<double>(flat[i]) * flat[i];
  }
  f.grad_norm = std::sqrt(norm2);
  if (spec.config.clip_grad_norm > 0 && f.grad_norm > spec.config.clip_grad_norm) {
    const auto scale = static_cast<float>(spec.config.clip_grad_norm / f.grad_norm);
    for (float& v : flat) v *= scale;
  }
  scatter(/*grads=*/true);
  optimizer->step();
  applied = f.step;
  f.compute_seconds += seconds_since(t);
}

void trainer_worker::impl::async_step(step_figures& f) {
  auto t = clock_type::now();
  double norm2 = 0;
  for (float g : flat) norm2 += static_cast<double>(g) * g;
  f.grad_norm = std::sqrt(norm2);
  if (spec.config.clip_grad_norm > 0 && f.grad_norm > spec.config.clip_grad_norm) {
    const auto scale = static_cast<float>(spec.config.clip_grad_norm / f.grad_norm);
    for (float& g : flat) g *= scale;
  }
  f.compute_seconds += seconds_since(t);
  // The servers apply the optimiser; what comes back is the weights for the next step.
  t = clock_type::now();
  auto got = servers->push_pull(spec.rank, f.step, flat, flat);
  if (!got) fail("worker " + std::to_string(spec.rank) + " at step " + std::to_string(f.step) + ": " + got.error().message());
  f.allreduce_seconds = seconds_since(t);
  f.bound_wait_seconds = got->waited_seconds;
  f.ahead = f.step - got->slowest_clock;
  f.bytes_sent = flat.size() * sizeof(float);
  t = clock_type::now();
  scatter(/*grads=*/false);
  f.compute_seconds += seconds_since(t);
}

std::int64_t trainer_worker::enter_async(parameter_server::sharded servers) {
  return torch_edge("switching to the parameter servers", [&] {
    auto& w = *impl_;
    w.servers.emplace(std::move(servers));
    if (w.spec.rank == 0) {
      if (auto ok = w.servers->init(w.export_state()); !ok)
        fail("worker 0 cannot hand its weights to the parameter servers: " + ok.error().message());
    }
    // The others wait inside the servers for rank 0's init.
    auto got = w.servers->pull(w.spec.rank, w.step + 1, w.flat);
    if (!got) fail("worker " + std::to_string(w.spec.rank) + " cannot pull the weights: " + got.error().message());
    w.scatter(/*grads=*/false);
    return got->version;
  });
}

std::vector<step_figures> trainer_worker::last_call_figures() { return impl_->call_figures; }

std::int64_t trainer_worker::join_async(parameter_server::sharded servers, std::int64_t step) {
  return torch_edge("joining the parameter servers", [&] {
    auto& w = *impl_;
    w.servers.emplace(std::move(servers));
    w.step = w.applied = step;
    // The loader has no seek: a fresh one, the batches of the steps taken drawn and dropped.
    w.open_loader();
    for (std::int64_t i = 0; i < step * w.spec.config.accumulate_steps; ++i) (void)w.loader->next();
    auto got = w.servers->pull(w.spec.rank, step + 1, w.flat);
    if (!got) fail("worker " + std::to_string(w.spec.rank) + " cannot pull the weights: " + got.error().message());
    w.scatter(/*grads=*/false);
    return step;
  });
}

std::int64_t trainer_worker::finish_async() {
  return torch_edge("pulling the final weights", [&] {
    auto& w = *impl_;
    if (!w.servers) fail("worker " + std::to_string(w.spec.rank) + ": finish_async before enter_async");
    auto got = w.servers->pull(w.spec.rank, w.step + 1, w.flat);
    if (!got) fail("worker " + std::to_string(w.spec.rank) + " cannot pull the final weights: " + got.error().message());
    w.scatter(/*grads=*/false);
    return w.step;
  });
}

validation trainer_worker::evaluate() {
  auto& w = *impl_;
  torch::set_num_threads(std::max(1, w.spec.threads));
  return torch_edge("the validation", [&] { return w.net->evaluate(w.data); });
}

std::string trainer_worker::parameters_digest() {
  auto& w = *impl_;
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const auto& p : w.params) {
    const auto t = p.detach().contiguous();
    const auto* bytes = static_cast<const unsigned char*>(t.data_ptr());
    const auto n = static_cast<std::size_t>(t.numel()) * t.element_size();
    for (std::size_t i = 0; i < n; ++i) h = (h ^ bytes[i]) * 0x100000001b3ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

checkpoint::snapshot trainer_worker::save_state() {
  auto& w = *impl_;
  checkpoint::snapshot s;
  // Copies: the snapshot is this call's result, packed after the call returns.
  checkpoint::add_module(s, "model", w.net->module(), checkpoint::tensor_bytes::copy);
  if (auto ok = checkpoint::add_optimizer(s, "optimizer", *w.optimizer); !ok) fail(ok.error().message());
  s.add_int("step", w.step);
  if (!w.spec.batch_split.empty()) {
    std::string split;
    for (auto b : w.spec.batch_split) split += (split.empty() ? "" : ",") + std::to_string(b);
    s.add_text("batch_split", split);  // the driver reads it back on --resume
  }
  if (w.scaler) {
    const auto& st = w.scaler->state();
    s.add_float("loss_scale/scale", st.scale);
    s.add_int("loss_scale/clean_steps", st.clean_steps);
    s.add_int("loss_scale/overflows", st.overflows);
    s.add_int("loss_scale/growths", st.growths);
  }
  s.set_step(w.step);
  return s;
}

std::int64_t trainer_worker::load_state(checkpoint::snapshot state) {
  auto& w = *impl_;
  auto check = [](expected<void> ok) {
    if (!ok) fail("the checkpoint does not fit this run's model: " + ok.error().message());
  };
  check(checkpoint::load_module(state, "model", w.net->module()));
  check(checkpoint::load_optimizer(state, "optimizer", *w.optimizer));
  auto step = state.get_int("step");
  if (!step) fail("the checkpoint has no step: " + step.error().message());
  w.step = w.applied = *step;
  if (w.scaler && state.find("loss_scale/scale") != nullptr) {
    auto scale = state.get_float("loss_scale/scale");
    auto clean = state.get_int("loss_scale/clean_steps");
    auto overflows = state.get_int("loss_scale/overflows");
    auto growths = state.get_int("loss_scale/growths");
    if (!scale || !clean || !overflows || !growths) fail("the checkpoint's loss scale is incomplete");
    check(w.scaler->restore({.scale = *scale, .clean_steps = *clean, .overflows = *overflows, .growths = *growths}));
  }
  // This worker's error-feedback residual and LibTorch generator, when the checkpoint has
  // them (save_local_state); else the residual starts again empty.
  const std::string mine = "residual/" + std::to_string(w.spec.rank);
  if (w.sign) w.sign->reset();
  if (w.topk) w.topk->reset();
  if ((w.sign || w.topk) && state.find(mine) != nullptr) {
    std::vector<float> residual(w.flat.size());
    auto t = torch::from_blob(residual.data(), {static_cast<std::int64_t>(residual.size())}, torch::kFloat);
    check(checkpoint::load_tensor(state, mine, t));
    check(w.sign ? w.sign->restore(residual) : w.topk->restore(residual));
  }
  if (const std::string rng = "rng/torch/" + std::to_string(w.spec.rank); state.find(rng) != nullptr)
    check(checkpoint::load_torch_rng(state, rng));
  // The loader has no seek: a fresh one, and the batches the run had taken are drawn again
  // and dropped (the same seed gives the same batches in the same order).
  if (w.stepper) w.stepper->drain();
  w.open_loader();
  for (std::int64_t i = 0; i < w.step * w.spec.config.accumulate_steps; ++i) (void)w.loader->next();
  return w.step;
}

checkpoint::snapshot trainer_worker::save_local_state() {
  auto& w = *impl_;
  checkpoint::snapshot s;
  if (w.sign || w.topk) {
    const auto r = w.sign ? w.sign->residual() : w.topk->residual();
    std::vector<float> copy(r.begin(), r.end());
    const auto t = torch::from_blob(copy.data(), {static_cast<std::int64_t>(copy.size())}, torch::kFloat);
    checkpoint::add_tensor(s, "residual/" + std::to_string(w.spec.rank), t, checkpoint::tensor_bytes::copy);
  }
  checkpoint::add_torch_rng(s, "rng/torch/" + std::to_string(w.spec.rank));
  return s;
}

bool trainer_worker::abort_collective(std::string reason) {
  auto& w = *impl_;
  std::lock_guard lock(w.group_mutex);
  if (!w.group) return false;
  w.group->abort(reason);
  return true;
}

std::int64_t trainer_worker::rejoin(std::string group) {
  return torch_edge("rejoining the survivors", [&] {
    auto& w = *impl_;
    {
      std::lock_guard lock(w.group_mutex);
      w.group.reset();  // the broken one
    }
    w.spec.group = std::move(group);
    auto g = collective::group::join(w.group_options());
    if (!g) fail("worker " + std::to_string(w.spec.rank) + " cannot join group '" + w.spec.group + "': " + g.error().message());
    {
      std::lock_guard lock(w.group_mutex);
      w.group.emplace(std::move(*g));
    }
    auto& grp = *w.group;
    auto must = [&](expected<void> ok, const char* what) {
      if (!ok) fail(std::string("rejoining: ") + what + ": " + ok.error().message());
    };
    // The root: the most steps applied, the lowest rank of those (a replacement has -1).
    const std::int64_t mine = w.started ? w.applied : -1;
    std::int64_t most[1] = {mine};
    must(grp.allreduce(std::span<std::int64_t>(most), collective::op::max), "finding the most steps applied");
    std::int64_t root[1] = {most[0] == mine ? w.spec.rank : w.spec.world};
    must(grp.allreduce(std::span<std::int64_t>(root), collective::op::min), "choosing the root");
    const int from = static_cast<int>(root[0]);
    // A survivor cut short in a step puts its residual back (what it sent is void now).
    if (w.started && w.step != w.applied && !w.residual_before.empty()) {
      if (w.sign) must(w.sign->restore(w.residual_before), "the residual");
      if (w.topk) must(w.topk->restore(w.residual_before), "the residual");
    }
    // The root's step and optimiser state's size, its weights, then the state's bytes.
    std::vector<std::uint8_t> state;
    if (w.spec.rank == from) {
      checkpoint::snapshot s;
      if (auto ok = checkpoint::add_optimizer(s, "optimizer", *w.optimizer); !ok) fail(ok.error().message());
      const auto& data = s.find("optimizer")->data;
      state.assign(reinterpret_cast<const std::uint8_t*>(data.data()), reinterpret_cast<const std::uint8_t*>(data.data()) + data.size());
    }
    // The step, the state's size, and the loss scaler's state (the scale's bits).
    std::int64_t header[6] = {w.applied, static_cast<std::int64_t>(state.size())};
    if (w.scaler) {
      const auto& st = w.scaler->state();
      header[2] = std::bit_cast<std::int64_t>(st.scale);
      header[3] = st.clean_steps;
      header[4] = st.overflows;
      header[5] = st.growths;
    }
    must(grp.broadcast(std::span<std::int64_t>(header), from), "the root's step");
    if (w.scaler && w.spec.rank != from)
      must(w.scaler->restore({.scale = std::bit_cast<double>(header[2]), .clean_steps = header[3],
                              .overflows = header[4], .growths = header[5]}),
           "the root's loss scale");
    w.gather(/*grads=*/false);
    must(grp.broadcast(std::span(w.flat), from), "the root's weights");
    state.resize(static_cast<std::size_t>(header[1]));
    must(grp.broadcast(std::span(state), from), "the root's optimiser state");
    if (w.spec.rank != from) {
      w.scatter(/*grads=*/false);
      checkpoint::snapshot s;
      s.add_bytes("optimizer", celer::bytes(std::move(state)), {{"format", "torch.serialize"}});
      if (auto ok = checkpoint::load_optimizer(s, "optimizer", *w.optimizer); !ok) fail(ok.error().message());
    }
    if (!w.started && w.sign) w.sign->reset();
    if (!w.started && w.topk) w.topk->reset();
    w.started = true;
    w.step = w.applied = header[0];
    // Every loader to that step (no seek: a fresh one, the batches taken drawn and dropped).
    if (w.stepper) w.stepper->drain();
    w.open_loader();
    for (std::int64_t i = 0; i < w.step * w.spec.config.accumulate_steps; ++i) (void)w.loader->next();
    return w.step;
  });
}

std::unique_ptr<trainer_worker> make_trainer_worker(worker_spec spec) { return std::make_unique<trainer_worker>(spec); }

} // namespace celer::train_app

CELER_REMOTE(celer::train_app::make_trainer_worker, &celer::train_app::trainer_worker::start,
             &celer::train_app::trainer_worker::run_steps, &celer::train_app::trainer_worker::evaluate,
             &celer::train_app::trainer_worker::parameters_digest, &celer::train_app::trainer_worker::save_state,
             &celer::train_app::trainer_worker::load_state, &celer::train_app::trainer_worker::enter_async,
             &celer::train_app::trainer_worker::finish_async, &celer::train_app::trainer_worker::save_local_state,
             &celer::train_app::trainer_worker::abort_collective, &celer::train_app::trainer_worker::rejoin,
             &celer::train_app::trainer_worker::measure_speed, &celer::train_app::trainer_worker::set_batch_split,
             &celer::train_app::trainer_worker::join_async, &celer::train_app::trainer_worker::last_call_figures);
