#pragma once
// The one way components reach each other: send a protocol message to an address.
// Embedded mode delivers to CAF actors of this process (local_transport); cluster mode
// encodes with msgpack and sends over ZeroMQ. Components never know which.

#include "protocol/messages.hpp"

#include <celer/ids.hpp>

#include <chrono>
#include <string>

namespace celer {

/// The longest a process waits before connecting again to a peer that went away (the
/// ZeroMQ transport's reconnect interval grows up to this). A restarted head hears again
/// from everyone within it, plus one heartbeat: it gives what it recovered this long on top
/// of node_timeout_ms before declaring anything dead.
inline constexpr std::chrono::milliseconds reconnect_interval_max{2000};

class transport {
public:
  virtual ~transport() = default;
  /// Queues `m` for `to`, taking it. False when `to` is unknown here or has gone away: `m`
  /// is then left as it was, and the caller decides what that means (usually: the peer
  /// died) and may keep what it sent.
  [[nodiscard]] virtual bool send(const address& to, protocol::message&& m) = 0;
  /// Sends `m` to `to` and leaves it as it was: for a sender that keeps what it sent (a task
  /// that may run again, a call that may be sent again). This one copies; a transport that
  /// encodes on the caller's thread sends the encoding, with no copy.
  [[nodiscard]] virtual bool send_copy(const address& to, const protocol::message& m) {
    return send(to, protocol::message(m));
  }
  /// The process at `endpoint` is gone: drop the connection to it and what is queued there.
  virtual void forget(const std::string& endpoint) { (void)endpoint; }
  /// Job `job` is over: a process holding its credential is not let in any more (connections
  /// already open stay, for what its processes still have to say as they stop).
  virtual void job_ended(const job_id& job) { (void)job; }
  /// The head's: whether job `job` is let into shared namespace `name_space`
  /// (namespace_grants.hpp). Embedded, every job is (one process, nothing to keep apart).
  [[nodiscard]] virtual bool may_enter(const job_id& job, const std::string& name_space) const {
    (void)job;
    (void)name_space;
    return true;
  }
  /// The head's: detached actors of `name_space` run as its namespace job from now on (its
  /// processes are let in, and meet the jobs let into the namespace).
  virtual void host_namespace(const std::string& name_space) { (void)name_space; }
};

} // namespace celer
