#!/usr/bin/env bash
# What encryption costs: `celer microbenchmark` on a local cluster (a head with its node,
# worker processes) with CELER_ENCRYPTION=1 (CURVE, the default) and =0 (PLAIN: the same
# authentication, in clear), alternating the two for several rounds so that a busy machine
# slows both alike, and prints each workload's median under each and the difference.
#
#   bench/encryption.sh [--rounds N] [--duration S] [--num-cpus N] [--only PATTERN]
#                       [--build DIR] [--out DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
rounds=3
duration=1
cpus=$(nproc)
only=""
build=build
out=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --num-cpus) cpus=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "encryption.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
out=${out:-$(mktemp -d /tmp/celer-encryption.XXXXXX)}
mkdir -p "$out"
common=(--duration "$duration")
[[ -n $only ]] && common+=(--only "$only")
for ((r = 1; r <= rounds; r++)); do
  for enc in 1 0; do
    echo "encryption: round $r of $rounds, CELER_ENCRYPTION=$enc"
    export CELER_ENCRYPTION=$enc CELER_TEMP_DIR="$out/cluster-$enc-$r"
    started=$("$build/runtime/celer" start --head --port 0 --num-cpus "$cpus" 2>"$out/start-$enc-$r.log")
    address=$(sed -n 's/^celer head started at \([^ ]*\).*/\1/p' <<<"$started")
    if [[ -z $address ]]; then
      echo "encryption: celer start --head failed (see $out/start-$enc-$r.log)" >&2
      exit 1
    fi
    "$build/runtime/celer" microbenchmark "${common[@]}" --address "$address" \
      --json "$out/enc$enc-round$r.json" >"$out/run-$enc-$r.log" 2>&1 ||
      { echo "encryption: microbenchmark failed (see $out/run-$enc-$r.log)" >&2; "$build/runtime/celer" stop >/dev/null 2>&1; exit 1; }
    "$build/runtime/celer" stop >/dev/null 2>&1
  done
done
unset CELER_ENCRYPTION CELER_TEMP_DIR
python3 - "$out" "$rounds" <<'PY' | tee "$out/table.txt"
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
runs = {enc: [json.load(open(f"{out}/enc{enc}-round{r}.json")) for r in range(1, rounds + 1)]
        for enc in (1, 0)}
names = [x["name"] for x in runs[1][0]["results"] if not x["name"].startswith("floor_")]
def median(enc, name):
    vals = [x["value"] for doc in runs[enc] for x in doc["results"]
            if x["name"] == name and x.get("value") is not None]
    return statistics.median(vals) if vals else None
print(f"celer microbenchmark on a local cluster, median of {rounds} alternating rounds")
head = f"{'workload':<44} {'CURVE':>10} {'PLAIN':>10} {'CURVE vs PLAIN':>15}"
print(head)
print("-" * len(head))
for n in names:
    a, b = median(1, n), median(0, n)
    diff = f"{(a / b - 1) * 100:+.1f}%" if a and b else "-"
    fmt = lambda v: "-" if v is None else (f"{v:.0f}" if v >= 100 else f"{v:.3g}")
    print(f"{n:<44} {fmt(a):>10} {fmt(b):>10} {diff:>15}")
print("\nGB per second for *_gigabytes, operations per second otherwise; negative: CURVE is slower.")
PY
echo "encryption: results in $out"
