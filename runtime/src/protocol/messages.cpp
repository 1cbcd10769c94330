#include "protocol/messages.hpp"

namespace celer::protocol {

std::vector<std::string>*& bulk_sink() noexcept {
  thread_local std::vector<std::string>* sink = nullptr;
  return sink;
}

bulk_frames*& bulk_source() noexcept {
  thread_local bulk_frames* source = nullptr;
  return source;
}

const char* name_of(const message& m) {
  static constexpr const char* names[] = {
    "request_lease",      "execute_task",   "return_lease",        "task_result",
    "worker_blocked",     "worker_unblocked", "get_object",      "object_reply",
    "register_node",      "create_actor",   "create_actor_reply", "start_actor",
    "actor_started",      "actor_failed",   "subscribe_actor",   "actor_update",
    "lookup_actor",       "lookup_actor_reply", "kill_actor",    "actor_exited",
    "resource_query",     "resource_reply", "shutdown_component", "worker_ready",
    "worker_died",        "tick",           "heartbeat",         "subscribe_cluster",
    "node_died",          "lease_reply",    "job_finished",      "status_query",
    "status_reply",       "job_heartbeat",  "unsubscribe_cluster", "cancel_lease_requests",
    "store_create",       "store_seal",     "store_get",         "store_reply",
    "store_release",      "store_free",     "store_pull",        "store_chunk",
    "store_stats_query",  "store_stats_reply", "durable_objects",  "locate_object",
    "object_location",    "object_copied",     "explain_placement", "placement_explained",
    "create_placement_group", "placement_group_reply", "remove_placement_group",
    "placement_group_query", "placement_group_list", "reserve_bundle", "bundle_reserved",
    "return_bundles",     "gpu_usage",      "preempt_actor",     "preempt_ready",
  };
  static_assert(std::size(names) == std::variant_size_v<message>);
  return names[m.index()];
}

} // namespace celer::protocol
