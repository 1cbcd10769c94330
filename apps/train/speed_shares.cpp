// The driver's side of sharding: speed (speed_shares.hpp).
#include "speed_shares.hpp"

#include "step_totals.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace celer::train_app {
namespace {

std::string speeds_text(const std::vector<double>& speeds) {
  std::string out;
  for (std::size_t r = 0; r < speeds.size(); ++r) out += (r ? ", " : "") + fixed(speeds[r], speeds[r] < 100 ? 2 : 0);
  return out;
}

} // namespace

expected<void> speed_shares::choose(worker_list& workers, const std::string& saved, std::ostream& out) {
  const std::int64_t total = cfg_.batch_size * cfg_.num_workers;
  std::vector<double> speeds = cfg_.worker_speeds;
  std::vector<double> shown;  // the speeds as declared or measured, for the console
  std::string how = "declared (worker_speeds)";
  split_.clear();
  if (!saved.empty()) {
    std::istringstream in(saved);
    for (std::string item; std::getline(in, item, ',');) split_.push_back(std::stoll(item));
    how = "as when the run began (from its checkpoint)";
    if (static_cast<int>(split_.size()) != cfg_.num_workers)
      return error(error_code::invalid_argument, "the checkpoint's batch split '" + saved + "' is not for " +
                                                   std::to_string(cfg_.num_workers) + " workers");
  } else {
    if (speeds.empty()) {
      // One worker at a time: each measures itself undisturbed by the others' probes.
      for (auto& w : workers) speeds.push_back(celer::get(w.task(&trainer_worker::measure_speed).remote()));
      how = "measured (samples/s)";
      shown = speeds;
      const auto [slowest, fastest] = std::minmax_element(speeds.begin(), speeds.end());
      if (*fastest <= *slowest * (1.0 + equal_within)) {  // the split of equal shards, bit for bit
        how += ", within " + fixed(100 * equal_within, 0) + "% of each other: equal shares";
        std::fill(speeds.begin(), speeds.end(), 1.0);
      }
    }
    if (shown.empty()) shown = speeds;
    split_ = split_by_speed(speeds, total);
  }
  // Measured speeds are measured again during the run, from the workers' compute times.
  if (cfg_.worker_speeds.empty() && cfg_.sharding_interval > 0) rebalance_.emplace(cfg_.num_workers, cfg_.sharding_interval);
  give(workers, /*step=*/0);
  out << "celer-train: speed-weighted shards: micro-batches " << split_text(split_) << " of " << total << " samples";
  if (!shown.empty()) out << ", by speeds " << speeds_text(shown);
  out << " " << how << "\n";
  return {};
}

void speed_shares::after_call(worker_list& workers, const std::vector<std::vector<step_figures>>& by_worker,
                              std::int64_t k, std::int64_t step, std::ostream& out) {
  if (!rebalance_) return;
  for (std::size_t r = 0; r < by_worker.size(); ++r)
    for (const auto& f : by_worker[r]) rebalance_->observe(static_cast<int>(r), f.samples, f.compute_seconds);
  auto next = rebalance_->after_steps(k, split_);
  if (!next) return;
  split_ = next->split;
  give(workers, step);
  reshards_.push_back({{"step", step}, {"batch_split", split_}, {"rates", next->rates}, {"gain", next->gain}});
  out << "celer-train: re-sharded at step " << step << ": micro-batches " << split_text(split_) << " (compute speeds "
      << speeds_text(next->rates) << " samples/s over the last " << cfg_.sharding_interval << " steps; "
      << fixed(100 * next->gain, 0) << "% less compute a step)\n";
}

void speed_shares::summarise(nlohmann::ordered_json& summary) const {
  if (!split_.empty()) summary["batch_split"] = split_;
  if (rebalance_) summary["reshards"] = reshards_;
}

void speed_shares::give(worker_list& workers, std::int64_t step) {
  std::vector<object_ref<std::int64_t>> sets;
  for (auto& w : workers) sets.push_back(w.task(&trainer_worker::set_batch_split).remote(split_, step));
  // Every call ends before a failure is thrown, so the workers are idle when it is.
  std::string failed;
  for (std::size_t r = 0; r < sets.size(); ++r) {
    try {
      (void)celer::get(sets[r]);
    } catch (const std::exception& e) {
      failed += (failed.empty() ? "" : "; ") + ("worker " + std::to_string(r) + ": ") + e.what();
    }
  }
  if (!failed.empty()) throw std::runtime_error("giving the workers their batch split: " + failed);
}

} // namespace celer::train_app
