// The data loader (<celer/actors/loader.hpp>): order independent of threads, shards that
// partition the data, a bounded prefetch window, and counters that expose a slow loader.
// Run under ThreadSanitizer by the sanitizer builds (.ci/run).
#include <celer/actors/loader.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

using namespace celer::actors;

namespace {

/// n samples of 3 features each: sample i is {i, i + 0.25, i + 0.5}, label i % 10.
dataset numbered(std::size_t n) {
  dataset d;
  d.name = "numbered";
  d.sample_shape = {3};
  d.classes = 10;
  for (std::size_t i = 0; i < n; ++i) {
    const auto v = static_cast<float>(i);
    d.x.insert(d.x.end(), {v, v + 0.25f, v + 0.5f});
    d.y.push_back(static_cast<std::int64_t>(i % 10));
  }
  return d;
}

std::vector<batch> take(data_loader& loader, std::size_t n) {
  std::vector<batch> out;
  while (out.size() < n) {
    auto b = loader.next();
    if (!b) break;
    out.push_back(std::move(*b));
  }
  return out;
}

/// A source whose fill() holds each batch until `expected` fills are in flight at once (or a
/// generous deadline passes), and records the most it saw in flight.
class gathering_source final : public batch_source {
public:
  gathering_source(std::size_t samples, std::size_t expected, std::atomic<std::size_t>& most)
      : samples_(samples), expected_(expected), most_(most) {}
  [[nodiscard]] std::size_t size() const override { return samples_; }
  void fill(batch& out) const override {
    std::unique_lock lock(m_);
    ++in_flight_;
    if (in_flight_ > most_.load()) most_.store(in_flight_);
    cv_.notify_all();
    cv_.wait_for(lock, std::chrono::seconds(20), [&] { return most_.load() >= expected_; });
    --in_flight_;
    out.y.assign(out.samples.begin(), out.samples.end());
  }

private:
  std::size_t samples_;
  std::size_t expected_;
  std::atomic<std::size_t>& most_;
  mutable std::mutex m_;
  mutable std::condition_variable cv_;
  mutable std::size_t in_flight_ = 0;
};

} // namespace

TEST_CASE("the loader returns the same batches in the same order with 1 or 4 threads",
          "[actors][loader]") {
  const auto data = numbered(1000);
  auto run = [&](std::size_t threads, std::size_t prefetch) {
    auto loader = make_data_loader(dataset_source(data), {.batch_size = 32, .threads = threads,
                                                          .prefetch = prefetch, .seed = 11});
    REQUIRE(loader.has_value());
    CHECK(loader->batches_per_epoch() == 32);  // 31 of 32 and one of 8
    return take(*loader, 3 * 32);
  };
  const auto one = run(1, 1);
  const auto four = run(4, 8);
  REQUIRE(one.size() == 96);
  REQUIRE(four.size() == 96);
  for (std::size_t k = 0; k < one.size(); ++k) {
    INFO("batch " << k);
    CHECK(one[k].number == k);
    CHECK(one[k].epoch == k / 32);
    CHECK(four[k].number == k);
    CHECK(four[k].samples == one[k].samples);
    CHECK(four[k].x == one[k].x);
    CHECK(four[k].y == one[k].y);
    // The rows are the samples': x starts at the sample's number, y is it mod 10.
    REQUIRE(one[k].x.size() == 3 * one[k].samples.size());
    for (std::size_t i = 0; i < one[k].samples.size(); ++i) {
      CHECK(one[k].x[3 * i] == static_cast<float>(one[k].samples[i]));
      CHECK(one[k].y[i] == static_cast<std::int64_t>(one[k].samples[i] % 10));
    }
  }
  // Each epoch is every sample once, in an order of its own.
  std::vector<std::vector<std::size_t>> epochs(3);
  for (const auto& b : one) epochs[b.epoch].insert(epochs[b.epoch].end(), b.samples.begin(), b.samples.end());
  for (const auto& e : epochs) {
    CHECK(e.size() == 1000);
    CHECK(std::set<std::size_t>(e.begin(), e.end()).size() == 1000);
  }
  CHECK(epochs[0] != epochs[1]);
  // Another seed, another order.
  auto other = make_data_loader(dataset_source(data), {.batch_size = 32, .seed = 12});
  REQUIRE(other.has_value());
  CHECK(other->next()->samples != one[0].samples);
}

