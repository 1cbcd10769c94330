// celer-train's driver, its figures (step_totals.hpp).
#include "step_totals.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace celer::train_app {
namespace {

/// Adds what every mode sums or averages over `n` workers (`f` is one worker's figures of
/// the step); `finish` turns the sums of predictions into the step's loss and accuracy.
struct step_sums {
  step_total t;
  double loss_sum = 0;
  std::int64_t correct = 0, predictions = 0;

  void add(const step_figures& f, double n) {
    t.step = f.step;
    loss_sum += f.loss * static_cast<double>(f.predictions);
    correct += f.correct;
    predictions += f.predictions;
    t.samples += f.samples;
    t.bytes_sent += static_cast<double>(f.bytes_sent) / n;
    t.data_wait += f.data_wait_seconds / n;
    t.compute += f.compute_seconds / n;
    t.allreduce += f.allreduce_seconds / n;
  }
  step_total finish() {
    if (predictions > 0) {
      t.loss = loss_sum / static_cast<double>(predictions);
      t.accuracy = static_cast<double>(correct) / static_cast<double>(predictions);
    }
    return t;
  }
};

} // namespace

std::vector<trainer::scalar> sync_figures(const step_total& t, double step_seconds) {
  return {
    {"loss", t.loss},
    {"accuracy", t.accuracy},
    {"samples_per_s", static_cast<double>(t.samples) / step_seconds},
    {"bytes_sent", t.bytes_sent},
    {"data_wait_s", t.data_wait},
    {"compute_s", t.compute},
    {"allreduce_s", t.allreduce},
    {"grad_norm", t.grad_norm},
  };
}

std::vector<trainer::scalar> async_figures(const step_total& t) {
  return {
    {"loss", t.loss},
    {"accuracy", t.accuracy},
    {"samples_per_s", t.rate},
    {"bytes_sent", t.bytes_sent},
    {"data_wait_s", t.data_wait},
    {"compute_s", t.compute},
    {"push_pull_s", t.allreduce},
    {"bound_wait_s", t.bound_wait},
    {"ahead", static_cast<double>(t.ahead)},
    {"grad_norm", t.grad_norm},
  };
}

std::string progress_line(const train_config& cfg, std::int64_t step, std::int64_t last, std::int64_t steps_per_epoch,
                          const window& w, const validation* val, bool async) {
  const double n = static_cast<double>(std::max<std::int64_t>(w.steps, 1));
  const auto ms = [&](double s) { return fixed(1e3 * s / n, 2) + " ms"; };
  std::string line = "step " + std::to_string(step) + "/" + std::to_string(last) + "  epoch " +
                     fixed(static_cast<double>(step) / static_cast<double>(steps_per_epoch), 1) + "  loss " +
                     fixed(w.loss / n, 4) + "  " + fixed(static_cast<double>(w.samples) / w.seconds, 0) +
                     " samples/s  sent " + bytes_text(w.bytes / n) + "/step  data-wait " + ms(w.data_wait) + "  compute " +
                     ms(w.compute);
  if (async) {
    line += "  push/pull " + ms(w.allreduce) + " (at the bound " + ms(w.bound_wait) + ", ahead <= " +
            std::to_string(w.ahead) + ")  |g| " + fixed(w.grad_norm / n, 3);
  } else {
    line += "  allreduce " + ms(w.allreduce) + "  |g| " + fixed(w.grad_norm / n, 3);
    if (cfg.straggler_timeout_ms > 0) line += "  skipped " + std::to_string(w.skipped);
    if (cfg.loss_scale == "dynamic") line += "  scale " + scale_text(w.loss_scale) + " (overflows " + std::to_string(w.overflows) + ")";
  }
  if (val != nullptr) line += "  val_acc " + fixed(val->accuracy, 4) + "  val_loss " + fixed(val->loss, 4);
  if (val != nullptr && cfg.data == "fortunes") line += "  val_bpc " + fixed(val->bits_per_char, 3);
  return line;
}

/// One async step's figures over the workers that took it (all of them unless the run
/// stopped early or one failed).
step_total combine_async(const std::vector<step_figures>& figures) {
  step_sums s;
  const auto n = static_cast<double>(figures.size());
  for (const auto& f : figures) {
    s.add(f, n);
    s.t.grad_norm += f.grad_norm / n;  // each worker's own gradient
    s.t.bound_wait += f.bound_wait_seconds / n;
    s.t.ahead = std::max(s.t.ahead, f.ahead);
    if (f.step_seconds > 0) s.t.rate += static_cast<double>(f.samples) / f.step_seconds;
  }
  return s.finish();
}

/// Step `i` of every worker's figures (a synchronous step: every worker took it).
step_total combine(const std::vector<std::vector<step_figures>>& by_worker, std::size_t i) {
  step_sums s;
  const auto n = static_cast<double>(by_worker.size());
  for (const auto& w : by_worker) {
    const auto& f = w[i];
    s.add(f, n);
    s.t.grad_norm = f.grad_norm;      // the averaged gradient: the same on every worker
    s.t.skipped = f.skipped;          // the group's count: the same on every worker
    s.t.noise_scale = f.noise_scale;  // from allreduced norms: the same on every worker
    s.t.loss_scale = f.loss_scale;    // decided from the averaged gradient: the same too
    s.t.overflow = f.overflow;
    s.t.batch_size += f.batch_size;
    s.t.lr = f.lr;
  }
  return s.finish();
}

} // namespace celer::train_app
