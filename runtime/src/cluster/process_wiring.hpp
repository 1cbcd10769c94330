#pragma once
// What the processes of cluster mode (the driver, the worker process, the daemon) are each
// built from, written once: their zmq_transport's options, taken from knobs, and (driver
// and worker process) how their core_worker is wired to it.
//
//   auto net = std::make_unique<zmq_transport>(host.local(),
//                                              transport_options(k, bind_for(ip), creds));
//   auto where = core_endpoints(*net, head_addr, job);
//   auto core = start_core(host, *net, where);
//   net->start();

#include "config/knobs.hpp"
#include "core/core_worker.hpp"
#include "host.hpp"
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

/// Where a cluster process's core is: a new id at `net`'s endpoint, the head at `head`, job
/// `job`'s calls, its workers started from this binary. A process of a job submitted with a
/// working directory (CELER_JOB_PACKAGE, CELER_JOB_WORKING_DIR: docs/jobs.md) names it,
/// and names a binary inside it relative to its root (package_binary). The caller adds what
/// is its own (a worker's node, a driver's priority).
core_worker::endpoints core_endpoints(const zmq_transport& net, const address& head,
                                      const job_id& job);

/// `binary` relative to `working_dir` when it lies inside it (each node runs its own copy
/// of the folder), else `binary` as it is. Both are taken as they are on disk (links
/// resolved).
std::string package_binary(const std::string& binary, const std::string& working_dir);

/// Makes the process's core on `net`, hosts it on `host` behind its shell (spawn_core_shell,
/// with `heartbeats` and `watch`), and has `net` hand it what is addressed to it straight
/// from the receiving thread, but for the head's answers to the watch's probes, which go to
/// the watch. Call before net.start(); stop `net` before the core or `watch` is destroyed.
std::unique_ptr<core_worker> start_core(component_host& host, zmq_transport& net,
                                        const core_worker::endpoints& where,
                                        transport* heartbeats = nullptr,
                                        head_watch* watch = nullptr);

} // namespace celer::cluster