TEST_CASE("weighted shards cover every sample once, in proportion, and equal weights split as before", "[actors][loader]") {
  const std::vector<double> weights{3.0, 1.0, 2.0};
  for (std::uint64_t epoch : {0, 3}) {
    std::vector<int> seen(1003, 0);
    std::vector<std::size_t> sizes;
    for (std::size_t rank = 0; rank < weights.size(); ++rank) {
      const auto mine = shard_order(1003, rank, weights, /*seed=*/4, epoch);
      sizes.push_back(mine.size());
      for (auto s : mine) ++seen[s];
    }
    CHECK(std::count(seen.begin(), seen.end(), 1) == 1003);
    // 3/6, 1/6 and 2/6 of 1,003, to within one sample.
    CHECK(std::abs(static_cast<double>(sizes[0]) - 1003.0 / 2) <= 1);
    CHECK(std::abs(static_cast<double>(sizes[1]) - 1003.0 / 6) <= 1);
    CHECK(std::abs(static_cast<double>(sizes[2]) - 1003.0 / 3) <= 1);
  }
  const std::vector<double> equal{1.0, 1.0, 1.0, 1.0};
  for (std::size_t rank = 0; rank < 4; ++rank)
    CHECK(shard_order(1003, rank, equal, 7, 2) == shard_order(1003, rank, 4, 7, 2));
  CHECK(shard_order(10, 3, weights, 0, 0).empty());
  CHECK(shard_order(10, 0, std::vector<double>{1.0, 0.0}, 0, 0).empty());

  // Through loaders: batches of 12 and 4 over shards of 3 to 1 take as many batches an epoch.
  const auto data = numbered(160);
  std::vector<std::size_t> per_epoch;
  for (std::size_t rank = 0; rank < 2; ++rank) {
    auto loader = make_data_loader(dataset_source(data), {.batch_size = rank == 0 ? 12u : 4u, .threads = 1, .seed = 9,
                                                          .rank = rank, .world = 2, .shard_weights = {3.0, 1.0}, .epochs = 1});
    REQUIRE(loader.has_value());
    per_epoch.push_back(loader->batches_per_epoch());
  }
  CHECK(per_epoch == std::vector<std::size_t>{10, 10});
  auto bad = make_data_loader(dataset_source(data), {.rank = 0, .world = 2, .shard_weights = {1.0}});
  REQUIRE_FALSE(bad.has_value());
  CHECK_THAT(bad.error().message(), Catch::Contains("1 shard weights for 2 workers"));
  bad = make_data_loader(dataset_source(data), {.rank = 0, .world = 2, .shard_weights = {1.0, -2.0}});
  REQUIRE_FALSE(bad.has_value());
  CHECK_THAT(bad.error().message(), Catch::Contains("above 0"));
}

TEST_CASE("a shard split covers every sample exactly once across workers", "[actors][loader]") {
  for (std::size_t world : {1, 3, 4, 7}) {
    for (std::uint64_t epoch : {0, 1, 5}) {
      INFO("world " << world << ", epoch " << epoch);
      std::vector<int> seen(1003, 0);
      std::size_t smallest = 1003;
      std::size_t largest = 0;
      for (std::size_t rank = 0; rank < world; ++rank) {
        const auto mine = shard_order(1003, rank, world, /*seed=*/4, epoch);
        smallest = std::min(smallest, mine.size());
        largest = std::max(largest, mine.size());
        for (auto s : mine) ++seen[s];
      }
      CHECK(std::count(seen.begin(), seen.end(), 1) == 1003);
      CHECK(largest - smallest <= 1);
    }
  }
  CHECK(shard_order(10, 2, 2, 0, 0).empty());
  // Through the loaders of three workers, one epoch each: the same partition.
  const auto data = numbered(100);
  std::vector<int> seen(100, 0);
  for (std::size_t rank = 0; rank < 3; ++rank) {
    auto loader = make_data_loader(dataset_source(data), {.batch_size = 8, .threads = 2, .seed = 9,
                                                          .rank = rank, .world = 3, .epochs = 1});
    REQUIRE(loader.has_value());
    std::size_t batches = 0;
    while (auto b = loader->next()) {
      ++batches;
      for (auto s : b->samples) ++seen[s];
    }
    CHECK(batches == loader->batches_per_epoch());
    CHECK_FALSE(loader->next().has_value());  // still nothing after the end
  }
  CHECK(std::count(seen.begin(), seen.end(), 1) == 100);
}

