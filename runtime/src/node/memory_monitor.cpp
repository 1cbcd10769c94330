// A node's memory monitor (memory_monitor.hpp).
#include "node/memory_monitor.hpp"

#include "log.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

namespace celer {

namespace {

/// The number in file `path` (a cgroup's memory.max or memory.current); nullopt when it
/// cannot be read or says "max".
std::optional<std::uint64_t> read_number(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word) || word.empty() || word == "max") return std::nullopt;
  try {
    return std::stoull(word);
  } catch (...) {
    return std::nullopt;
  }
}

std::string gib(std::uint64_t bytes) {
  char out[32];
  std::snprintf(out, sizeof out, "%.2f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return out;
}

std::string percent(double share) {
  char out[32];
  std::snprintf(out, sizeof out, "%.1f%%", share * 100.0);
  return out;
}

} // namespace

std::optional<worker_id> memory_monitor::choose(const std::vector<candidate>& workers) {
  const candidate* best = nullptr;
  for (const auto& c : workers) {
    // Retriable work first; among equals, the most recently lent (the least work lost).
    if (best == nullptr || (c.retriable && !best->retriable) ||
        (c.retriable == best->retriable && c.lent_at > best->lent_at)) {
      best = &c;
    }
  }
  if (best == nullptr) return std::nullopt;
  return best->id;
}

memory_monitor::usage memory_monitor::machine_usage() {
  usage u;
  u.what = "the machine's memory";
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0;
  std::string unit;
  std::uint64_t total = 0, available = 0;
  while (meminfo >> key >> kib) {
    std::getline(meminfo, unit);
    if (key == "MemTotal:") total = kib * 1024;
    if (key == "MemAvailable:") available = kib * 1024;
  }
  u.total = total;
  u.used = total > available ? total - available : 0;
  // A cgroup (v2) with a lower limit: that is the node's memory.
  std::ifstream self("/proc/self/cgroup");
  std::string line;
  while (std::getline(self, line)) {
    if (!line.starts_with("0::")) continue;
    const std::string dir = "/sys/fs/cgroup" + line.substr(3);
    auto max = read_number(dir + "/memory.max");
    auto current = read_number(dir + "/memory.current");
    if (max && current && *max > 0 && *max < u.total) {
      u.total = *max;
      u.used = *current;
      u.what = "its cgroup's memory";
    }
  }
  return u;
}

std::uint64_t memory_monitor::resident_bytes(int pid) {
  std::ifstream statm("/proc/" + std::to_string(pid) + "/statm");
  std::uint64_t size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return resident * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

std::string memory_monitor::reason(const usage& u, double threshold, const std::string& function, bool retriable) {
  return "was killed by the node's memory monitor: " + u.what + " in use was " + percent(u.share()) + " (" +
         gib(u.used) + " of " + gib(u.total) + "), above its threshold of " + percent(threshold) +
         " (memory_usage_threshold); it ran " + function + ", the " +
         (retriable ? "newest retriable work there" : "newest work there (none was retriable)") +
         ". Use less memory per task, give it more nodes, or raise the threshold";
}

void memory_monitor::tick(worker_pool& pool, const worker_launcher& launcher) {
  if (!enabled()) return;
  if (killing_) {
    if (pool.find(*killing_) != nullptr) return;  // not exited yet: it frees its memory first
    killing_.reset();
  }
  std::vector<candidate> lent;
  usage u;
  if (cfg_.limit_bytes > 0) {
    u.total = cfg_.limit_bytes;
    u.what = "its workers' memory";
  }
  pool.for_each([&](const worker_id& id, const worker_slot& w) {
    const auto pid = launcher.pid_of(id);
    if (!pid) return;  // a thread, or not started yet
    if (cfg_.limit_bytes > 0) u.used += resident_bytes(*pid);
    if (w.busy && w.kill_reason.empty()) lent.push_back({id, w.lent_at, w.retriable});
  });
  if (lent.empty()) return;  // nothing of celer's to kill (or only threads: embedded)
  if (cfg_.limit_bytes == 0) u = machine_usage();
  if (u.total == 0 || u.share() <= cfg_.threshold) return;
  const auto victim = choose(lent);
  auto* w = pool.find(*victim);
  w->kill_reason = reason(u, cfg_.threshold, w->function, w->retriable);
  CELER_LOG(warn, "node", "memory monitor: " + u.what + " in use is " + percent(u.share()) + ", above " +
                            percent(cfg_.threshold) + ": kills worker " + victim->short_hex() + " running " +
                            w->function + (w->retriable ? " (retriable)" : " (not retriable)"));
  pool.terminate(*victim, *w);
  killing_ = *victim;
}

} // namespace celer
