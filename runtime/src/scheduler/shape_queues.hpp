#pragma once
// A node's waiting work, by resource shape (Ray's scheduling classes): one FIFO queue per
// (resources, placement, priority), shapes ordered by priority (highest first), then by first
// arrival. The node's dispatch (node/local_scheduler.cpp) looks at the head of each shape only,
// so a long queue costs nothing per dispatch, and a large request does not hold back smaller
// ones. The scheduler's other pieces: cluster_view (the head's choice of node), device_pool
// (GPU shares), preemption (which actors make room), labels.
//
//   queues.push(spec, now);
//   for (auto& q : queues.shapes()) while (fits(q.shape) ...) start(queues.pop(q));
//   queues.prune();                            // after taking, drops empty shapes
//
// Pure data structure: no messages, no clock of its own. Threads: its owner's.

#include "protocol/messages.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

namespace celer::scheduling {

class shape_queues {
public:
  using time_point = std::chrono::steady_clock::time_point;
  struct waiting {
    protocol::task_spec spec;
    time_point since;
  };
  struct shape {
    protocol::resource_set need;
    /// Where its requests may go (GPU model and memory, bundle; part of the shape).
    protocol::placement where;
    /// Its requests' priority (part of the shape).
    std::int32_t priority = 0;
    std::deque<waiting> tasks;
  };

  /// Queues `spec` behind those of its shape (a new shape goes after those of its priority
  /// and above).
  void push(protocol::task_spec spec, time_point now);
  /// Each shape, highest priority first. Take from a shape with pop(); an emptied shape
  /// stays until prune().
  [[nodiscard]] std::vector<shape>& shapes() noexcept { return shapes_; }
  [[nodiscard]] const std::vector<shape>& shapes() const noexcept { return shapes_; }
  /// The first request of `q` (not empty), taken out.
  protocol::task_spec pop(shape& q);
  /// Every request of `q`, taken out.
  std::deque<waiting> take_all(shape& q);
  /// Takes out the requests `drop(spec)` picks; how many.
  template <class F>
  std::size_t erase_if(F drop) {
    std::size_t n = 0;
    for (auto& q : shapes_) n += std::erase_if(q.tasks, [&](const waiting& w) { return drop(w.spec); });
    size_ -= n;
    prune();
    return n;
  }
  /// Takes out the requests `pick(waiting)` picks, in queue order.
  template <class F>
  std::vector<protocol::task_spec> take_if(F pick) {
    std::vector<protocol::task_spec> out;
    for (auto& q : shapes_) {
      for (auto it = q.tasks.begin(); it != q.tasks.end();) {
        if (pick(static_cast<const waiting&>(*it))) {
          out.push_back(std::move(it->spec));
          it = q.tasks.erase(it);
        } else {
          ++it;
        }
      }
    }
    size_ -= out.size();
    prune();
    return out;
  }
  /// The first waiting request `pick(spec)` picks, or null.
  template <class F>
  [[nodiscard]] const protocol::task_spec* find_if(F pick) const {
    for (const auto& q : shapes_)
      for (const auto& w : q.tasks)
        if (pick(w.spec)) return &w.spec;
    return nullptr;
  }
  /// Drops the shapes left empty.
  void prune();
  void clear();
  /// Requests waiting, in all.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// GPU units (resource units) the waiting requests ask for, in all.
  [[nodiscard]] std::int64_t gpu_units() const;
  /// The `n` requests waiting longest, oldest first.
  [[nodiscard]] std::vector<const waiting*> oldest(std::size_t n) const;

private:
  std::vector<shape> shapes_;
  std::size_t size_ = 0;
};

} // namespace celer::scheduling
