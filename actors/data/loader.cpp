// The data loader (<celer/actors/loader.hpp>): a pool of threads assembling numbered batches
// into a bounded window ahead of one consumer, who takes them back in number order.
#include <celer/actors/loader.hpp>

#include "draw.hpp"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <limits>
#include <map>
#include <mutex>
#include <thread>

namespace celer::actors {
namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

/// Busy for `d` of wall-clock time: the injected cost keeps a core as real work would.
void spin_for(std::chrono::nanoseconds d) {
  if (d <= std::chrono::nanoseconds::zero()) return;
  const auto until = clock_type::now() + d;
  while (clock_type::now() < until) {
  }
}

class dataset_batch_source final : public batch_source {
public:
  explicit dataset_batch_source(const dataset& d) : data_(d) {}
  [[nodiscard]] std::size_t size() const override { return data_.size(); }
  void fill(batch& out) const override {
    const std::size_t f = data_.features();
    out.x.reserve(out.samples.size() * f);
    out.y.reserve(out.samples.size());
    for (auto r : out.samples) {
      const auto row = data_.x.begin() + static_cast<std::ptrdiff_t>(r * f);
      out.x.insert(out.x.end(), row, row + static_cast<std::ptrdiff_t>(f));
      out.y.push_back(data_.y[r]);
    }
  }

private:
  const dataset& data_;
};

class text_batch_source final : public batch_source {
public:
  text_batch_source(const std::vector<std::int64_t>& tokens, std::int64_t context)
      : tokens_(tokens), context_(static_cast<std::size_t>(std::max<std::int64_t>(context, 1))) {}
  [[nodiscard]] std::size_t size() const override {
    return tokens_.size() > context_ ? (tokens_.size() - 1) / context_ : 0;
  }
  void fill(batch& out) const override {
    out.inputs.reserve(out.samples.size() * context_);
    out.y.reserve(out.samples.size() * context_);
    const auto ctx = static_cast<std::ptrdiff_t>(context_);
    for (auto w : out.samples) {
      const auto at = tokens_.begin() + static_cast<std::ptrdiff_t>(w * context_);
      out.inputs.insert(out.inputs.end(), at, at + ctx);
      out.y.insert(out.y.end(), at + 1, at + ctx + 1);
    }
  }

private:
  const std::vector<std::int64_t>& tokens_;
  std::size_t context_;
};

} // namespace

std::unique_ptr<batch_source> dataset_source(const dataset& data) {
  return std::make_unique<dataset_batch_source>(data);
}

std::unique_ptr<batch_source> text_source(const std::vector<std::int64_t>& tokens,
                                          std::int64_t context) {
  return std::make_unique<text_batch_source>(tokens, context);
}

namespace {

/// The epoch's permutation of 0 .. samples-1: the same on every worker.
std::vector<std::size_t> permutation(std::size_t samples, std::uint64_t seed, std::uint64_t epoch) {
  std::vector<std::size_t> all(samples);
  for (std::size_t i = 0; i < samples; ++i) all[i] = i;
  // seed_seq's mixing is specified by the standard, so (seed, epoch) seeds the same engine
  // state everywhere.
  std::seed_seq seq{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32),
                    static_cast<std::uint32_t>(epoch), static_cast<std::uint32_t>(epoch >> 32)};
  std::mt19937_64 rng(seq);
  detail::shuffle(all, rng);
  return all;
}

/// The positions smooth weighted round robin deals to `rank` (the same every epoch).
std::vector<std::size_t> weighted_positions(std::size_t samples, std::size_t rank, std::span<const double> weights) {
  if (rank >= weights.size()) return {};
  double total = 0;
  for (double w : weights) {
    if (!(w > 0) || !std::isfinite(w)) return {};
    total += w;
  }
  std::vector<double> credit(weights.size(), 0.0);
  std::vector<std::size_t> mine;
  mine.reserve(static_cast<std::size_t>(static_cast<double>(samples) * weights[rank] / total) + 1);
  for (std::size_t i = 0; i < samples; ++i) {
    std::size_t best = 0;
    for (std::size_t r = 0; r < weights.size(); ++r) {
      credit[r] += weights[r];
      if (credit[r] > credit[best]) best = r;
    }
    credit[best] -= total;
    if (best == rank) mine.push_back(i);
  }
  return mine;
}

} // namespace

std::vector<std::size_t> shard_order(std::size_t samples, std::size_t rank, std::size_t world,
                                     std::uint64_t seed, std::uint64_t epoch) {
  if (world == 0 || rank >= world) return {};
  const auto all = permutation(samples, seed, epoch);
  std::vector<std::size_t> mine;
  mine.reserve(samples / world + 1);
  for (std::size_t i = rank; i < samples; i += world) mine.push_back(all[i]);
  return mine;
}

std::vector<std::size_t> shard_order(std::size_t samples, std::size_t rank, std::span<const double> weights,
                                     std::uint64_t seed, std::uint64_t epoch) {
  auto mine = weighted_positions(samples, rank, weights);
  if (mine.empty()) return {};
  const auto all = permutation(samples, seed, epoch);
  for (auto& i : mine) i = all[i];
  return mine;
}

/// Shared by the consumer and the threads. Everything below `m` is guarded by it, except
/// the members set before the threads start (source, options, sizes), which are read-only.
struct data_loader::state {
  std::unique_ptr<batch_source> source;
  loader_options options;
  std::size_t samples = 0;     // in the whole source
  std::size_t per_epoch = 0;   // batches in one epoch of this shard
  std::uint64_t total = 0;     // batches in all, or the largest uint64 for no end

