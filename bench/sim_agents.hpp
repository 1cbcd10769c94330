#pragma once
// Simulated node agents for celer-bench-sim-cluster (bench/sim_cluster.cpp): hundreds of them
// in one process, each an object on the process's one event loop (no thread of its own), each
// speaking the real protocol over sockets of its own to a real head.
//
// What is real: each agent has its own listening socket (a ZeroMQ ROUTER on a port of its
// own, the CURVE server key of the cluster, the same socket options as the runtime's
// transport), its own connection to the head, and its own connections to the drivers it
// answers; every connection is authenticated and encrypted with the keys derived from the
// cluster token (transport/credentials.hpp), as a node's are, and a ZAP handler admits the
// cluster's key and the keys of the jobs it serves. Messages are the runtime's own
// (protocol/messages.hpp), encoded and checked with its wire code (transport/wire.hpp,
// admission.hpp). Each agent says hello to the head on a connection of its own at its place in
// the join window, says it again with backoff and jitter while the head does not answer (as a
// node agent does, cluster/head_join.hpp), then registers (register_node) as a node agent
// does, heartbeats every heartbeat_ms with what it has free, probes the head as node agents do
// (protocol/head_watch.hpp), grants lease requests from its resources (queued, first come first
// served, while they do not fit), returns them when the owner is done or cancels, starts
// actors, and leaves when the head declares it dead.
//
// What is simulated: an agent starts no worker process. A lease names a worker at the agent's
// own endpoint, and the agent answers each task pushed there as a worker would, with a
// task_result whose value is the task's first argument (an echo). Tasks pushed to one worker
// (pipelining) wait in a real worker inbox (worker/task_inbox.hpp) and run in order after each
// drain of the socket; a withdraw_tasks takes back those not run yet and answers with
// tasks_returned (empty when all have run), as worker::front_door does; an actor's start is
// answered at once with actor_started to the head, and its calls are echoed likewise. Objects
// passed by reference, placement groups, GPUs and the object store are not simulated (an
// argument by reference fails its task, saying so).
//
// Control (one line each, on stdin and stdout):
//   out: "joined <agents> <failed> <ms> <n>"  every hello answered (or given up on after
//                                              node_head_timeout_ms), registered; <n> hellos went
//                                              unanswered and were tried again
//   in:  "silence <i>"                         agent i stops heartbeating (and probing)
//   out: "dead <i> <ms>"                       the head declared it dead, <ms> after its last
//                                              heartbeat (the head tells every live node; the
//                                              first other agent here to hear it says so)
//   in:  "quit"                                 out: "stats <json>", and the process exits

#include <string>

namespace celer::bench {

struct sim_agents_options {
  /// The head's endpoint, "tcp://host:port".
  std::string head;
  std::string token;
  /// The address the agents listen on.
  std::string ip = "127.0.0.1";
  int count = 250;
  /// The index of this process's first agent (agent names and reports count from it).
  int first = 0;
  /// All the agents of the run, over every process: agent i says its first hello
  /// join_window_ms * i / total after its process starts, so that they do not all at once.
  int total = 250;
  int join_window_ms = 2000;
  /// What each agent offers: CPUs, and a custom resource `sim_node` that only simulated
  /// agents have, so that the driver's work goes to them (through the head).
  double cpus = 4;
  double sim_node = 1000;
};

/// Runs the agents until "quit" on stdin (or stdin closes); 0 on a clean stop.
int run_sim_agents(const sim_agents_options& o);

} // namespace celer::bench
