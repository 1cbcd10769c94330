// A core's task totals and scheduling-latency histogram (core/task_stats.hpp), as the job
// heartbeat reports them.
#include "core/task_stats.hpp"

#include <catch2/catch.hpp>

#include <chrono>

using namespace celer;
using std::chrono::microseconds;

TEST_CASE("task stats report each total as counted", "[core][task_stats]") {
  task_stats stats;
  for (int i = 0; i < 3; ++i) stats.count_submitted();
  stats.count_finished();
  stats.count_failed();
  stats.count_retry();
  stats.count_retry();
  protocol::task_counts c;
  c.waiting = 7;  // not the stats': left as it is
  stats.report(c);
  CHECK(c.submitted == 3);
  CHECK(c.finished == 1);
  CHECK(c.failed == 1);
  CHECK(c.retried == 2);
  CHECK(stats.retries() == 2);
  CHECK(c.waiting == 7);
  CHECK(c.latency == std::vector<std::uint64_t>(task_stats::latency_buckets, 0));
  CHECK(c.latency_sum_us == 0);
}

TEST_CASE("a scheduling latency falls in the first bucket whose bound it does not pass",
          "[core][task_stats]") {
  task_stats stats;
  stats.count_scheduled(microseconds(100));      // 0.0001 s: on the first bound
  stats.count_scheduled(microseconds(101));      // past it: the second bucket
  stats.count_scheduled(microseconds(3'000));    // 0.003 s: at most 0.005
  stats.count_scheduled(std::chrono::hours(1));  // past 60 s: the last bucket
  protocol::task_counts c;
  stats.report(c);
  REQUIRE(c.latency.size() == protocol::scheduling_latency_bounds.size() + 1);
  CHECK(c.latency[0] == 1);
  CHECK(c.latency[1] == 1);
  CHECK(c.latency[3] == 1);
  CHECK(c.latency.back() == 1);
  std::uint64_t total = 0;
  for (auto n : c.latency) total += n;
  CHECK(total == 4);
  CHECK(c.latency_sum_us == 100 + 101 + 3'000 + 3'600'000'000ULL);
}

TEST_CASE("a scheduling latency below zero counts as none", "[core][task_stats]") {
  task_stats stats;
  stats.count_scheduled(microseconds(-5'000));
  protocol::task_counts c;
  stats.report(c);
  CHECK(c.latency[0] == 1);
  CHECK(c.latency_sum_us == 0);
}
