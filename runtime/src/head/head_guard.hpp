#pragma once
// What every head manager checks a job's message against before it acts on it, and the one
// log its refusals go to (a few lines a second at most, whichever manager refused): a job
// may touch only what is its own (owned_by_sender), give addresses of bounded length
// (endpoint_ok) and amounts that are numbers (check_amounts). Also the budget of rows that
// job-driven subscriptions may write to the head's tables per tick (take_write): past it,
// they are written together at the next tick, one synced write for them all (a write each
// would let a job's flood of subscriptions stall the head on the disk: 6 ms a write on the
// CI machine, 4,096 of them 25 s, past the node timeout).
//
// One per head, shared by reference by its managers. Threads: the head's.

#include "protocol/messages.hpp"
#include "transport/rate_limited_log.hpp"

#include <cstddef>
#include <string>

namespace celer {

class head_guard {
public:
  /// The longest address a job may give (subscribers, reply addresses kept by the head).
  static constexpr std::size_t max_endpoint_bytes = 512;
  /// Rows written at once per tick for job-driven subscriptions.
  static constexpr std::size_t writes_per_tick = 8;

  /// False (and logged) when job `sender` asks about what belongs to job `owner`; nil
  /// `sender` is the head or a node, which may.
  bool owned_by_sender(const job_id& sender, const job_id& owner, const std::string& what) {
    if (sender.nil() || sender == owner) return true;
    denials_.warn("permission_denied: job " + sender.short_hex() + " asked about " + what + " of job " +
                  owner.short_hex() + "; refused");
    return false;
  }
  /// Whether a job-given address is short enough to keep (logged when not).
  bool endpoint_ok(const address& a, const job_id& sender, const char* what) {
    if (a.endpoint.size() <= max_endpoint_bytes) return true;
    denials_.warn("invalid_argument: " + std::string(what) + " from job " + sender.short_hex() +
                  " gives an address of " + std::to_string(a.endpoint.size()) + " bytes (at most " +
                  std::to_string(max_endpoint_bytes) + "); refused");
    return false;
  }
  /// protocol::validate_amounts, the refusal logged: an error to send back.
  expected<void> check_amounts(const protocol::resource_set& s, const std::string& what, const job_id& sender) {
    auto ok = protocol::validate_amounts(s, what);
    if (!ok) {
      denials_.warn("invalid_argument: " + what + " from job " + sender.short_hex() + ": " + ok.error().message() +
                    "; refused");
    }
    return ok;
  }
  /// Any other refusal, in the same log.
  void refused(const std::string& text) { denials_.warn(text); }

  /// Whether a subscription's row may be written now (else it waits for the tick's batch).
  bool take_write() {
    if (writes_this_tick_ >= writes_per_tick) return false;
    ++writes_this_tick_;
    return true;
  }
  /// A new tick: the budget is whole again.
  void new_tick() { writes_this_tick_ = 0; }

private:
  rate_limited_log denials_{"head"};
  std::size_t writes_this_tick_ = 0;
};

} // namespace celer
