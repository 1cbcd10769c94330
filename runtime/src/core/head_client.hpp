#pragma once
// What a core asks the head: the cluster's status, placement groups, named actors, why
// work waits, and where a durable object lives now. Each query is a request of the core's
// request_table, so it fails like one (unavailable, deadline_exceeded, the stop's error).
//
//   head_client head(net, requests, where.head);
//   const auto st = head.query_status();
//   const actor_id a = head.find_named_actor("ps", "parameter_server");
//
// Threads: any user thread; it keeps no state of its own beyond its addresses.

#include "core/request_table.hpp"
#include "protocol/messages.hpp"
#include "transport/transport.hpp"

#include <celer/ids.hpp>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace celer {

class head_client {
public:
  head_client(transport& net, request_table& requests, address head);

  /// The cluster's state.
  protocol::status_reply query_status();
  /// Asks the head to reserve `m`'s bundles; throws the head's error when they can never
  /// be placed.
  void create_placement_group(protocol::create_placement_group m);
  /// Whether placement group `id` is created, asking again (less often as it waits) until
  /// `timeout`; throws not_found for a group the head does not know, and
  /// failed_precondition for one that was removed.
  bool placement_group_ready(const placement_group_id& id, std::chrono::milliseconds timeout);
  /// Tells the head to remove the group; throws unavailable when it is unreachable.
  void remove_placement_group(const placement_group_id& id);
  /// The placement groups named by `id` (all of them when nil).
  std::vector<protocol::placement_group_info> query_placement_groups(const placement_group_id& id);
  /// The live actor named `name` in namespace `name_space` (empty: job `job`'s own, or the
  /// shared one the job named first); `named`: the namespace was named in the call, and the
  /// head does not remember it as the job's. Throws not_found when there is none, and
  /// invalid_argument when it is not of `class_type`. `runs_as`, when given, is set to the
  /// job the actor runs as (another job's for a detached actor of a shared namespace).
  actor_id find_named_actor(std::string_view name, std::string_view class_type,
                            const job_id& job = {}, std::string_view name_space = {}, bool named = false,
                            job_id* runs_as = nullptr);
  /// Why the work `q` describes cannot start ("" when some node could start it now).
  std::string explain_placement(protocol::explain_placement q);
  /// Where the head's directory says object `id` lives (found false when it knows none).
  protocol::object_location locate_object(const object_id& id);

private:
  transport& net_;
  request_table& requests_;
  const address head_;
};

} // namespace celer
