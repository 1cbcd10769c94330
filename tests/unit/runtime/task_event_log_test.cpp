// A core's log of its tasks' changes of state (core/task_event_log.hpp): kept in order until
// a heartbeat takes them, bounded, and what it left out counted.
#include "core/task_event_log.hpp"

#include <catch2/catch.hpp>

#include <chrono>

using namespace celer;

namespace {

std::int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

} // namespace

TEST_CASE("a task's changes are taken in the order they happened, with their details and times",
          "[core][task_event_log]") {
  task_event_log events;
  const task_id a = task_id::random(), b = task_id::random();
  const auto before = wall_ms();
  events.record(a, protocol::task_state::waiting, /*attempt=*/1, {}, "f");
  events.record(b, protocol::task_state::waiting, /*attempt=*/1, {}, "g");
  events.record(a, protocol::task_state::running, /*attempt=*/1, "node-1");
  events.record(a, protocol::task_state::failed, /*attempt=*/1, "it threw: boom");
  const auto after = wall_ms();
  CHECK(events.size() == 4);

  protocol::task_counts c;
  events.take(c);
  REQUIRE(c.changes.size() == 4);
  CHECK(c.changes[0].task == a);
  CHECK(c.changes[0].function == "f");
  CHECK(c.changes[1].task == b);
  CHECK(c.changes[1].function == "g");
  CHECK(c.changes[2].state == protocol::task_state::running);
  CHECK(c.changes[2].function.empty());
  CHECK(c.changes[2].detail == "node-1");
  CHECK(c.changes[3].state == protocol::task_state::failed);
  CHECK(c.changes[3].detail == "it threw: boom");
  for (const auto& e : c.changes) {
    CHECK(e.attempt == 1);
    CHECK(e.at_ms >= before);
    CHECK(e.at_ms <= after);
  }
  CHECK(c.changes_dropped == 0);
}

TEST_CASE("a take hands each change over once", "[core][task_event_log]") {
  task_event_log events;
  events.record(task_id::random(), protocol::task_state::finished, /*attempt=*/2);
  protocol::task_counts first, second;
  events.take(first);
  events.take(second);
  REQUIRE(first.changes.size() == 1);
  CHECK(first.changes[0].attempt == 2);
  CHECK(second.changes.empty());
  CHECK(events.size() == 0);
}

TEST_CASE("changes past the log's capacity are counted as dropped until the next take",
          "[core][task_event_log]") {
  task_event_log events(/*capacity=*/2);
  const task_id kept = task_id::random();
  events.record(kept, protocol::task_state::waiting, 1);
  events.record(kept, protocol::task_state::running, 1);
  for (int i = 0; i < 3; ++i) events.record(task_id::random(), protocol::task_state::waiting, 1);
  CHECK(events.size() == 2);
  CHECK(events.dropped() == 3);

  protocol::task_counts c;
  events.take(c);
  REQUIRE(c.changes.size() == 2);
  CHECK(c.changes[1].state == protocol::task_state::running);
  CHECK(c.changes_dropped == 3);
  CHECK(events.dropped() == 0);

  // Room again after the take.
  events.record(kept, protocol::task_state::finished, 1);
  CHECK(events.size() == 1);
  CHECK(events.dropped() == 0);
}

TEST_CASE("the log holds at most one heartbeat's worth of changes by default", "[core][task_event_log]") {
  task_event_log events;
  const task_id id = task_id::random();
  for (std::size_t i = 0; i < protocol::max_task_changes + 1; ++i) {
    events.record(id, protocol::task_state::waiting, 1);
  }
  CHECK(events.size() == protocol::max_task_changes);
  CHECK(events.dropped() == 1);
}
