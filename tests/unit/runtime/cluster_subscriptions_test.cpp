// The head's cluster subscriptions (head/cluster_subscriptions.hpp) on their own: each
// subscriber told of a node's death, a job's subscriptions bounded and gone when it ends,
// rows past the tick's write budget written at the next, and brought back counted against
// their jobs.
#include "head/cluster_subscriptions.hpp"
#include "unit/runtime/head_managers.hpp"

#include <catch2/catch.hpp>

using namespace celer;
using namespace celer_test;

namespace {

struct subs_fixture : head_parts {
  cluster_subscriptions subs{net, &tables, guard, events};
  void subscribe(const std::string& endpoint, const job_id& job) {
    protocol::subscribe_cluster m{address{unique_id::random(), endpoint}, job};
    subs.on(m);
  }
};

} // namespace

TEST_CASE("every subscriber hears of a node's death; a job's go when it ends", "[head][subscriptions]") {
  subs_fixture s;
  const job_id a = job_id::random(), b = job_id::random();
  s.subscribe("tcp://10.0.0.2:1#job=" + a.hex(), a);
  s.subscribe("tcp://10.0.0.2:2#job=" + b.hex(), b);
  s.subscribe("tcp://10.0.0.2:2#job=" + b.hex(), b);  // a resend
  CHECK(s.subs.size() == 2);
  const node_id n = node_id::random();
  s.events.node_died(n, "killed");
  auto told = s.net.take<protocol::node_died>();
  REQUIRE(told.size() == 2);
  CHECK(told[0].second.node == n);
  s.events.job_ended(a);
  CHECK(s.subs.size() == 1);
  s.subs.forget("tcp://10.0.0.2:2#job=" + b.hex());
  CHECK(s.subs.size() == 0);
  auto state = s.tables.load();
  REQUIRE(state);
  CHECK(state->subscribers.empty());
}

TEST_CASE("a job's subscriptions are bounded; past the tick's budget rows wait for the next tick",
          "[head][subscriptions][security]") {
  subs_fixture s;
  const job_id a = job_id::random();
  const auto many = cluster_subscriptions::max_per_job + 10;
  for (std::size_t i = 0; i < many; ++i) s.subscribe("tcp://10.0.0.3:" + std::to_string(i) + "#job=" + a.hex(), a);
  CHECK(s.subs.size() == cluster_subscriptions::max_per_job);
  s.subscribe(std::string(head_guard::max_endpoint_bytes + 1, 'x'), job_id::random());
  CHECK(s.subs.size() == cluster_subscriptions::max_per_job);  // too long an address
  auto state = s.tables.load();
  REQUIRE(state);
  CHECK(state->subscribers.size() == head_guard::writes_per_tick);
  s.guard.new_tick();
  s.tables.begin_batch();
  s.subs.save_unsaved();
  s.tables.commit_batch();
  state = s.tables.load();
  REQUIRE(state);
  CHECK(state->subscribers.size() == cluster_subscriptions::max_per_job);

  // A new head counts them against their job again.
  subs_fixture again;
  again.subs.restore(state->subscribers);
  again.subscribe("tcp://10.0.0.4:1#job=" + a.hex(), a);
  CHECK(again.subs.size() == cluster_subscriptions::max_per_job);
  const job_id b = job_id::random();
  again.subscribe("tcp://10.0.0.4:2#job=" + b.hex(), b);
  CHECK(again.subs.size() == cluster_subscriptions::max_per_job + 1);
}