TEST_CASE("loader threads assemble batches at once, never more than prefetch ahead",
          "[actors][loader]") {
  for (std::size_t threads : {1, 4}) {
    INFO(threads << " threads");
    std::atomic<std::size_t> most{0};
    auto loader = make_data_loader(std::make_unique<gathering_source>(64, threads, most),
                                   {.batch_size = 4, .threads = threads, .prefetch = 4, .epochs = 1});
    REQUIRE(loader.has_value());
    std::size_t got = 0;
    while (auto b = loader->next()) {
      const auto s = loader->stats();
      CHECK(s.assembled <= s.returned + 4);  // the window holds at most prefetch batches
      CHECK(b->y.size() == 4);
      ++got;
    }
    CHECK(got == 16);
    CHECK(most.load() == threads);  // all the threads were assembling at the same time
  }
  // Four threads but a window of two: two at most in flight.
  std::atomic<std::size_t> most{0};
  {
    auto loader = make_data_loader(std::make_unique<gathering_source>(64, 2, most),
                                   {.batch_size = 4, .threads = 4, .prefetch = 2, .epochs = 1});
    REQUIRE(loader.has_value());
    while (loader->next()) {
    }
  }
  CHECK(most.load() == 2);
}

TEST_CASE("a slow loader's cost and the trainer's waits are counted, with one thread and with four",
          "[actors][loader]") {
  // Each batch costs the loader 3 ms of busy CPU and the trainer 2 ms (a sleep, as a step on
  // an accelerator leaves the CPU to the loader). One loader thread leaves the trainer
  // waiting; four threads and a window of eight keep ahead of it. How much is a matter of
  // the machine's load (this also runs under ThreadSanitizer on a busy CI machine), so the
  // times are reported, not asserted; the counters' own consistency is.
  const auto data = numbered(512);
  auto run = [&](std::size_t threads) {
    auto loader = make_data_loader(dataset_source(data),
                                   {.batch_size = 8, .threads = threads, .prefetch = 8,
                                    .injected_cost = std::chrono::milliseconds(3)});
    REQUIRE(loader.has_value());
    for (int k = 0; k < 40; ++k) {
      REQUIRE(loader->next().has_value());
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return loader->stats();
  };
  const loader_stats slow = run(1);
  const loader_stats fast = run(4);
  WARN("1 thread: waited " << slow.wait_seconds << " s in " << slow.stalls << " stalls; 4 threads: "
                           << fast.wait_seconds << " s in " << fast.stalls);
  // The counters agree with each other: no more stalls than calls, no wait without a stall.
  for (const auto& s : {slow, fast}) {
    CHECK(s.stalls <= s.returned);
    if (s.stalls == 0) CHECK(s.wait_seconds == 0.0);
  }
  // Each batch took at least its injected cost; 40 were returned.
  CHECK(slow.returned == 40);
  CHECK(slow.assemble_seconds >= 0.003 * static_cast<double>(slow.assembled));
  CHECK(fast.assembled >= 40);
}

TEST_CASE("a text loader gives consecutive windows, and a loader stops mid-stream cleanly",
          "[actors][loader]") {
  std::vector<std::int64_t> tokens(1001);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::int64_t>(i);
  auto loader = make_data_loader(text_source(tokens, 10),
                                 {.batch_size = 16, .threads = 3, .prefetch = 6, .seed = 2});
  REQUIRE(loader.has_value());
  CHECK(loader->batches_per_epoch() == 7);  // 100 windows
  for (int k = 0; k < 10; ++k) {
    auto b = loader->next();
    REQUIRE(b.has_value());
    REQUIRE(b->inputs.size() == 10 * b->samples.size());
    REQUIRE(b->y.size() == b->inputs.size());
    for (std::size_t i = 0; i < b->samples.size(); ++i) {
      CHECK(b->inputs[10 * i] == static_cast<std::int64_t>(10 * b->samples[i]));
      CHECK(b->y[10 * i + 9] == static_cast<std::int64_t>(10 * b->samples[i] + 10));
    }
  }
  // The loader goes out of scope with threads blocked on a full window: its destructor
  // wakes and joins them (ThreadSanitizer and the leak checker watch this).
}

TEST_CASE("bad loader options are refused with the reason", "[actors][loader]") {
  const auto data = numbered(10);
  CHECK_THAT(make_data_loader(nullptr, {}).error().message(), Catch::Contains("source"));
  CHECK_THAT(make_data_loader(dataset_source(data), {.threads = 0}).error().message(),
             Catch::Contains("at least 1"));
  CHECK_THAT(make_data_loader(dataset_source(data), {.rank = 2, .world = 2}).error().message(),
             Catch::Contains("rank 2"));
  CHECK_THAT(make_data_loader(dataset_source(data), {.batch_size = 16, .drop_last = true}).error().message(),
             Catch::Contains("no batch"));
  auto short_last = make_data_loader(dataset_source(data), {.batch_size = 4, .epochs = 1});
  REQUIRE(short_last.has_value());
  CHECK(short_last->batches_per_epoch() == 3);
}
