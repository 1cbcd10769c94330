#pragma once
// The straggler option (straggler_timeout_ms > 0; apps/train/README.md, "Stragglers"): a
// worker computes each step's micro-batches on a thread of its own, on a second replica of
// the model that takes the main one's weights as the step begins, while the actor's thread
// waits for it only until the step's deadline. A step whose gradients are not in by then
// goes into the allreduce as zeros with a contribution count of 0; its computation runs on
// and its gradients are dropped when they come (no stale gradient is folded into a later
// step). While the thread is still busy with a dropped step, a new step starts nothing
// and contributes nothing: a worker that cannot make the deadline does not pile work up.
//
//   step_thread t(std::move(replica), &loader, shape, /*accumulate=*/1);
//   if (t.start(weights)) ...                                   // actor thread, step begins
//   step_gradients g;
//   bool in = t.wait_until(deadline, g);                        // g.grads: flat, params' order
//
// Only worker.cpp includes this header (it names LibTorch types).
#include <celer/actors/loader.hpp>

#include <torch/torch.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

namespace celer::train_app {

/// One step's gradients and figures, from the step thread.
struct step_gradients {
  /// The mean gradient over the step's micro-batches, flattened in parameters' order.
  std::vector<float> grads;
  double loss_sum = 0;  // summed over samples
  std::int64_t correct = 0;
  std::int64_t samples = 0;
  double data_wait_seconds = 0;
  double compute_seconds = 0;
};

/// The compute thread of one trainer worker. start, wait_until and drain are called by the
/// worker's actor thread only; the thread owns `replica` and reads `*loader` while a step
/// runs (drain before replacing the loader).
class step_thread {
public:
  step_thread(torch::nn::Sequential replica, std::optional<actors::data_loader>* loader,
              std::vector<std::int64_t> sample_shape, std::int64_t accumulate_steps, int threads);
  ~step_thread();
  step_thread(const step_thread&) = delete;
  step_thread& operator=(const step_thread&) = delete;

  /// Starts a step on `weights` (flat, parameters' order). False, starting nothing, while
  /// an earlier step (one whose gradients were dropped) still runs.
  bool start(std::span<const float> weights);
  /// Waits for the started step until `deadline`: true with its gradients in `out`; false
  /// when they are not in by then (they will be dropped), or nothing was started.
  bool wait_until(std::chrono::steady_clock::time_point deadline, step_gradients& out);
  /// Waits for a running step to end (and drops it).
  void drain();

private:
  void run();
  step_gradients compute();

  torch::nn::Sequential replica_;
  std::vector<torch::Tensor> params_;
  std::optional<actors::data_loader>* loader_;
  std::vector<std::int64_t> shape_;
  std::int64_t accumulate_;
  int threads_;
  /// Guards everything below; `changed_` signals a job or a result.
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<float> weights_;
  bool job_ = false, busy_ = false, stopping_ = false;
  /// The result of the step started last, until taken; `wanted_` is false once its
  /// deadline passed (then it is dropped when it comes).
  std::optional<step_gradients> result_;
  bool wanted_ = false;
  std::thread thread_;
};

} // namespace celer::train_app
