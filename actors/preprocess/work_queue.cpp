#include <celer/actors/preprocess/work_queue.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

namespace celer::preprocess {

std::string_view queue_policy_name(queue_policy p) noexcept {
  switch (p) {
  case queue_policy::fixed: return "fixed";
  case queue_policy::steal: return "steal";
  case queue_policy::reshard: return "reshard";
  }
  return "?";
}

expected<queue_policy> parse_queue_policy(std::string_view name) {
  for (auto p : {queue_policy::fixed, queue_policy::steal, queue_policy::reshard})
    if (name == queue_policy_name(p)) return p;
  return error(error_code::invalid_argument, "unknown scheduling policy '" + std::string(name) +
                                                "' (fixed, steal or reshard)");
}

expected<work_queue> work_queue::make(std::vector<double> costs, std::vector<std::string> workers,
                                      work_queue_options options) {
  if (workers.empty()) return error(error_code::invalid_argument, "a work queue needs a worker");
  if (!(options.speed_alpha > 0 && options.speed_alpha <= 1))
    return error(error_code::invalid_argument, "speed_alpha must be in (0, 1]");
  if (options.reshard_every == 0)
    return error(error_code::invalid_argument, "reshard_every must be at least 1");
  if (!(options.reshard_imbalance >= 0))
    return error(error_code::invalid_argument, "reshard_imbalance must be 0 or more");
  std::set<std::string> names;
  for (const auto& w : workers) {
    if (w.empty()) return error(error_code::invalid_argument, "a worker's name is empty");
    if (!names.insert(w).second)
      return error(error_code::invalid_argument, "worker '" + w + "' is named twice");
  }
  work_queue q;
  q.options_ = options;
  q.ring_ = hash_ring({.virtual_nodes = options.virtual_nodes});
  for (std::size_t i = 0; i < costs.size(); ++i) {
    if (!(costs[i] > 0) || !std::isfinite(costs[i]))
      return error(error_code::invalid_argument,
                        "block " + std::to_string(i) + "'s cost is not a positive number");
    q.blocks_.push_back({.cost = costs[i]});
  }
  for (auto& w : workers) {
    if (auto ok = q.ring_.add(w); !ok) return ok.error();
    q.workers_.push_back({.name = std::move(w)});
  }
  for (std::uint64_t b = 0; b < q.blocks_.size(); ++b) q.owner_of(b)->queue.push_back(b);
  q.counters_.blocks = q.blocks_.size();
  return q;
}

work_queue::worker_state* work_queue::find(std::string_view name) {
  for (auto& w : workers_)
    if (w.name == name) return &w;
  return nullptr;
}

const work_queue::worker_state* work_queue::find(std::string_view name) const {
  for (const auto& w : workers_)
    if (w.name == name) return &w;
  return nullptr;
}

work_queue::worker_state* work_queue::owner_of(std::uint64_t block) {
  auto owner = ring_.owner("block-" + std::to_string(block));
  return owner ? find(*owner) : nullptr;
}

double work_queue::typical_seconds_per_cost() const {
  // Workers not measured yet are taken to be as fast as the mean of those that are.
  double sum = 0;
  int n = 0;
  for (const auto& w : workers_)
    if (w.alive && w.seconds_per_cost > 0) sum += w.seconds_per_cost, ++n;
  return n == 0 ? 1.0 : sum / n;
}

double work_queue::expected_seconds(const worker_state& w) const {
  double cost = 0;
  for (auto b : w.queue) cost += blocks_[b].cost;
  return cost * (w.seconds_per_cost > 0 ? w.seconds_per_cost : typical_seconds_per_cost());
}

std::optional<std::uint64_t> work_queue::take(std::string_view name) {
  auto* w = find(name);
  if (w == nullptr || !w->alive) return std::nullopt;
  auto start = [&](std::uint64_t b) {
    w->running.push_back(b);
    ++blocks_[b].running;
    return b;
  };
  while (!orphans_.empty()) {  // blocks of a failed worker come first
    auto b = orphans_.front();
    orphans_.pop_front();
    if (!blocks_[b].done) return start(b);
  }
  while (!w->queue.empty()) {
    auto b = w->queue.front();
    w->queue.pop_front();
    if (!blocks_[b].done) return start(b);
  }
  if (options_.policy == queue_policy::fixed) return std::nullopt;
  // Steal the last block of the queue that would take longest to drain.
  worker_state* victim = nullptr;
  double longest = 0;
  for (auto& other : workers_) {
    if (&other == w || other.queue.empty()) continue;
    double t = expected_seconds(other);
    if (victim == nullptr || t > longest) victim = &other, longest = t;
  }
  while (victim != nullptr && !victim->queue.empty()) {
    auto b = victim->queue.back();
    victim->queue.pop_back();
    if (!blocks_[b].done) {
      ++counters_.stolen;
      return start(b);
    }
  }
  // Nothing queued anywhere: a backup copy of a block only one other worker runs, from the
  // worker most likely to be last (never measured, else the slowest).
  worker_state* slowest = nullptr;
  auto slowness = [](const worker_state& o) {
    return o.seconds_per_cost > 0 ? o.seconds_per_cost : std::numeric_limits<double>::infinity();
  };
  for (auto& other : workers_) {
    if (&other == w) continue;
    const bool has = std::any_of(other.running.begin(), other.running.end(), [&](auto b) {
      return !blocks_[b].done && blocks_[b].running == 1;
    });
    if (has && (slowest == nullptr || slowness(other) > slowness(*slowest))) slowest = &other;
  }
  if (slowest == nullptr) return std::nullopt;
  for (auto b : slowest->running)
    if (!blocks_[b].done && blocks_[b].running == 1) {
      ++counters_.backups;
      return start(b);
    }
  return std::nullopt;
}

bool work_queue::done(std::string_view name, std::uint64_t block, double seconds) {
  if (block >= blocks_.size()) return false;
  auto& b = blocks_[block];
  if (auto* w = find(name)) {
    auto it = std::find(w->running.begin(), w->running.end(), block);
    if (it != w->running.end()) {
      w->running.erase(it);
      --b.running;
    }
    if (!b.done && seconds >= 0) {
      double spc = seconds / b.cost;
      w->seconds_per_cost = w->seconds_per_cost > 0
                                ? options_.speed_alpha * spc +
                                      (1 - options_.speed_alpha) * w->seconds_per_cost
                                : spc;
      ++w->done;
    }
  }
  if (b.done) {
    ++counters_.duplicates;
    return false;
  }
  b.done = true;
  ++done_count_;
  if (options_.policy == queue_policy::reshard && ++since_reshard_ >= options_.reshard_every) {
    since_reshard_ = 0;
    reshard();
  }
  return true;
}

void work_queue::requeue(std::uint64_t block, bool front) {
  if (blocks_[block].done) return;
  ++counters_.requeued;
  if (options_.policy != queue_policy::fixed) {
    if (front) orphans_.push_front(block);
    else orphans_.push_back(block);
    return;
  }
  if (auto* owner = owner_of(block)) {
    if (front) owner->queue.push_front(block);
    else owner->queue.push_back(block);
  } else {
    orphans_.push_back(block);  // no live worker: kept until one is revived
  }
}

void work_queue::give_back(std::string_view name, std::uint64_t block) {
  auto* w = find(name);
  if (w == nullptr || block >= blocks_.size()) return;
  auto it = std::find(w->running.begin(), w->running.end(), block);
  if (it == w->running.end()) return;
  w->running.erase(it);
  --blocks_[block].running;
  requeue(block, /*front=*/true);
}

std::size_t work_queue::fail(std::string_view name) {
  auto* w = find(name);
  if (w == nullptr || !w->alive) return 0;
  w->alive = false;
  (void)ring_.remove(w->name);
  auto running = std::move(w->running);
  auto queued = std::move(w->queue);
  w->running.clear();
  w->queue.clear();
  std::size_t n = 0;
  for (auto b : running) {
    --blocks_[b].running;
    if (!blocks_[b].done) requeue(b, /*front=*/true), ++n;
  }
  for (auto b : queued)
    if (!blocks_[b].done) requeue(b, /*front=*/false), ++n;
  return n;
}

void work_queue::revive(std::string_view name) {
  auto* w = find(name);
  if (w == nullptr) {
    workers_.push_back({.name = std::string(name)});
    w = &workers_.back();
  } else if (w->alive) {
    return;
  }
  w->alive = true;
  (void)ring_.add(w->name);
  if (options_.policy == queue_policy::fixed) {
    // Blocks that waited with no live worker go to their owners now. Blocks already dealt
    // to other workers stay there.
    std::deque<std::uint64_t> waiting;
    waiting.swap(orphans_);
    for (auto b : waiting)
      if (!blocks_[b].done) owner_of(b)->queue.push_back(b);
  }
}

void work_queue::reshard() {
  // Deal every queued block again: each live worker gets a share of the queued cost in
  // proportion to its speed (1 / seconds per cost), counting what it is running now, so
  // every worker is expected to finish at the same time. A worker keeps its own blocks
  // first (they are dealt back to it in their order), so little moves when speeds agree.
  std::vector<worker_state*> live;
  for (auto& w : workers_)
    if (w.alive) live.push_back(&w);
  if (live.size() < 2) return;
  const double typical = typical_seconds_per_cost();
  double total_cost = 0, total_speed = 0;
  std::vector<double> speed(live.size()), running_cost(live.size(), 0);
  for (std::size_t i = 0; i < live.size(); ++i) {
    auto& w = *live[i];
    speed[i] = 1.0 / (w.seconds_per_cost > 0 ? w.seconds_per_cost : typical);
    total_speed += speed[i];
    for (auto b : w.queue)
      if (!blocks_[b].done) total_cost += blocks_[b].cost;
    for (auto b : w.running) running_cost[i] += blocks_[b].cost;
  }
  if (total_cost == 0) return;
  double earliest = std::numeric_limits<double>::infinity(), latest = 0;
  for (std::size_t i = 0; i < live.size(); ++i) {
    double cost = running_cost[i];
    for (auto b : live[i]->queue)
      if (!blocks_[b].done) cost += blocks_[b].cost;
    const double finish = cost / speed[i];
    earliest = std::min(earliest, finish);
    latest = std::max(latest, finish);
  }
  if (latest - earliest <= options_.reshard_imbalance * latest) return;
  double all = total_cost + std::accumulate(running_cost.begin(), running_cost.end(), 0.0);
  std::vector<std::uint64_t> surplus;
  std::vector<double> room(live.size());
  for (std::size_t i = 0; i < live.size(); ++i) {
    auto& w = *live[i];
    double target = all * speed[i] / total_speed - running_cost[i];
    double kept = 0;
    std::deque<std::uint64_t> keep;
    for (auto b : w.queue) {
      if (blocks_[b].done) continue;
      if (kept + blocks_[b].cost / 2 <= target) keep.push_back(b), kept += blocks_[b].cost;
      else surplus.push_back(b);
    }
    w.queue.swap(keep);
    room[i] = target - kept;
  }
  counters_.resharded += surplus.size();
  ++counters_.reshards;
  // Hand the surplus, in block order, to whoever has most room left.
  std::sort(surplus.begin(), surplus.end());
  for (auto b : surplus) {
    auto i = static_cast<std::size_t>(std::max_element(room.begin(), room.end()) - room.begin());
    live[i]->queue.push_back(b);
    room[i] -= blocks_[b].cost;
  }
}

work_queue_stats work_queue::stats() const {
  auto s = counters_;
  s.done = done_count_;
  s.running = 0;
  s.queued = 0;
  for (const auto& b : blocks_)
    if (!b.done && b.running > 0) ++s.running;
  for (const auto& w : workers_)
    for (auto b : w.queue)
      if (!blocks_[b].done) ++s.queued;
  for (auto b : orphans_)
    if (!blocks_[b].done) ++s.queued;
  return s;
}

std::size_t work_queue::queued(std::string_view name) const {
  const auto* w = find(name);
  if (w == nullptr) return 0;
  std::size_t n = 0;
  for (auto b : w->queue)
    if (!blocks_[b].done) ++n;
  return n;
}

double work_queue::seconds_per_cost(std::string_view name) const {
  const auto* w = find(name);
  return w == nullptr ? 0 : w->seconds_per_cost;
}

std::map<std::string, std::size_t> work_queue::done_by_worker() const {
  std::map<std::string, std::size_t> out;
  for (const auto& w : workers_) out[w.name] = w.done;
  return out;
}

} // namespace celer::preprocess
