#include <celer/actors/preprocess/work_queue.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace pp = celer::preprocess;

namespace {

std::vector<std::string> names(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back("w" + std::to_string(i));
  return out;
}

/// Simulates workers of the given speeds (cost units per second) on one clock: each takes
/// a block when idle and finishes it cost / speed later. Returns the makespan; `done_by`
/// gets who finished what.
double simulate(pp::work_queue& q, const std::vector<double>& costs,
                const std::map<std::string, double>& speed,
                std::map<std::uint64_t, std::string>* done_by = nullptr) {
  struct running {
    std::string worker;
    std::uint64_t block;
    double ends;
  };
  std::vector<running> now;
  double clock = 0;
  for (const auto& [w, s] : speed)
    if (auto b = q.take(w)) now.push_back({w, *b, costs[*b] / s});
  while (!now.empty()) {
    auto first = std::min_element(now.begin(), now.end(),
                                  [](const auto& a, const auto& b) { return a.ends < b.ends; });
    auto r = *first;
    now.erase(first);
    clock = r.ends;
    const double started = clock - costs[r.block] / speed.at(r.worker);
    if (q.done(r.worker, r.block, clock - started) && done_by) (*done_by)[r.block] = r.worker;
    if (auto b = q.take(r.worker)) now.push_back({r.worker, *b, clock + costs[*b] / speed.at(r.worker)});
  }
  return clock;
}

} // namespace

TEST_CASE("every block is dealt to one worker, the same way each time", "[preprocess]") {
  std::vector<double> costs(400, 1.0);
  auto a = pp::work_queue::make(costs, names(4), {.policy = pp::queue_policy::fixed});
  auto b = pp::work_queue::make(costs, names(4), {.policy = pp::queue_policy::fixed});
  REQUIRE(a);
  REQUIRE(b);
  std::size_t total = 0;
  for (const auto& w : names(4)) {
    CHECK(a->queued(w) == b->queued(w));
    CHECK(a->queued(w) > 50);  // about 100 each
    total += a->queued(w);
  }
  CHECK(total == 400);
  std::set<std::uint64_t> seen;
  for (const auto& w : names(4))
    while (auto blk = a->take(w)) CHECK(seen.insert(*blk).second);
  CHECK(seen.size() == 400);
}

TEST_CASE("a bad work queue is refused with what is wrong", "[preprocess]") {
  auto none = pp::work_queue::make({1.0}, {});
  REQUIRE_FALSE(none);
  CHECK(none.error().code() == celer::error_code::invalid_argument);
  auto twice = pp::work_queue::make({1.0}, {"a", "a"});
  REQUIRE_FALSE(twice);
  CHECK(twice.error().message().find("'a' is named twice") != std::string::npos);
  auto cost = pp::work_queue::make({1.0, 0.0}, {"a"});
  REQUIRE_FALSE(cost);
  CHECK(cost.error().message().find("block 1") != std::string::npos);
  CHECK(pp::parse_queue_policy("steal").value() == pp::queue_policy::steal);
  auto bad = pp::parse_queue_policy("greedy");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message().find("fixed, steal or reshard") != std::string::npos);
}

TEST_CASE("with one slow worker, stealing and re-sharding finish far sooner than fixed shares",
          "[preprocess]") {
  std::vector<double> costs;
  for (int i = 0; i < 800; ++i) costs.push_back(1.0 + (i * 7919 % 13));  // uneven blocks
  const std::map<std::string, double> speed{{"w0", 10}, {"w1", 10}, {"w2", 10}, {"w3", 2.5}};
  double makespan[3];
  int i = 0;
  for (auto policy : {pp::queue_policy::fixed, pp::queue_policy::steal, pp::queue_policy::reshard}) {
    auto q = pp::work_queue::make(costs, names(4), {.policy = policy});
    REQUIRE(q);
    std::map<std::uint64_t, std::string> done_by;
    makespan[i++] = simulate(*q, costs, speed, &done_by);
    CHECK(q->finished());
    CHECK(done_by.size() == costs.size());
    // Every backup copy finished second or first: one of each pair is a duplicate.
    CHECK(q->stats().duplicates == q->stats().backups);
    if (policy == pp::queue_policy::fixed) CHECK(q->stats().stolen + q->stats().backups == 0);
    else CHECK(q->stats().stolen + q->stats().resharded > 0);
  }
  const double total = [&] {
    double t = 0;
    for (double c : costs) t += c;
    return t;
  }();
  const double ideal = total / 32.5;
  WARN("makespan fixed " << makespan[0] << ", steal " << makespan[1] << ", reshard "
                         << makespan[2] << ", ideal " << ideal);
  CHECK(makespan[0] > 3 * ideal);       // the slow worker's quarter dominates
  CHECK(makespan[1] < 0.5 * makespan[0]);
  CHECK(makespan[2] < 1.1 * ideal + 13);  // within about one block of the ideal
  CHECK(makespan[2] <= makespan[1] * 1.05);
}

