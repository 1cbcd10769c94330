#pragma once
// The HTTP server's way to the head: a component on the daemon's host (host.hpp) that the
// server's threads ask, and that asks the head with the protocol's messages, as `celer
// status` does over the network. The head stays single-threaded; a question waits at most
// `timeout` for its answer.
//
//   auto gw = std::make_shared<http::head_gateway>(net, gateway_addr, head_addr);
//   host.spawn(gateway_addr.id, as_component(gw), "http-gateway");
//   auto s = gw->status(std::chrono::seconds(2));   // from any thread

#include "protocol/messages.hpp"
#include "transport/transport.hpp"

#include <celer/error.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>

namespace celer::http {

class head_gateway {
public:
  head_gateway(transport& net, address self, address head);

  /// The component's side: takes the head's status_reply and placement_group_reply
  /// (anything else is ignored).
  void handle(protocol::message& m);

  /// The cluster's state now. unavailable when the head does not answer within `timeout`.
  /// Any thread.
  [[nodiscard]] expected<protocol::status_reply> status(std::chrono::milliseconds timeout);
  /// Asks the head for placement group `g` (of job `g.job`): ok once accepted (reserved when
  /// resources allow; head_snapshot.hpp shows when), else the head's reason (infeasible) or
  /// unavailable. Any thread.
  [[nodiscard]] expected<void> create_group(protocol::create_placement_group g, std::chrono::milliseconds timeout);

  /// Asks the head to stop actor `actor` (as the cluster: the caller checked who may), for
  /// `why`; with `no_restart` false one with restarts left restarts. False when the head
  /// cannot be reached. Any thread.
  bool kill_actor(const actor_id& actor, bool no_restart, const std::string& why);

private:
  transport& net_;
  address self_;
  address head_;
  std::mutex m_;
  std::condition_variable cv_;
  std::uint64_t next_ = 1;
  std::map<std::uint64_t, std::optional<protocol::status_reply>> waiting_;
  std::map<std::uint64_t, std::optional<protocol::placement_group_reply>> groups_waiting_;
};

} // namespace celer::http
