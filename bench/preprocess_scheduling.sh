#!/usr/bin/env bash
# Static partitioning against work stealing and re-sharding in celer-preprocess
# (apps/preprocess/README.md, "Scheduling"), with one node slowed: the skewed catalog
# (config/preprocess/catalog.yaml, or a smaller one with --items-per-catalog) on a local
# cluster of --nodes nodes with one worker per node, worker --slow-worker taking
# --slow-factor times as long per block (CELER_PREPROCESS_SLOW_WORKER: it waits the rest, as
# a slower node would). Each policy runs --rounds times, the policies alternating in each
# round, with the cache off so every run reads and computes everything. Prints each run and
# the median seconds and items/s per policy, and how much less time stealing and re-sharding
# take than fixed shares.
#
#   bench/preprocess_scheduling.sh [--nodes 4] [--rounds 3] [--slow-factor 3] [--slow-worker 3]
#                                  [--items-per-catalog 15000] [--build DIR] [--embedded]
set -uo pipefail
cd "$(dirname "$0")/.."
nodes=4
rounds=3
slow_factor=3
slow_worker=3
items=15000
build=build
embedded=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --nodes) nodes=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --slow-factor) slow_factor=$2; shift 2 ;;
    --slow-worker) slow_worker=$2; shift 2 ;;
    --items-per-catalog) items=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --embedded) embedded=1; shift ;;
    *) echo "usage: $0 [--nodes N] [--rounds N] [--slow-factor F] [--slow-worker I] [--items-per-catalog N] [--build DIR] [--embedded]" >&2; exit 2 ;;
  esac
done
out=$(mktemp -d /tmp/celer-pp-sched.XXXXXX)
trap 'rm -rf "$out"' EXIT
data=celer_data/catalog-$items
sed -e "s|dir: celer_data/catalog|dir: $data|" -e "s|celer_data/catalog/|$data/|" \
    -e "s|items_per_catalog: 15000|items_per_catalog: $items|" config/preprocess/catalog.yaml > "$out/catalog.yaml"
pre=$build/apps/preprocess/celer-preprocess
# Make the catalog once, outside the timed runs.
"$pre" --config "$out/catalog.yaml" --print-config > /dev/null
"$pre" --config "$out/catalog.yaml" --limit 1 --no-cache --output "$out/warm" > "$out/warm.log" 2>&1 ||
  { echo "the warm-up run failed:"; tail -20 "$out/warm.log"; exit 1; }
echo "catalog: $(ls "$data"/catalog-*.jsonl | wc -l) files, $(du -sh "$data" | cut -f1); $nodes workers" \
     "(one per node), worker $slow_worker slowed x$slow_factor; load $(cut -d' ' -f1-3 /proc/loadavg)"
run() {  # run POLICY ROUND
  local cmd=("$pre" --config "$out/catalog.yaml" --no-cache --workers "$nodes" --scheduling "$1"
             --output "$out/$1-$2")
  if [[ $embedded == 0 ]]; then
    cmd=(tests/cluster/with_cluster.sh "$build/runtime/celer" --nodes "$nodes" --cpus 1 --timeout 3000 -- "${cmd[@]}")
  fi
  CELER_PREPROCESS_SLOW_WORKER=$slow_worker:$slow_factor "${cmd[@]}" > "$out/$1-$2.log" 2>&1 ||
    { echo "run $1 $2 failed:"; tail -20 "$out/$1-$2.log"; exit 1; }
  python3 - "$out/$1-$2/summary.json" "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
blocks = {}
for p in d["passes"]:
    for w, n in p["blocks_by_worker"].items():
        blocks[w] = blocks.get(w, 0) + n
print(f"{sys.argv[2]:8s} round {sys.argv[3]}: {d['seconds']:7.2f} s, {d['items_per_s']:9.0f} items/s, "
      f"stolen {sum(p['stolen'] for p in d['passes'])}, re-dealt {sum(p['resharded'] for p in d['passes'])}, "
      f"blocks by worker {dict(sorted(blocks.items()))}, key checksum {d['key_checksum']}")
PY
}
for ((r = 1; r <= rounds; r++)); do
  if (( r % 2 )); then order=(fixed steal reshard); else order=(reshard steal fixed); fi
  for p in "${order[@]}"; do run "$p" "$r"; done
done | tee "$out/runs.txt"
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys, glob
out, rounds = sys.argv[1], int(sys.argv[2])
med = {}
for p in ("fixed", "steal", "reshard"):
    s = [json.load(open(f"{out}/{p}-{r}/summary.json")) for r in range(1, rounds + 1)]
    med[p] = (statistics.median(x["seconds"] for x in s), statistics.median(x["items_per_s"] for x in s))
    sums = {x["key_checksum"] for x in s}
    print(f"{p:8s} median {med[p][0]:7.2f} s  {med[p][1]:9.0f} items/s  (key checksums: {len(sums)} distinct)")
for p in ("steal", "reshard"):
    print(f"{p} takes {100 * (1 - med[p][0] / med['fixed'][0]):.0f}% less time than fixed shares")
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
