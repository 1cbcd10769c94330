#!/usr/bin/env bash
# The time a failed trainer costs celer-train (apps/train/README.md, "A worker that fails"):
# the shipped digits MLP (2 workers) for --steps steps, once uninterrupted and once with
# worker 1 killed as it begins step --kill-at (CELER_TRAIN_INJECT_FAILURE=1:K: an exception
# embedded; on a cluster, :exit, its worker process exits), with max_failures 1 and the
# collective timeout at its 120 s default. Embedded, and on a local cluster (head and node
# as processes, tests/cluster/with_cluster.sh) with --cluster. The rounds alternate the two
# runs, so a busy machine slows them alike. Prints, as medians of --runs rounds: the whole
# run's seconds (process start-up excluded: summary.json's `seconds`), uninterrupted and
# with the kill, their difference (the time lost), the driver's time from seeing the failure
# to the run going on, and how far into the failed call the failure was seen.
#
#   bench/train_recovery.sh [--runs 5] [--steps 184] [--kill-at 100] [--cluster] [--build DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
runs=5
steps=184
kill_at=100
cluster=0
build=build
while [[ $# -gt 0 ]]; do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --kill-at) kill_at=$2; shift 2 ;;
    --cluster) cluster=1; shift ;;
    --build) build=$2; shift 2 ;;
    *) echo "usage: $0 [--runs N] [--steps N] [--kill-at STEP] [--cluster] [--build DIR]" >&2; exit 2 ;;
  esac
done
out=$(mktemp -d /tmp/celer-train-recovery.XXXXXX)
trap 'rm -rf "$out"' EXIT
run() {  # run NAME [INJECT]
  local cmd=("$build/apps/train/celer-train" --config config/train/digits-mlp.yaml --output "$out/$1"
             --max-steps "$steps" --max-failures 1 --progress-interval 100)
  if [[ $cluster == 1 ]]; then
    cmd=(tests/cluster/with_cluster.sh "$build/runtime/celer" --nodes 1 --cpus 2 --timeout 200 -- "${cmd[@]}")
  fi
  if [[ -n ${2:-} ]]; then CELER_TRAIN_INJECT_FAILURE=$2 "${cmd[@]}" > "$out/$1.log" 2>&1
  else "${cmd[@]}" > "$out/$1.log" 2>&1; fi || { echo "run $1 failed:"; tail -20 "$out/$1.log"; exit 1; }
}
inject="1:$kill_at"
[[ $cluster == 1 ]] && inject="1:$kill_at:exit"
for ((i = 1; i <= runs; i++)); do
  run "whole-$i"
  run "killed-$i" "$inject"
done
python3 - "$out" "$runs" "$cluster" "$steps" "$kill_at" <<'PY'
import json, statistics, sys
out, runs, cluster, steps, kill_at = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4], sys.argv[5]
def summary(name): return json.load(open(f"{out}/{name}/summary.json"))
whole = [summary(f"whole-{i}")["seconds"] for i in range(1, runs + 1)]
killed = [summary(f"killed-{i}") for i in range(1, runs + 1)]
for k in killed:
    assert k["replicas_equal"] and k["recoveries"][0]["how"] == "peers", k
    assert k["parameters_digests"] == summary("whole-1")["parameters_digests"], "digest differs"
lost = [k["seconds"] - w for k, w in zip(killed, whole)]
med = statistics.median
print(f"| {'local cluster' if cluster else 'embedded'} | {steps} steps, worker 1 killed at step {kill_at} "
      f"| {med(whole):.2f} s | {med([k['seconds'] for k in killed]):.2f} s | {med(lost):.2f} s "
      f"| {med([k['recoveries'][0]['seconds'] for k in killed]):.2f} s "
      f"| {med([k['recoveries'][0]['seen_after_call_began_s'] for k in killed]):.3f} s |")
PY
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); $runs rounds; every killed run ended with the uninterrupted run's digest"
