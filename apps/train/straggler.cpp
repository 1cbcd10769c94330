// The straggler option's compute thread (straggler.hpp).
#include "straggler.hpp"

#include <cstring>

namespace celer::train_app {

step_thread::step_thread(torch::nn::Sequential replica, std::optional<actors::data_loader>* loader,
                         std::vector<std::int64_t> sample_shape, std::int64_t accumulate_steps, int threads)
  : replica_(std::move(replica)), params_(replica_->parameters()), loader_(loader), shape_(std::move(sample_shape)),
    accumulate_(accumulate_steps), threads_(threads), thread_([this] { run(); }) {}

step_thread::~step_thread() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

bool step_thread::start(std::span<const float> weights) {
  std::lock_guard lock(mutex_);
  if (busy_ || job_) return false;
  weights_.assign(weights.begin(), weights.end());
  result_.reset();
  job_ = wanted_ = true;
  changed_.notify_all();
  return true;
}

bool step_thread::wait_until(std::chrono::steady_clock::time_point deadline, step_gradients& out) {
  std::unique_lock lock(mutex_);
  if (!wanted_) return false;
  if (!changed_.wait_until(lock, deadline, [&] { return result_.has_value(); })) {
    wanted_ = false;  // late: dropped when it comes
    return false;
  }
  out = std::move(*result_);
  result_.reset();
  wanted_ = false;
  return true;
}

void step_thread::drain() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !job_ && !busy_; });
  result_.reset();
  wanted_ = false;
}

void step_thread::run() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return job_ || stopping_; });
      if (stopping_) return;
      job_ = false;
      busy_ = true;
      // The weights go into the replica here, under the lock: start() cannot change them.
      torch::NoGradGuard no_grad;
      std::size_t at = 0;
      for (auto& p : params_) {
        const auto n = static_cast<std::size_t>(p.numel());
        std::memcpy(p.data_ptr<float>(), weights_.data() + at, n * sizeof(float));
        at += n;
      }
    }
    step_gradients got;
    try {
      got = compute();
    } catch (const std::exception&) {
      got = {};  // no gradients: the step counts as not in (the samples say so)
    }
    {
      std::lock_guard lock(mutex_);
      busy_ = false;
      if (wanted_ && got.samples > 0) result_ = std::move(got);
    }
    changed_.notify_all();
  }
}

step_gradients step_thread::compute() {
  using clock_type = std::chrono::steady_clock;
  torch::set_num_threads(std::max(1, threads_));
  replica_->train();
  for (auto& p : params_)
    if (p.grad().defined()) p.mutable_grad().zero_();
  step_gradients g;
  for (std::int64_t micro = 0; micro < accumulate_; ++micro) {
    const auto asked = clock_type::now();
    auto b = (*loader_)->next();
    if (!b) return {};
    const auto got = clock_type::now();
    g.data_wait_seconds += std::chrono::duration<double>(got - asked).count();
    const auto n = static_cast<std::int64_t>(b->y.size());
    std::vector<std::int64_t> sizes{n};
    sizes.insert(sizes.end(), shape_.begin(), shape_.end());
    const auto x = torch::from_blob(b->x.data(), sizes, torch::kFloat);
    const auto y = torch::from_blob(b->y.data(), {n}, torch::kLong);
    const auto logits = replica_->forward(x);
    const auto loss = torch::nn::functional::cross_entropy(logits, y);
    (loss / static_cast<double>(accumulate_)).backward();
    g.loss_sum += loss.item<double>() * static_cast<double>(n);
    g.correct += logits.argmax(1).eq(y).sum().item<std::int64_t>();
    g.samples += n;
    g.compute_seconds += std::chrono::duration<double>(clock_type::now() - got).count();
  }
  const auto t = clock_type::now();
  std::size_t total = 0;
  for (const auto& p : params_) total += static_cast<std::size_t>(p.numel());
  g.grads.assign(total, 0.0f);
  std::size_t at = 0;
  for (const auto& p : params_) {
    const auto n = static_cast<std::size_t>(p.numel());
    if (p.grad().defined()) std::memcpy(g.grads.data() + at, p.grad().contiguous().data_ptr<float>(), n * sizeof(float));
    at += n;
  }
  g.compute_seconds += std::chrono::duration<double>(clock_type::now() - t).count();
  return g;
}

} // namespace celer::train_app
