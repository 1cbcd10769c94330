// A node's waiting work by resource shape (shape_queues.hpp).
#include "scheduler/shape_queues.hpp"

#include <algorithm>
#include <utility>

namespace celer::scheduling {

void shape_queues::push(protocol::task_spec spec, time_point now) {
  ++size_;
  for (auto& q : shapes_) {
    if (q.need.amounts == spec.resources.amounts && q.where == spec.where && q.priority == spec.priority) {
      q.tasks.push_back({std::move(spec), now});
      return;
    }
  }
  // A new shape goes after those of its priority and above: dispatch serves higher first.
  auto at = std::find_if(shapes_.begin(), shapes_.end(), [&](const shape& q) { return q.priority < spec.priority; });
  at = shapes_.insert(at, shape{spec.resources, spec.where, spec.priority, {}});
  at->tasks.push_back({std::move(spec), now});
}

protocol::task_spec shape_queues::pop(shape& q) {
  auto spec = std::move(q.tasks.front().spec);
  q.tasks.pop_front();
  --size_;
  return spec;
}

std::deque<shape_queues::waiting> shape_queues::take_all(shape& q) {
  size_ -= q.tasks.size();
  return std::exchange(q.tasks, {});
}

void shape_queues::prune() {
  std::erase_if(shapes_, [](const shape& q) { return q.tasks.empty(); });
}

void shape_queues::clear() {
  shapes_.clear();
  size_ = 0;
}

std::int64_t shape_queues::gpu_units() const {
  std::int64_t units = 0;
  for (const auto& q : shapes_) units += q.need.units(protocol::gpu) * static_cast<std::int64_t>(q.tasks.size());
  return units;
}

std::vector<const shape_queues::waiting*> shape_queues::oldest(std::size_t n) const {
  std::vector<const waiting*> all;
  all.reserve(size_);
  for (const auto& q : shapes_)
    for (const auto& w : q.tasks) all.push_back(&w);
  const auto cut = all.begin() + static_cast<std::ptrdiff_t>(std::min(n, all.size()));
  std::partial_sort(all.begin(), cut, all.end(), [](const auto* a, const auto* b) { return a->since < b->since; });
  all.erase(cut, all.end());
  return all;
}

} // namespace celer::scheduling
