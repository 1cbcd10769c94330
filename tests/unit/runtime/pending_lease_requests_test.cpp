// A core's lease requests awaiting answers (core/pending_lease_requests.hpp): counted per
// class, closed once, withdrawn by class, forgotten when a node dies, and routed to the head
// once the local node is gone.
#include "core/pending_lease_requests.hpp"

#include <catch2/catch.hpp>

#include <algorithm>

using namespace celer;

TEST_CASE("each lease request gets a fresh id and is pending for its class until closed",
          "[core][lease_requests]") {
  task_ids ids;
  pending_lease_requests requests(ids);
  const task_id a = requests.open(/*cls=*/0);
  const task_id b = requests.open(/*cls=*/0);
  const task_id c = requests.open(/*cls=*/2);
  CHECK(a != b);
  CHECK(b != c);
  CHECK(requests.size() == 3);
  CHECK(requests.pending(0) == 2);
  CHECK(requests.pending(1) == 0);
  CHECK(requests.pending(2) == 1);
  CHECK(requests.pending(9) == 0);  // a class that never asked

  CHECK(requests.close(b) == std::optional<std::size_t>(0));
  CHECK(requests.pending(0) == 1);
  CHECK(requests.size() == 2);
  // A second answer to the same request (or one never sent from here) is not pending.
  CHECK_FALSE(requests.close(b).has_value());
  CHECK_FALSE(requests.close(task_id::random()).has_value());
  CHECK(requests.pending(0) == 1);
}

TEST_CASE("withdrawing a class's lease requests leaves the other classes' pending",
          "[core][lease_requests]") {
  task_ids ids;
  pending_lease_requests requests(ids);
  const task_id a = requests.open(/*cls=*/0);
  const task_id b = requests.open(/*cls=*/1);
  const task_id c = requests.open(/*cls=*/1);

  auto withdrawn = requests.withdraw(/*cls=*/1);
  std::sort(withdrawn.begin(), withdrawn.end());
  std::vector<task_id> expected{b, c};
  std::sort(expected.begin(), expected.end());
  CHECK(withdrawn == expected);
  CHECK(requests.pending(1) == 0);
  CHECK(requests.pending(0) == 1);
  CHECK_FALSE(requests.close(b).has_value());  // its late answer is not for a pending request

  CHECK(requests.withdraw(std::nullopt) == std::vector<task_id>{a});
  CHECK(requests.size() == 0);
  CHECK(requests.pending(0) == 0);
  CHECK(requests.withdraw(std::nullopt).empty());
}

TEST_CASE("a node's death forgets every lease request, and the local node's sends them to the head",
          "[core][lease_requests]") {
  task_ids ids;
  pending_lease_requests requests(ids);
  const task_id a = requests.open(/*cls=*/0);
  (void)requests.open(/*cls=*/3);
  CHECK_FALSE(requests.via_head());

  requests.forget_all();
  CHECK(requests.size() == 0);
  CHECK(requests.pending(0) == 0);
  CHECK(requests.pending(3) == 0);
  CHECK_FALSE(requests.close(a).has_value());
  CHECK_FALSE(requests.via_head());  // another node died: requests still go to the local one

  requests.local_node_died();
  CHECK(requests.via_head());
  (void)requests.open(/*cls=*/0);
  CHECK(requests.pending(0) == 1);
  requests.local_node_attached();
  CHECK_FALSE(requests.via_head());
}
