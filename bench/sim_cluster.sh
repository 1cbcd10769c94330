#!/usr/bin/env bash
# A real head with 10, 100 and 1,000 simulated node agents (docs/benchmarks.md, "A simulated
# cluster of 1,000 nodes"): builds the head (`celer`) and celer-bench-sim-cluster, raises the
# open-file limit (every agent holds a few descriptors; the head about three per node), and
# runs them, printing the table and writing the figures as JSON with the load average.
#
#   bench/sim_cluster.sh [--nodes 10,100,1000] [--procs 4] [--build DIR] [--out FILE] [-- more options]
#
# Options after "--" go to celer-bench-sim-cluster (--idle-seconds, --latency-tasks,
# --batch-tasks, --actors, --node-timeout-ms, --join-window, --keep, --check).
set -euo pipefail
cd "$(dirname "$0")/.."
nodes=10,100,1000
procs=4
build=build
out=sim_cluster.json
while [[ $# -gt 0 ]]; do
  case $1 in
    --nodes) nodes=$2; shift 2 ;;
    --procs) procs=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "sim_cluster.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
cmake --build "$build" -j1 --target celer celer-bench-sim-cluster >/dev/null
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores; open files: $(ulimit -n)"
"$build/bench/celer-bench-sim-cluster" --nodes "$nodes" --procs "$procs" --celer "$build/runtime/celer" \
  --json "$out" "$@"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg); figures in $out"
