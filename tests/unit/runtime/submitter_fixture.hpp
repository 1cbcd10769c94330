// The fixture the task submitter's tests share: the test plays the node that grants leases
// and the workers that run tasks, and moves the clock by hand.
#pragma once

#include "config/knobs.hpp"
#include "core/task_submitter.hpp"
#include "unit/runtime/core_pieces.hpp"

#include <catch2/catch.hpp>

namespace celer::testing {

/// Sets max_tasks_in_flight_per_worker for one test.
struct scoped_depth {
  explicit scoped_depth(int depth) : saved(knobs()) {
    auto k = saved;
    k.max_tasks_in_flight_per_worker = depth;
    set_knobs(k);
  }
  ~scoped_depth() { set_knobs(saved); }
  knob_values saved;
};

struct submitter_fixture : core_pieces {
  task_submitter tasks{net, objects, ids, {self, node, head, this_node}, [this] { return now; }};
  /// The retry policy of the tasks submit() submits.
  task_submitter::retry_policy retry{.max_retries = 0};

  /// Submits a task of `function` (with `args`); returns its id and the handle to its result.
  std::pair<task_id, object_ref<void>> submit(const std::string& function,
                                              std::vector<detail::arg_spec> args = {}) {
    auto spec = task(function);
    const task_id id = spec.id;
    auto ref = objects.submit(spec, std::move(args));
    tasks.submit(std::move(spec), retry);
    return {id, std::move(ref)};
  }
  /// Answers the newest lease request with a worker on `on` (this node unless given).
  worker_id grant(const node_id& on = {}) {
    auto asked = net.take<protocol::request_lease>();
    REQUIRE_FALSE(asked.empty());
    // Requests not answered here stay asked.
    for (std::size_t i = 0; i + 1 < asked.size(); ++i) {
      net.sent.emplace_back(asked[i].first, asked[i].second);
    }
    protocol::lease_reply r;
    r.request = asked.back().second.spec.id;
    r.ok = true;
    r.worker = worker_id::random();
    r.worker_addr = address{r.worker, {}};
    r.node = on.nil() ? this_node : on;
    r.node_addr = node;
    tasks.on_lease_reply(r);
    return r.worker;
  }
  /// Runs one task of `function` on a fresh lease and returns that lease's worker: it came
  /// back at once on the fake clock, alone on its worker, so `function` is known short and
  /// its tasks are queued behind others (pipelined) from now on.
  worker_id warm(const std::string& function) {
    auto [id, ref] = submit(function);
    const worker_id w = grant();
    REQUIRE(pushed().size() == 1);
    auto r = core_pieces::result(id, "0");
    REQUIRE(tasks.on_result(r));
    return w;
  }
  /// The tasks pushed to workers since the last call.
  std::vector<std::pair<address, protocol::execute_task>> pushed() {
    return net.take<protocol::execute_task>();
  }
};

} // namespace celer::testing
