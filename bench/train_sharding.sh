#!/usr/bin/env bash
# Equal shards against speed-weighted ones (celer-train's sharding key; apps/train/README.md,
# "Workers of different speeds"): 2 workers, worker 1 slowed to a fraction of its speed
# (CELER_TRAIN_WORKER_SPEED=1:F, a busy-wait after each forward and backward pass, as a
# slower device would take; F:STEP from that step on, as a device that throttles mid-run),
# the shipped digits MLP at width 512 for 8 epochs. Each line:
# samples/s over the run, training seconds, the final validation accuracy and the batch
# split; the rounds alternate equal and speed, so a busy machine slows them alike, and each
# line ends with the 1-minute load average. --address runs on a cluster (celer start ...).
#
#   bench/train_sharding.sh [--rounds 2] [--fractions "1 0.5 0.25"] [--address A] [--build DIR] [--out DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
rounds=2
fractions="1 0.5 0.25 0.25:40"
address=()
build=build
out=$(mktemp -d /tmp/celer-train-sharding.XXXXXX)
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --fractions) fractions=$2; shift 2 ;;
    --address) address=(--address "$2"); shift 2 ;;
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "usage: $0 [--rounds N] [--fractions \"1 0.5\"] [--address A] [--build DIR] [--out DIR]" >&2; exit 2 ;;
  esac
done
train=$PWD/$build/apps/train/celer-train
sed 's/^width: 128 /width: 512 /' config/train/digits-mlp.yaml > "$out/mlp512.yaml"
summarise() {
  python3 - "$1/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
split = "/".join(str(b) for b in s.get("batch_split", [])) or "32/32"
moves = len(s.get("reshards", []))
print("%7.0f samples/s  train %.2f s  val_acc %.4f  val_loss %.4f  split %s (%d re-splits)" % (s["samples_per_s"],
      s["train_seconds"], s["final_val_accuracy"], s["final_val_loss"], split, moves))
PY
}
for r in $(seq 1 "$rounds"); do
  for f in $fractions; do
    for sharding in equal speed; do
      name="f$f-$sharding-$r"
      CELER_TRAIN_WORKER_SPEED="1:$f" "$train" "${address[@]}" --config "$out/mlp512.yaml" --sharding "$sharding" \
        --output "$out/$name" --progress-interval 1000 > "$out/$name.log" 2>&1 || { echo "$name failed: $out/$name.log"; continue; }
      printf "worker 1 at %-7s %-5s %s  load %s\n" "$f" "$sharding" "$(summarise "$out/$name")" "$(cut -d' ' -f1 /proc/loadavg)"
    done
  done
done
echo "runs in $out"
