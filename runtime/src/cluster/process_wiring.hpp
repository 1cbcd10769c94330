#pragma once
// What the processes of cluster mode (the driver, the worker process, the daemon) are each
// built from, written once: their zmq_transport's options, taken from knobs, and (driver
// and worker process) the shell that hands their core_worker its messages.
//
//   auto net = std::make_unique<zmq_transport>(host.local(),
//                                              transport_options(k, bind_for(ip), creds));

#include "config/knobs.hpp"
#include "core/core_worker.hpp"
#include "transport/credentials.hpp"
#include "transport/zmq_transport.hpp"

#include <cstddef>
#include <memory>
#include <string>

namespace celer {
class head_watch;
} // namespace celer

namespace celer::cluster {

/// "tcp://<ip>:*": listens on `ip`, on a free port.
std::string bind_for(const std::string& ip);

/// The largest frame a process accepts: 16 MiB, or an inline value's size and room to
/// spare when inline_object_bytes is raised past it (larger values travel in the store).
std::size_t max_frame_bytes(const knob_values& k);

/// A cluster process's transport: listens on `bind` as `creds`; encrypted unless the
/// encryption knob is 0; the message (max_message_bytes) and frame limits from knobs.
zmq_transport::options transport_options(const knob_values& k, std::string bind,
                                         credentials creds);

/// Hands a core the messages addressed to it (the core's own lock orders them). A driver's
/// core also turns its ticks into job heartbeats to the head and, with a head watch, probes
/// the head and fails every wait once it has been silent too long.
struct core_shell {
  core_worker* core;
  transport* net = nullptr;
  head_watch* watch = nullptr;
  void handle(protocol::message& m);
  void on_tick();
};

} // namespace celer::cluster
