#!/usr/bin/env bash
# fp32 against bf16 (celer-train's precision key; apps/train/README.md, "Models, precision
# and batch size"): the mean compute time a step (forward, backward, flattening, optimiser;
# metrics.jsonl's compute_s, steps after the 10th) and the final validation figures, for the
# shipped digits MLP, the same at width 512, and 100 steps of the shipped fortunes
# transformer. The rounds alternate fp32 and bf16, so a busy machine slows them alike;
# each line ends with the 1-minute load average.
#
#   bench/train_precision.sh [--rounds 2] [--build DIR] [--out DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
rounds=2
build=build
out=$(mktemp -d /tmp/celer-train-precision.XXXXXX)
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "usage: $0 [--rounds N] [--build DIR] [--out DIR]" >&2; exit 2 ;;
  esac
done
train=$PWD/$build/apps/train/celer-train
sed 's/^width: 128 /width: 512 /' config/train/digits-mlp.yaml > "$out/mlp512.yaml"
summarise() {
  python3 - "$1/metrics.jsonl" "$1/summary.json" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
compute = [l["compute_s"] for l in lines if "compute_s" in l and l["step"] > 10]
s = json.load(open(sys.argv[2]))
print("compute %.2f ms/step  val_acc %.4f  val_loss %.4f" % (1e3 * sum(compute) / len(compute),
      s["final_val_accuracy"], s["final_val_loss"]))
PY
}
run() {  # name, then celer-train's arguments
  local name=$1; shift
  "$train" --output "$out/$name" --progress-interval 1000 "$@" > "$out/$name.log" 2>&1 || { echo "$name failed: $out/$name.log"; return; }
  echo "$name: $(summarise "$out/$name")  load $(cut -d' ' -f1 /proc/loadavg)"
}
for r in $(seq 1 "$rounds"); do
  for p in fp32 bf16; do
    run "digits-mlp-$p-$r" --config config/train/digits-mlp.yaml --precision "$p"
    run "digits-mlp-w512-$p-$r" --config "$out/mlp512.yaml" --precision "$p"
    run "fortunes-transformer-100-$p-$r" --config config/train/fortunes-transformer.yaml --max-steps 100 --eval-every 100 --precision "$p"
  done
done
echo "runs in $out"
