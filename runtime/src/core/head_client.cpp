#include "core/head_client.hpp"

#include <algorithm>
#include <thread>

namespace celer {

head_client::head_client(transport& net, request_table& requests, address head)
  : net_(net), requests_(requests), head_(std::move(head)) {}

protocol::status_reply head_client::query_status() {
  return requests_.ask_again<protocol::status_reply>(head_, protocol::status_query{});
}

void head_client::create_placement_group(protocol::create_placement_group m) {
  auto r = requests_.ask_again<protocol::placement_group_reply>(head_, std::move(m));
  if (!r.ok) throw exception(r.fail.code, r.fail.message);
}

bool head_client::placement_group_ready(const placement_group_id& id,
                                        std::chrono::milliseconds timeout) {
  const auto deadline = requests_.now() + timeout;
  for (auto pause = std::chrono::milliseconds(2);; pause = std::min(pause * 2, std::chrono::milliseconds(50))) {
    const auto groups = query_placement_groups(id);
    if (groups.empty()) {
      throw exception(error_code::not_found, "placement group " + id.short_hex() + " is not known");
    }
    const auto& g = groups.front();
    if (g.state == protocol::group_state::created) return true;
    if (g.state == protocol::group_state::removed) {
      throw exception(error_code::failed_precondition,
                      "placement group " + id.short_hex() + " was " + g.why);
    }
    const auto now = requests_.now();
    if (now >= deadline) return false;
    // The head tells no one when a group is created: asked again, less often as it waits.
    std::this_thread::sleep_for(
      std::min(pause, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now)));
  }
}

void head_client::remove_placement_group(const placement_group_id& id) {
  if (!net_.send(head_, protocol::remove_placement_group{id})) {
    throw exception(error_code::unavailable, "remove_placement_group: the head is unreachable");
  }
}

std::vector<protocol::placement_group_info> head_client::query_placement_groups(
  const placement_group_id& id) {
  protocol::placement_group_query q;
  q.id = id;
  return requests_.ask_again<protocol::placement_group_list>(head_, std::move(q)).groups;
}

actor_id head_client::find_named_actor(std::string_view name, std::string_view class_type,
                                       const job_id& job, std::string_view name_space, bool named,
                                       job_id* runs_as) {
  protocol::lookup_actor msg;
  msg.name = std::string(name);
  msg.job = job;
  msg.name_space = std::string(name_space);
  msg.namespace_named = named && !name_space.empty();
  auto r = requests_.ask_again<protocol::lookup_actor_reply>(head_, std::move(msg));
  if (!r.found) {
    throw exception(error_code::not_found,
                    "no live actor is named '" + std::string(name) + "'" +
                      (name_space.empty() ? std::string()
                                          : " in namespace '" + std::string(name_space) +
                                              "' (a detached actor there is found only by the jobs let into it)"));
  }
  if (runs_as != nullptr) *runs_as = r.job;
  if (r.class_type != class_type) {
    throw exception(error_code::invalid_argument,
                    "actor '" + std::string(name) + "' is not of the requested type");
  }
  return r.actor;
}

std::string head_client::explain_placement(protocol::explain_placement q) {
  return requests_.ask_again<protocol::placement_explained>(head_, std::move(q)).why;
}

protocol::object_location head_client::locate_object(const object_id& id) {
  protocol::locate_object q;
  q.id = id;
  return requests_.ask_again<protocol::object_location>(head_, std::move(q));
}

} // namespace celer