  mutable std::mutex m;
  std::condition_variable room;   // a thread may claim another batch, or must stop
  std::condition_variable ready_cv;  // a batch was assembled
  bool stop = false;
  std::uint64_t next_claim = 0;   // the next batch number a thread assembles
  std::uint64_t next_return = 0;  // the batch number next() returns next
  // The shard's order for order_epoch. Claims go in number order, so once a thread claims
  // the first batch of an epoch no thread needs the previous epoch's order again.
  std::uint64_t order_epoch = std::numeric_limits<std::uint64_t>::max();
  std::vector<std::size_t> order;
  std::map<std::uint64_t, batch> ready;  // assembled, not yet returned
  loader_stats counters;
  std::vector<std::thread> threads;  // started last, joined first

  ~state() {
    {
      std::lock_guard lock(m);
      stop = true;
    }
    room.notify_all();
    for (auto& t : threads) t.join();
  }

  /// One loader thread: claim the next number while the window has room, take its samples
  /// from the order, assemble it without the lock, hand it over.
  void work() {
    std::unique_lock lock(m);
    for (;;) {
      room.wait(lock, [&] {
        return stop || (next_claim < total && next_claim < next_return + options.prefetch);
      });
      if (stop) return;
      batch b;
      b.number = next_claim++;
      b.epoch = b.number / per_epoch;
      if (order_epoch != b.epoch) {
        order = options.shard_weights.empty()
                  ? shard_order(samples, options.rank, options.world, options.seed, b.epoch)
                  : shard_order(samples, options.rank, options.shard_weights, options.seed, b.epoch);
        order_epoch = b.epoch;
      }
      const std::size_t first = static_cast<std::size_t>(b.number % per_epoch) * options.batch_size;
      const std::size_t last = std::min(first + options.batch_size, order.size());
      b.samples.assign(order.begin() + static_cast<std::ptrdiff_t>(first),
                       order.begin() + static_cast<std::ptrdiff_t>(last));
      lock.unlock();
      const auto start = clock_type::now();
      source->fill(b);
      spin_for(options.injected_cost);
      const double took = seconds_since(start);
      lock.lock();
      ++counters.assembled;
      counters.assemble_seconds += took;
      ready.emplace(b.number, std::move(b));
      ready_cv.notify_all();  // one consumer; it checks for its own number
    }
  }
};

data_loader::data_loader(std::unique_ptr<state> s) : s_(std::move(s)) {}
data_loader::data_loader(data_loader&&) noexcept = default;
data_loader& data_loader::operator=(data_loader&&) noexcept = default;
data_loader::~data_loader() = default;

std::optional<batch> data_loader::next() {
  std::unique_lock lock(s_->m);
  if (s_->next_return >= s_->total) return std::nullopt;
  auto it = s_->ready.find(s_->next_return);
  if (it == s_->ready.end()) {
    ++s_->counters.stalls;
    const auto start = clock_type::now();
    s_->ready_cv.wait(lock, [&] { return (it = s_->ready.find(s_->next_return)) != s_->ready.end(); });
    s_->counters.wait_seconds += seconds_since(start);
  }
  batch b = std::move(it->second);
  s_->ready.erase(it);
  ++s_->next_return;
  ++s_->counters.returned;
  lock.unlock();
  s_->room.notify_one();  // the window moved by one: one more batch may be claimed
  return b;
}

loader_stats data_loader::stats() const {
  std::lock_guard lock(s_->m);
  return s_->counters;
}

std::size_t data_loader::batches_per_epoch() const noexcept { return s_->per_epoch; }

expected<data_loader> make_data_loader(std::unique_ptr<batch_source> source, loader_options options) {
  if (!source) return error(error_code::invalid_argument, "a data loader needs a source");
  if (options.batch_size == 0 || options.threads == 0 || options.prefetch == 0) {
    return error(error_code::invalid_argument,
                 "a data loader needs batch_size, threads and prefetch of at least 1");
  }
  if (options.world == 0 || options.rank >= options.world) {
    return error(error_code::invalid_argument,
                 "rank " + std::to_string(options.rank) + " is not one of world " +
                   std::to_string(options.world) + " workers");
  }
  if (!options.shard_weights.empty()) {
    if (options.shard_weights.size() != options.world)
      return error(error_code::invalid_argument, std::to_string(options.shard_weights.size()) + " shard weights for " +
                                                   std::to_string(options.world) + " workers: give one each");
    for (double w : options.shard_weights)
      if (!(w > 0) || !std::isfinite(w))
        return error(error_code::invalid_argument, "a shard weight is " + std::to_string(w) + ": each must be above 0");
  }
  auto s = std::make_unique<data_loader::state>();
  s->samples = source->size();
  const std::size_t shard =
    options.shard_weights.empty()
      ? s->samples / options.world + (options.rank < s->samples % options.world ? 1 : 0)
      : weighted_positions(s->samples, options.rank, options.shard_weights).size();
  s->per_epoch = options.drop_last ? shard / options.batch_size
                                   : (shard + options.batch_size - 1) / options.batch_size;
  if (s->per_epoch == 0) {
    return error(error_code::invalid_argument,
                 "shard " + std::to_string(options.rank) + " of " + std::to_string(options.world) +
                   " holds " + std::to_string(shard) + " samples: no batch of " +
                   std::to_string(options.batch_size) + (options.drop_last ? " (drop_last)" : ""));
  }
  s->total = options.epochs == 0 ? std::numeric_limits<std::uint64_t>::max()
                                 : options.epochs * s->per_epoch;
  s->source = std::move(source);
  s->options = options;
  s->threads.reserve(options.threads);
  for (std::size_t i = 0; i < options.threads; ++i) {
    s->threads.emplace_back([p = s.get()] { p->work(); });
  }
  return data_loader(std::move(s));
}

} // namespace celer::actors
