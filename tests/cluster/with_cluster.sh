#!/usr/bin/env bash
# Runs a command against a fresh local cluster: a head and N node agents as real processes
# on 127.0.0.1, in a private CELER_TEMP_DIR (so that clusters of tests running at the same
# time never meet), with CELER_ADDRESS set for the command. Stops the cluster afterwards,
# whatever the command did, and prints the cluster's logs when the command failed.
#
#   tests/cluster/with_cluster.sh path/to/celer [--nodes N] [--cpus C] -- command args...
set -euo pipefail
celer=$1
shift
nodes=2
cpus=1
while [[ $# -gt 0 && $1 != -- ]]; do
  case $1 in
    --nodes) nodes=$2; shift 2 ;;
    --cpus) cpus=$2; shift 2 ;;
    *) echo "with_cluster.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
shift
CELER_TEMP_DIR=$(mktemp -d /tmp/celer-cluster.XXXXXX)
export CELER_TEMP_DIR
export CELER_NODE_TIMEOUT_MS=${CELER_NODE_TIMEOUT_MS:-3000}
status=1
cleanup() {
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
out=$("$celer" start --head --port 0 --num-cpus "$cpus")
addr=$(sed -n 's/^celer head started at \([^ ]*\).*/\1/p' <<<"$out")
for _ in $(seq "$nodes"); do
  "$celer" start --address "$addr" --num-cpus "$cpus" >/dev/null
done
export CELER_ADDRESS=$addr
echo "with_cluster.sh: head and $nodes node(s) at $addr"
set +e
"$@"
status=$?
set -e
exit $status