TEST_CASE("a failed worker's running and queued blocks are done by the others, once",
          "[preprocess]") {
  for (auto policy : {pp::queue_policy::fixed, pp::queue_policy::steal, pp::queue_policy::reshard}) {
    std::vector<double> costs(100, 1.0);
    auto q = pp::work_queue::make(costs, names(3), {.policy = policy});
    REQUIRE(q);
    auto b0 = q->take("w0");
    auto b1 = q->take("w1");
    auto held = q->take("w2");
    REQUIRE(b0);
    REQUIRE(b1);
    REQUIRE(held);
    CHECK(q->done("w0", *b0, 1.0));
    const auto queued_on_w2 = q->queued("w2");
    CHECK(q->fail("w2") == queued_on_w2 + 1);
    CHECK_FALSE(q->take("w2"));  // dead workers get nothing
    // The block w2 held is the first anyone gets next (fixed: its new owner).
    std::set<std::uint64_t> done{*b0};
    bool held_done = false;
    CHECK(q->done("w1", *b1, 1.0));
    done.insert(*b1);
    for (bool more = true; more;) {
      more = false;
      for (const auto& w : {"w0", "w1"})
        if (auto b = q->take(w)) {
          more = true;
          held_done = held_done || *b == *held;
          CHECK(q->done(w, *b, 1.0));
          CHECK(done.insert(*b).second);
        }
    }
    CHECK(held_done);
    CHECK(q->finished());
    CHECK(done.size() == 100);
    // The dead worker's late result is a duplicate, dropped.
    CHECK_FALSE(q->done("w2", *held, 1.0));
    CHECK(q->stats().duplicates == 1);
  }
}

TEST_CASE("a block given back goes to the front, and a revived worker works again",
          "[preprocess]") {
  std::vector<double> costs(20, 1.0);
  auto q = pp::work_queue::make(costs, names(2), {.policy = pp::queue_policy::steal});
  REQUIRE(q);
  auto b = q->take("w0");
  REQUIRE(b);
  q->give_back("w0", *b);
  auto again = q->take("w1");
  REQUIRE(again);
  CHECK(*again == *b);
  CHECK(q->fail("w1") > 0);
  q->revive("w1");
  // w1 is alive again and takes work (an orphan first, then stolen blocks).
  auto next = q->take("w1");
  CHECK(next.has_value());
}

TEST_CASE("idle workers run backup copies of the last blocks a stalled worker holds",
          "[preprocess]") {
  std::vector<double> costs(6, 1.0);
  auto q = pp::work_queue::make(costs, names(3), {.policy = pp::queue_policy::steal});
  REQUIRE(q);
  // w2 takes two blocks and never answers (a worker that was never placed, or hangs).
  auto s1 = q->take("w2");
  auto s2 = q->take("w2");
  REQUIRE(s1);
  REQUIRE(s2);
  std::set<std::uint64_t> done;
  for (bool more = true; more;) {
    more = false;
    for (const auto& w : {"w0", "w1"})
      if (auto b = q->take(w)) {
        more = true;
        if (q->done(w, *b, 1.0)) done.insert(*b);
      }
  }
  CHECK(q->finished());
  CHECK(done.size() == 6);
  CHECK(q->stats().backups == 2);
  CHECK_FALSE(q->done("w2", *s1, 9.0));  // its late answer is a duplicate
  // Fixed shares make no backups: the stalled worker's blocks stay its own.
  auto f = pp::work_queue::make(costs, names(3), {.policy = pp::queue_policy::fixed});
  REQUIRE(f);
  while (f->take("w2")) {
  }
  while (auto b = f->take("w0")) CHECK(f->done("w0", *b, 1.0));
  while (auto b = f->take("w1")) CHECK(f->done("w1", *b, 1.0));
  CHECK_FALSE(f->take("w0").has_value());
  CHECK_FALSE(f->finished());
  CHECK(f->stats().backups == 0);
}

TEST_CASE("under fixed shares, blocks of a worker with no live peer wait for a revival",
          "[preprocess]") {
  std::vector<double> costs(10, 1.0);
  auto q = pp::work_queue::make(costs, {"only"}, {.policy = pp::queue_policy::fixed});
  REQUIRE(q);
  auto b = q->take("only");
  REQUIRE(b);
  CHECK(q->fail("only") == 10);
  CHECK(q->stats().queued == 10);
  q->revive("only");
  std::size_t n = 0;
  while (auto blk = q->take("only")) {
    CHECK(q->done("only", *blk, 0.1));
    ++n;
  }
  CHECK(n == 10);
  CHECK(q->finished());
}
