#pragma once
// The trainer-worker actor's state (trainer_worker::impl) and what its two files share:
// worker.cpp (the actor's methods: start, state, rejoin) and worker_step.cpp (a training
// step: synchronous, with stragglers, asynchronous). Internal to celer-train; the two files
// Includes LibTorch.
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

using clock_type = std::chrono::steady_clock;

inline double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

[[noreturn]] inline void fail(const std::string& what) { throw std::runtime_error(what); }

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

} // namespace celer::train_app
