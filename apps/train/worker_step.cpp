// One training step of a trainer-worker (worker.hpp): synchronous, with stragglers, or
// asynchronous against the parameter servers.
#include "worker_impl.hpp"

namespace celer::train_app {

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

} // namespace celer::train_app
