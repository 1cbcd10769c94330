#pragma once
// What happens to the cluster that more than one of the head's managers must act on, as
// events they subscribe to (each in its constructor) and the head publishes:
//
//   node_died(id, reason)   after the node table marked it dead and the scheduler's view let
//                           go of it: placement groups lay out again the groups with a
//                           bundle there, the actor directory restarts or ends its actors,
//                           the cluster's subscribers are told;
//   job_ended(job)          (job_finished, or its driver went silent): the job table closes
//                           its counts, its subscriptions go, its placement groups are
//                           removed, its actors stopped.
//
// Subscribers are called in the order they subscribed, which is the order the head makes
// its managers in (head.hpp lists it): what each needs the others to have done first is
// written there. Threads: the head's (one message at a time); a subscriber must not
// subscribe from inside an event.

#include "protocol/messages.hpp"

#include <functional>
#include <string>
#include <vector>

namespace celer {

class head_events {
public:
  using node_died_fn = std::function<void(const node_id& id, const std::string& reason)>;
  using job_ended_fn = std::function<void(const job_id& job)>;

  void on_node_died(node_died_fn f) { node_died_.push_back(std::move(f)); }
  void on_job_ended(job_ended_fn f) { job_ended_.push_back(std::move(f)); }

  void node_died(const node_id& id, const std::string& reason) const {
    for (const auto& f : node_died_) f(id, reason);
  }
  void job_ended(const job_id& job) const {
    for (const auto& f : job_ended_) f(job);
  }

private:
  std::vector<node_died_fn> node_died_;
  std::vector<job_ended_fn> job_ended_;
};

} // namespace celer
