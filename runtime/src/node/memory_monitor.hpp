#pragma once
// A node's memory monitor (Ray's OOM killer policy; docs/fault-tolerance.md, "Out of
// memory"). On each of the node's ticks it reads how much memory is in use; above its
// threshold it kills one worker process, chosen so that the least work is lost and none is
// lost for good when it can be helped: among the workers lent to work, the one lent most
// recently whose work is retried when it dies (a task with retries left, an actor with
// restarts), else the one lent most recently. Its owner hears that the memory monitor
// killed it, with the figures (the task is retried, or fails with worker_died_error saying
// so), instead of the kernel's OOM killer taking a process at random. It kills no other
// until that one has exited.
//
//   memory_monitor monitor({.threshold = 0.95, .limit_bytes = 0});
//   monitor.tick(pool, launcher);            // the node agent's tick (cluster mode)
//
// What is measured: with `limit_bytes`, the resident memory of the node's worker processes
// together against that limit (a node given its share of a machine); without, the
// machine's memory in use (MemTotal less MemAvailable), or the node's cgroup's when the
// cgroup has a lower limit. Embedded workers are threads of the driver: nothing is killed.
//
// One of the node agent's pieces. Threads: the agent's (one message at a time).

#include "node/worker_pool.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace celer {

class memory_monitor {
public:
  struct config {
    /// The share of memory in use above which a worker is killed; 1 or more: never.
    double threshold = 0.95;
    /// The workers' resident memory together is held to this many bytes; 0 watches the
    /// machine (or the cgroup) instead.
    std::uint64_t limit_bytes = 0;
  };
  /// Memory in use and the memory there is, in bytes, and what was measured.
  struct usage {
    std::uint64_t used = 0;
    std::uint64_t total = 0;
    std::string what;
    [[nodiscard]] double share() const { return total == 0 ? 0.0 : static_cast<double>(used) / static_cast<double>(total); }
  };
  /// A worker the monitor could kill.
  struct candidate {
    worker_id id;
    std::chrono::steady_clock::time_point lent_at;
    bool retriable = false;
  };

  explicit memory_monitor(config cfg) : cfg_(cfg) {}

  [[nodiscard]] bool enabled() const noexcept { return cfg_.threshold < 1.0; }
  /// Measures, and kills a worker of `pool` when the node is above its threshold (see above).
  void tick(worker_pool& pool, const worker_launcher& launcher);

  /// The worker to kill among `workers`: the newest retriable, else the newest; nullopt
  /// when there is none. Pure: the policy, tested on its own.
  [[nodiscard]] static std::optional<worker_id> choose(const std::vector<candidate>& workers);
  /// The machine's memory (/proc/meminfo), or its cgroup's when that limit is lower.
  [[nodiscard]] static usage machine_usage();
  /// The resident memory of process `pid` in bytes (0 when it is gone).
  [[nodiscard]] static std::uint64_t resident_bytes(int pid);
  /// The kill reason the owner reads: "was killed by the memory monitor: ...".
  [[nodiscard]] static std::string reason(const usage& u, double threshold, const std::string& function, bool retriable);

private:
  config cfg_;
  /// The worker killed last, until it has exited (it is gone from the pool).
  std::optional<worker_id> killing_;
};

} // namespace celer
