#!/usr/bin/env bash
# Runs a command against a fresh local cluster: a head and N node agents as real processes
# on 127.0.0.1, in a private CELER_TEMP_DIR (so that clusters of tests running at the same
# time never meet), with CELER_ADDRESS set for the command. Stops the cluster afterwards,
# whatever the command did, and prints the cluster's logs when the command failed.
#
#   tests/cluster/with_cluster.sh path/to/celer [--nodes N] [--cpus C] [--timeout S] -- command args...
#
# --timeout S stops a command still running after S seconds (exit 124) and prints the logs:
# give it less than the test's ctest TIMEOUT, so that a hang is reported here instead of
# being killed by ctest with the cluster left running. SIGTERM and SIGINT clean up too.
set -euo pipefail
celer=$1
shift
nodes=2
cpus=1
timeout=0
while [[ $# -gt 0 && $1 != -- ]]; do
  case $1 in
    --nodes) nodes=$2; shift 2 ;;
    --cpus) cpus=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    *) echo "with_cluster.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
shift
CELER_TEMP_DIR=$(mktemp -d /tmp/celer-cluster.XXXXXX)
export CELER_TEMP_DIR
export CELER_NODE_TIMEOUT_MS=${CELER_NODE_TIMEOUT_MS:-3000}
# The commands run here (the runtime's unit suite, the examples, the apps) share folders
# under /tmp between a driver and its workers, which a job's confinement forbids
# (docs/security.md, "Jobs apart on a machine"): they run with it off unless told. The
# confinement itself is tested by the attacker suite (sections I and H) and sandbox_test.
export CELER_JOB_ISOLATION=${CELER_JOB_ISOLATION:-off}
status=1
child=
cleanup() {
  # The command first (stopped by a signal to this script: it must not outlive the test).
  if [[ -n $child ]] && kill -0 "$child" 2>/dev/null; then
    kill -TERM "$child" 2>/dev/null || true
    sleep 1
    kill -KILL "$child" 2>/dev/null || true
  fi
  "$celer" stop >/dev/null 2>&1 || true
  if [[ $status -ne 0 ]]; then
    for f in "$CELER_TEMP_DIR"/session_latest/logs/*.log; do
      [[ -s $f ]] || continue
      echo "---- $(basename "$f") (last 40 lines)"
      tail -n 40 "$f"
    done
  fi
  rm -rf "$CELER_TEMP_DIR"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
out=$("$celer" start --head --port 0 --num-cpus "$cpus")
addr=$(sed -n 's/^celer head started at \([^ ]*\).*/\1/p' <<<"$out")
for _ in $(seq "$nodes"); do
  "$celer" start --address "$addr" --num-cpus "$cpus" >/dev/null
done
export CELER_ADDRESS=$addr
echo "with_cluster.sh: head and $nodes node(s) at $addr"
set +e
if [[ $timeout -gt 0 ]]; then
  timeout -k 10 "$timeout" "$@" &
else
  "$@" &
fi
child=$!
wait "$child"
status=$?
set -e
if [[ $timeout -gt 0 && $status -eq 124 ]]; then
  echo "with_cluster.sh: the command was still running after ${timeout}s and was stopped; the cluster's logs follow" >&2
fi
exit $status
