#pragma once
// The real driver of celer-bench-sim-cluster (bench/sim_cluster.cpp): a celer program (the
// public API, celer::init on the cluster's address) whose tasks and actors need the custom
// resource `sim_node`, which only the simulated agents offer. Its own node (the head's) can
// never run them, so every lease request goes to the head, which places it on a simulated
// agent; that agent grants it, and the driver pushes the task to the agent's "worker", which
// echoes the argument back. Every result is checked against what was sent.
//
// Phases: `latency_tasks` tasks one at a time (submit, get: the end-to-end latency of a task
// that spills to the head; run with lease_idle_ms=0 so that each takes a new lease), then
// `batch_tasks` at once (throughput), then `actors` actors created at once and one call on
// each (creation rate: until every call has answered).

#include <string>

namespace celer::bench {

struct sim_driver_options {
  int latency_tasks = 200;
  int batch_tasks = 2000;
  int actors = 100;
  /// Where to write the results (JSON).
  std::string json;
};

/// Runs the phases on the cluster at CELER_ADDRESS; 0 when every result came back right.
int run_sim_driver(const sim_driver_options& o);

} // namespace celer::bench
