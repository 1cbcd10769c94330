#include "core/task_stats.hpp"

#include <algorithm>

namespace celer {

void task_stats::count_scheduled(std::chrono::microseconds waited) noexcept {
  const auto us = static_cast<std::uint64_t>(std::max<std::int64_t>(0, waited.count()));
  latency_sum_us_ += us;
  // The first bucket whose bound the latency does not pass (Prometheus's `le`).
  const double seconds = static_cast<double>(us) / 1e6;
  std::size_t b = 0;
  while (b < protocol::scheduling_latency_bounds.size() && seconds > protocol::scheduling_latency_bounds[b]) ++b;
  ++latency_[b];
}

void task_stats::report(protocol::task_counts& c) const {
  c.submitted = submitted_;
  c.finished = finished_;
  c.failed = failed_;
  c.retried = retries_;
  c.latency.assign(latency_.begin(), latency_.end());
  c.latency_sum_us = latency_sum_us_;
}

} // namespace celer
