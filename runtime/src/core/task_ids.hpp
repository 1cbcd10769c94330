#pragma once
// The ids of the tasks (and puts, and lease requests) one core makes: a random prefix per
// process and a counter, so that they never collide across processes and cost no lock.

#include <celer/ids.hpp>

#include <atomic>
#include <cstdint>

namespace celer {

class task_ids {
public:
  task_ids() : prefix_(unique_id::random().hi | 1) {}
  task_ids(const task_ids&) = delete;
  task_ids& operator=(const task_ids&) = delete;

  /// A fresh task id. The low 16 bits are left for the return index
  /// (task_spec::return_id).
  task_id next() noexcept {
    return task_id(unique_id{prefix_, (counter_.fetch_add(1, std::memory_order_relaxed) + 1) << 16});
  }

private:
  const std::uint64_t prefix_;
  std::atomic<std::uint64_t> counter_{0};
};

} // namespace celer
