#pragma once
// What the unit tests of a core's pieces (reference_table, task_submitter, actor_submitter)
// share: a recording transport, a clock the test moves by hand, and the reference table
// with the store client it reads through. Nothing runs on its own: the test plays the node,
// the workers and the head, message by message.

#include "core/reference_table.hpp"
#include "core/request_table.hpp"
#include "core/store_client.hpp"
#include "core/task_ids.hpp"
#include "fakes/recording_transport.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace celer::testing {

struct core_pieces {
  fakes::recording_transport net;
  address self{unique_id::random(), {}};
  address node{unique_id::random(), {}};
  address head{unique_id::random(), {}};
  node_id this_node = node_id::random();
  job_id job = job_id::random();
  std::chrono::steady_clock::time_point now{std::chrono::hours(1)};
  request_table requests{net, self, [this] { return now; }};
  store_client store{net, requests, {self, node, this_node, job}, {}};
  reference_table objects{net, self, store, nullptr};
  task_ids ids;

  /// A task of `function` taking one CPU, owned here, its arguments not yet on the wire.
  [[nodiscard]] protocol::task_spec task(const std::string& function) {
    protocol::task_spec s;
    s.id = ids.next();
    s.kind = protocol::task_kind::normal;
    s.function = function;
    s.owner = self;
    s.job = job;
    s.resources = *protocol::make_request(1, 0, 0, {});
    return s;
  }
  /// A by-ref argument naming `ref`.
  static detail::arg_spec by_ref(const object_ref<void>& ref) {
    return detail::arg_spec{true, ref.id(), ref.owner(), {}};
  }
  /// A successful result of `task` holding `value`.
  static protocol::task_result result(const task_id& task, std::string value) {
    protocol::task_result r;
    r.task = task;
    protocol::object_payload v;
    v.id = protocol::task_spec::return_id_of(task);
    v.ok = true;
    v.payload = std::move(value);
    r.returns.push_back(std::move(v));
    return r;
  }
  /// A result of `task` that failed with `kind` (task_error: the task's code threw).
  static protocol::task_result failed(const task_id& task, detail::failure_kind kind,
                                      std::string why) {
    protocol::task_result r;
    r.task = task;
    protocol::object_payload v;
    v.id = protocol::task_spec::return_id_of(task);
    v.fail = protocol::failure_info::make(kind, error_code::internal, std::move(why));
    r.returns.push_back(std::move(v));
    return r;
  }
  /// The value (or failure) of `ref`, which must be ready.
  detail::fetched value_of(const object_ref<void>& ref) {
    auto got = objects.fetch({ref}, std::chrono::nanoseconds(0));
    REQUIRE(got.size() == 1);
    return got[0];
  }
};

} // namespace celer::testing
