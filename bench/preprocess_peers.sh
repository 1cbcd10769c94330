#!/usr/bin/env bash
# celer-preprocess beside Ray Data (map_batches) and Dask (bag) on the same tokenise-and-
# normalise pipeline over the same catalog files (bench/README.md, "celer-preprocess's
# peers"): items/s and peak memory, --rounds rounds with the order alternating. celer runs
# embedded with --workers workers (its peak memory: the process's maximum RSS, from
# /usr/bin/time); the peers with as many worker processes (their peak: the summed RSS of the
# driver and its children, and the summed PSS). Each run's output is checked against the
# plain reference with --check (slow: minutes at full size).
#
#   bench/preprocess_peers.sh [--input celer_data/catalog] [--workers 2] [--rounds 1]
#                             [--build DIR] [--check]
set -uo pipefail
cd "$(dirname "$0")/.."
input=celer_data/catalog
workers=2
rounds=1
build=build
check=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --input) input=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --check) check=1; shift ;;
    *) echo "usage: $0 [--input DIR] [--workers N] [--rounds N] [--build DIR] [--check]" >&2; exit 2 ;;
  esac
done
py=${CELER_BENCH_VENV:-$HOME/.cache/celer/bench-venv}/bin/python
out=$(mktemp -d /tmp/celer-pp-peers.XXXXXX)
trap 'rm -rf "$out"' EXIT
[[ -e $input/catalog-00.jsonl ]] || { echo "no catalog in $input (celer-preprocess writes it: run it once)"; exit 2; }
echo "input: $(ls "$input"/catalog-*.jsonl | wc -l) files, $(du -sh "$input" | cut -f1); $workers workers; load $(cut -d' ' -f1-3 /proc/loadavg)"
sed -e "s|celer_data/catalog/|$input/|" -e "s|dir: celer_data/catalog|dir: $input|" config/preprocess/catalog.yaml > "$out/catalog.yaml"
run_celer() {
  /usr/bin/time -f "%M" -o "$out/celer-$1.rss" "$build/apps/preprocess/celer-preprocess" --config "$out/catalog.yaml" \
    --no-cache --workers "$workers" --output "$out/celer-$1" > "$out/celer-$1.log" 2>&1 ||
    { echo "celer failed:"; tail -20 "$out/celer-$1.log"; exit 1; }
  python3 - "$out/celer-$1/summary.json" "$out/celer-$1.rss" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rss = int(open(sys.argv[2]).read().split()[-1]) * 1024
print(f"celer   {d['items_in']:8d} items  {d['seconds']:7.2f} s  {d['items_per_s']:9.0f} items/s  peak RSS {rss / 2**20:7.0f} MiB")
PY
  [[ $check == 0 ]] || "$py" bench/peers/preprocess_check.py compare "$input" "$out/celer-$1" | tail -1
}
run_peer() {  # run_peer ray|dask ROUND
  local flag=--workers
  [[ $1 == ray ]] && flag=--parallelism
  "$py" "bench/peers/$1_preprocess.py" --input "$input" --output "$out/$1-$2" "$flag" "$workers" \
    --json "$out/$1-$2.json" > "$out/$1-$2.log" 2>&1 || { echo "$1 failed:"; tail -20 "$out/$1-$2.log"; exit 1; }
  python3 - "$out/$1-$2.json" "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
pss = d.get("peak_pss_bytes")
print(f"{sys.argv[2]:7s} {d['items']:8d} items  {d['seconds']:7.2f} s  {d['items_per_s']:9.0f} items/s  peak RSS {d['peak_rss_bytes'] / 2**20:7.0f} MiB"
      + (f" (PSS {pss / 2**20:.0f} MiB)" if pss else ""))
PY
  [[ $check == 0 ]] || "$py" bench/peers/preprocess_check.py compare "$input" "$out/$1-$2" | tail -1
}
for ((r = 1; r <= rounds; r++)); do
  if (( r % 2 )); then order=(celer dask ray); else order=(ray dask celer); fi
  echo "-- round $r"
  for s in "${order[@]}"; do
    if [[ $s == celer ]]; then run_celer "$r"; else run_peer "$s" "$r"; fi
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
