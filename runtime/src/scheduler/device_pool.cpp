#include "scheduler/device_pool.hpp"

#include "protocol/resources.hpp"

#include <algorithm>
#include <cstdio>

namespace celer::scheduling {
namespace {

constexpr std::int64_t whole = protocol::resource_unit;

std::string gigabytes(std::uint64_t bytes) {
  char out[32];
  std::snprintf(out, sizeof out, "%.3g GB", static_cast<double>(bytes) / 1e9);
  return out;
}

} // namespace

device_pool::device_pool(std::vector<gpu::device> devices)
  : devices_(std::move(devices)), free_(devices_.size(), whole) {}

device_pool::device_pool(std::vector<gpu::device> devices, std::vector<std::int64_t> free)
  : devices_(std::move(devices)), free_(std::move(free)) {
  free_.resize(devices_.size(), 0);
}

bool device_pool::accepts(const gpu::device& d, const protocol::placement& p) const {
  if (d.memory_bytes < p.gpu_memory_bytes) return false;
  if (p.accelerator_type.empty()) return true;
  auto known = std::find_if(matches_.begin(), matches_.end(),
                            [&](const auto& m) { return m.first == p.accelerator_type; });
  if (known == matches_.end()) {
    std::vector<bool> each;
    for (const auto& x : devices_) each.push_back(gpu::matches_accelerator(x, p.accelerator_type));
    matches_.emplace_back(p.accelerator_type, std::move(each));
    known = std::prev(matches_.end());
  }
  return known->second[static_cast<std::size_t>(&d - devices_.data())];
}

bool device_pool::could(std::int64_t amount, const protocol::placement& p) const {
  if (amount == 0 && !p.constrains_gpus()) return true;
  const std::size_t needed = amount <= whole ? 1 : static_cast<std::size_t>(amount / whole);
  std::size_t matching = 0;
  for (const auto& d : devices_) {
    if (accepts(d, p) && ++matching >= needed) return true;
  }
  return false;
}

std::string device_pool::never(std::int64_t amount, const protocol::placement& p) const {
  if (could(amount, p)) return {};
  std::size_t matching = 0;
  for (const auto& d : devices_) matching += accepts(d, p) ? 1 : 0;
  const std::size_t needed = amount <= whole ? 1 : static_cast<std::size_t>(amount / whole);
  std::string have;
  for (const auto& d : devices_) {
    have += (have.empty() ? "" : ", ") + d.model + " " + gigabytes(d.memory_bytes);
  }
  const std::string what = describe_gpu_constraint(p);
  return "needs " + std::to_string(needed) + " GPU(s)" + (what.empty() ? "" : " (" + what + ")") +
         ", has " + std::to_string(matching) + " such of " + std::to_string(devices_.size()) +
         (have.empty() ? "" : " [" + have + "]");
}

bool device_pool::fits(std::int64_t amount, const protocol::placement& p) const {
  return fits_after(amount, p, {});
}

bool device_pool::fits_after(std::int64_t amount, const protocol::placement& p,
                             std::span<const protocol::gpu_share> returned) const {
  if (amount == 0) return could(0, p);
  auto free_of = [&](std::size_t i) {
    std::int64_t f = free_[i];
    for (const auto& s : returned) {
      if (s.index == devices_[i].index) f += s.amount;
    }
    return std::min(whole, f);
  };
  if (amount <= whole) {
    for (std::size_t i = 0; i < devices_.size(); ++i) {
      if (free_of(i) >= amount && accepts(devices_[i], p)) return true;
    }
    return false;
  }
  std::int64_t free_whole = 0;
  for (std::size_t i = 0; i < devices_.size(); ++i) {
    if (free_of(i) == whole && accepts(devices_[i], p)) free_whole += whole;
  }
  return free_whole >= amount;
}

std::optional<std::vector<protocol::gpu_share>> device_pool::take(std::int64_t amount,
                                                                  const protocol::placement& p) {
  std::vector<protocol::gpu_share> out;
  if (amount == 0) {
    if (!could(0, p)) return std::nullopt;
    return out;
  }
  const bool by_speed = p.how == scheduling_strategy::kind::speed_weighted;
  if (amount <= whole) {
    std::size_t best = devices_.size();
    double best_key = 0;
    for (std::size_t i = 0; i < devices_.size(); ++i) {
      if (free_[i] < amount || !accepts(devices_[i], p)) continue;
      // By speed: the earliest expected finish, (work already there + this) / speed.
      // Otherwise best fit: the least free device it fits on.
      const double key = by_speed ? static_cast<double>(whole - free_[i] + amount) /
                                      std::max(devices_[i].speed, 1e-9)
                                  : static_cast<double>(free_[i]);
      if (best == devices_.size() || key < best_key) {
        best = i;
        best_key = key;
      }
    }
    if (best == devices_.size()) return std::nullopt;
    free_[best] -= amount;
    out.push_back({devices_[best].index, amount});
    return out;
  }
  std::vector<std::size_t> candidates;
  for (std::size_t i = 0; i < devices_.size(); ++i) {
    if (free_[i] == whole && accepts(devices_[i], p)) candidates.push_back(i);
  }
  const auto count = static_cast<std::size_t>(amount / whole);
  if (candidates.size() < count) return std::nullopt;
  if (by_speed) {
    std::stable_sort(candidates.begin(), candidates.end(), [&](std::size_t a, std::size_t b) {
      return devices_[a].speed > devices_[b].speed;
    });
  }
  for (std::size_t k = 0; k < count; ++k) {
    free_[candidates[k]] = 0;
    out.push_back({devices_[candidates[k]].index, whole});
  }
  return out;
}

void device_pool::give_back(const std::vector<protocol::gpu_share>& shares) {
  for (const auto& s : shares) {
    for (std::size_t i = 0; i < devices_.size(); ++i) {
      if (devices_[i].index == s.index) {
        free_[i] = std::min(whole, free_[i] + s.amount);
        break;
      }
    }
  }
}

void device_pool::set_free(const std::vector<std::int64_t>& free) {
  if (free.size() == free_.size()) free_ = free;
}

double device_pool::speed_of(const protocol::placement& p) const {
  double sum = 0;
  for (const auto& d : devices_) sum += accepts(d, p) ? d.speed : 0;
  return sum;
}

std::size_t device_pool::count_of(const protocol::placement& p) const {
  std::size_t n = 0;
  for (const auto& d : devices_) n += accepts(d, p) ? 1 : 0;
  return n;
}

std::int64_t device_pool::busy_of(const protocol::placement& p) const {
  std::int64_t sum = 0;
  for (std::size_t i = 0; i < devices_.size(); ++i) {
    if (accepts(devices_[i], p)) sum += whole - free_[i];
  }
  return sum;
}

std::uint64_t device_pool::accepted_mask(const protocol::placement& p) const {
  std::uint64_t mask = 0;
  for (std::size_t i = 0; i < devices_.size() && i < 64; ++i) {
    if (accepts(devices_[i], p)) mask |= std::uint64_t{1} << i;
  }
  return mask;
}

std::vector<gpu::device> with_count(std::vector<gpu::device> devices, std::size_t count) {
  if (devices.size() > count) devices.resize(count);
  while (devices.size() < count) {
    gpu::device d;
    d.index = static_cast<int>(devices.size());
    d.uuid = "declared-GPU-" + std::to_string(d.index);
    d.model = "GPU";
    d.name = "GPU";
    d.declared = true;
    devices.push_back(std::move(d));
  }
  return devices;
}

std::string describe_gpu_constraint(const protocol::placement& p) {
  std::string out = p.accelerator_type;
  if (p.gpu_memory_bytes > 0) {
    out += (out.empty() ? "" : " ") + std::string("with at least ") + gigabytes(p.gpu_memory_bytes);
  }
  return out;
}

} // namespace celer::scheduling
