// celer-train's speed-weighted shards (sharding.hpp).
#include "sharding.hpp"

#include <celer/gpu.hpp>

#include <algorithm>

namespace celer::train_app {

std::vector<std::int64_t> split_by_speed(const std::vector<double>& speeds, std::int64_t total) {
  // celer::gpu::shares splits items over devices by speed: here the devices are the
  // workers and the items the step's samples.
  std::vector<gpu::device> devices(speeds.size());
  for (std::size_t r = 0; r < speeds.size(); ++r) devices[r] = {.index = static_cast<int>(r), .speed = speeds[r]};
  std::vector<std::int64_t> split;
  for (auto n : gpu::shares(devices, static_cast<std::size_t>(std::max<std::int64_t>(total, 0))))
    split.push_back(static_cast<std::int64_t>(n));
  for (auto& b : split) {
    if (b >= 1) continue;
    auto most = std::max_element(split.begin(), split.end());
    if (*most <= 1) break;  // total < workers: nothing to give
    --*most;
    b = 1;
  }
  return split;
}

double step_compute(const std::vector<std::int64_t>& split, const std::vector<double>& rates) {
  double slowest = 0;
  for (std::size_t r = 0; r < split.size() && r < rates.size(); ++r)
    if (rates[r] > 0) slowest = std::max(slowest, static_cast<double>(split[r]) / rates[r]);
  return slowest;
}

std::string split_text(const std::vector<std::int64_t>& split) {
  std::string out;
  for (std::size_t r = 0; r < split.size(); ++r) out += (r ? ", " : "") + std::to_string(split[r]);
  return out;
}

rebalancer::rebalancer(int workers, std::int64_t interval, double min_gain)
  : interval_(std::max<std::int64_t>(interval, 1)), min_gain_(min_gain),
    samples_(static_cast<std::size_t>(std::max(workers, 0)), 0), seconds_(samples_.size(), 0.0) {}

void rebalancer::observe(int rank, std::int64_t samples, double compute_seconds) {
  if (rank < 0 || static_cast<std::size_t>(rank) >= samples_.size()) return;
  samples_[static_cast<std::size_t>(rank)] += samples;
  seconds_[static_cast<std::size_t>(rank)] += compute_seconds;
}

std::optional<reshard> rebalancer::after_steps(std::int64_t steps, const std::vector<std::int64_t>& current) {
  steps_ += steps;
  if (steps_ < interval_) return std::nullopt;
  reshard r;
  bool measured = current.size() == samples_.size();
  for (std::size_t w = 0; w < samples_.size(); ++w) {
    if (samples_[w] <= 0 || !(seconds_[w] > 0)) measured = false;
    r.rates.push_back(seconds_[w] > 0 ? static_cast<double>(samples_[w]) / seconds_[w] : 0.0);
  }
  steps_ = 0;
  std::fill(samples_.begin(), samples_.end(), 0);
  std::fill(seconds_.begin(), seconds_.end(), 0.0);
  auto before = std::move(pending_);
  pending_.clear();
  if (!measured) return std::nullopt;
  std::int64_t total = 0;
  for (auto b : current) total += b;
  r.split = split_by_speed(r.rates, total);
  const double now = step_compute(current, r.rates);
  const double then = step_compute(r.split, r.rates);
  if (!(now > 0) || r.split == current) return std::nullopt;
  r.gain = 1.0 - then / now;
  if (r.gain < min_gain_) return std::nullopt;
  // Confirmed when the window before proposed a move the same way for every worker (each
  // batch up, down or kept alike); else this one waits for the next window's word.
  bool same_way = before.size() == current.size();
  for (std::size_t w = 0; same_way && w < current.size(); ++w) {
    const auto sign = [](std::int64_t d) { return (d > 0) - (d < 0); };
    same_way = sign(before[w] - current[w]) == sign(r.split[w] - current[w]);
  }
  if (!same_way) {
    pending_ = r.split;
    return std::nullopt;
  }
  return r;
}

} // namespace celer::train_app
