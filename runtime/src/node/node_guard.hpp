#pragma once
// What the node agent's managers check a job's message against before they act on it, and
// the one log their refusals go to (a few lines a second at most, whichever manager
// refused): a job may act only on its own workers, leases, actors and bundles
// (owned_by_sender). The node's counterpart of head/head_guard.hpp.
//
//   if (!guard.owned_by_sender(m.sender_job, w.job, "the lease of worker " + id)) return;
//   guard.refused("invalid_argument: ...; refused");
//
// One per node agent, shared by reference by its managers (worker_pool, local_scheduler).
// Threads: the agent's (one message at a time).

#include "protocol/messages.hpp"
#include "transport/rate_limited_log.hpp"

#include <string>

namespace celer {

class node_guard {
public:
  /// True when `sender` (a message's sender_job: nil for the head, nodes and this process)
  /// may act on a thing of job `owner`; otherwise logs the refusal.
  bool owned_by_sender(const job_id& sender, const job_id& owner, const std::string& what) {
    if (sender.nil() || sender == owner) return true;
    denials_.warn("permission_denied: job " + sender.short_hex() + " asked about " + what +
                  " of job " + owner.short_hex() + "; refused");
    return false;
  }
  /// Any other refusal, in the same log.
  void refused(const std::string& text) { denials_.warn(text); }

private:
  rate_limited_log denials_{"node"};
};

} // namespace celer
