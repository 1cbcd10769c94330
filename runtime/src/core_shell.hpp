#pragma once
// The component that hands a process's core_worker the messages addressed to it on the
// process's component_host. The embedded runtime, a cluster driver and a worker process
// each host their core behind one:
//
//   auto core = std::make_unique<core_worker>(net, where);
//   spawn_core_shell(host, *core);                 // embedded runtime, worker process
//   spawn_core_shell(host, *core, &net, &watch);   // a cluster driver: heartbeats, head watch

#include "core/core_worker.hpp"
#include "host.hpp"
#include "transport/transport.hpp"

namespace celer {

class head_watch;

/// Spawns on `host`, reachable at core.self(), the component that hands `core` what is sent
/// to it there (the core's own lock orders the messages; shutdown_component is dropped, as
/// the core's owner stops it). Ticks are dropped, unless `heartbeats` is given: then each
/// becomes a job heartbeat to the head, sent on it, and with a `watch` also probes the
/// head; once the head has been silent too long, the core is stopped with unavailable, so
/// that every wait and request fails. `core`, `heartbeats` and `watch` must outlive the
/// host's components.
void spawn_core_shell(component_host& host, core_worker& core, transport* heartbeats = nullptr,
                      head_watch* watch = nullptr);

} // namespace celer
