#!/usr/bin/env bash
# celer-train against PyTorch DDP on gloo (bench/peers/ddp_train.py) at 1, 2 and 4 workers:
# celer-train embedded (its workers are threads of one process) and on a local cluster (a
# head and one node as processes, tests/cluster/with_cluster.sh: each worker a process, as
# DDP's are, the allreduce over CURVE-encrypted loopback TCP; gloo's is not encrypted); the
# same config (config/train/digits-mlp.yaml: the digits MLP, Adam, 32 samples a worker
# a step, 8 epochs, so the same steps at each worker count), one intra-op thread a worker,
# ROUNDS rounds (3) alternating the two systems, and a table of the median samples/s
# (samples trained / seconds of training, start-up and validation left out, as both count
# it) and the final validation accuracy. docs/benchmarks.md, "Training: celer-train
# against PyTorch DDP", has the figures.
#
# Usage: bench/train_scaling.sh [--workers "1 2 4"] [--rounds 3] [--epochs 8] [--no-cluster]
#   CELER_TRAIN  the binary (default build/apps/train/celer-train)
#   CELER        the CLI that starts the local cluster (default build/runtime/celer)
#   PYTHON       a python with torch (default /usr/bin/python3, Debian's python3-torch)
# Each worker holds cpus_per_worker CPUs of the embedded runtime: 1, or 0.5 at 4 workers on
# a 2-core machine (celer-train refuses more CPUs than the machine has; 0.5 still gives each
# worker one LibTorch thread, and the DDP processes get one thread each too).
set -euo pipefail
cd "$(dirname "$0")/.."

workers="1 2 4"
rounds=3
epochs=8
cluster=1
while [[ $# -gt 0 ]]; do
  case $1 in
    --workers) workers=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --no-cluster) cluster=0; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "train_scaling.sh: unknown argument $1 (--workers, --rounds, --epochs, --no-cluster)" >&2; exit 2 ;;
  esac
done
celer_train=${CELER_TRAIN:-build/apps/train/celer-train}
python=${PYTHON:-/usr/bin/python3}
celer=${CELER:-build/runtime/celer}
config=config/train/digits-mlp.yaml
[[ -x $celer_train ]] || { echo "train_scaling.sh: no $celer_train (cmake --build build --target celer-train)" >&2; exit 2; }
[[ $cluster == 0 || -x $celer ]] || { echo "train_scaling.sh: no $celer (cmake --build build --target celer), or --no-cluster" >&2; exit 2; }
"$python" -c 'import torch' 2>/dev/null || { echo "train_scaling.sh: $python has no torch (apt-get install python3-torch)" >&2; exit 2; }

cpus=$(nproc)
work=$(mktemp -d /tmp/train-scaling.XXXXXX)
trap 'rm -rf "$work"' EXIT
results=$work/results.jsonl

cpus_per_worker() {  # as many CPUs a worker as fit: 1, or cpus / n
  "$python" -c "print(min(1.0, $cpus / $1))"
}

echo "train_scaling: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start; $rounds rounds of workers $workers, $epochs epochs"
for round in $(seq 1 "$rounds"); do
  for n in $workers; do
    c=$(cpus_per_worker "$n")
    # Alternate which system goes first, round by round.
    order="celer ddp"
    (( cluster )) && order="celer cluster ddp"
    (( round % 2 == 0 )) && order=$(tr ' ' '\n' <<< "$order" | tac | tr '\n' ' ')
    for system in $order; do
      if [[ $system == celer || $system == cluster ]]; then
        out=$work/$system-$n-$round
        run=("$celer_train" --config "$config" --output "$out" --num-workers "$n" --cpus-per-worker "$c" --epochs "$epochs"
             --progress-interval 1000)
        [[ $system == cluster ]] && run=(tests/cluster/with_cluster.sh "$celer" --nodes 1 --cpus "$cpus" --timeout 300 -- "${run[@]}")
        "${run[@]}" > "$work/log" 2>&1 || { cat "$work/log" >&2; exit 1; }
        name=celer-train; [[ $system == cluster ]] && name=celer-cluster
        "$python" -c "import json,sys; s=json.load(open('$out/summary.json')); print(json.dumps({'system':'$name','workers':$n,'round':$round,'samples_per_s':s['samples_per_s'],'final_val_accuracy':s['final_val_accuracy'],'steps':s['steps']}))" >> "$results"
      else
        "$python" bench/peers/ddp_train.py --config "$config" --workers "$n" --cpus-per-worker "$c" \
          --epochs "$epochs" --json > "$work/log" 2>&1 \
          || { cat "$work/log" >&2; exit 1; }
        tail -1 "$work/log" | "$python" -c "import json,sys; r=json.load(sys.stdin); r['round']=$round; r['system']='pytorch-ddp'; print(json.dumps(r))" >> "$results"
      fi
      tail -1 "$results" | "$python" -c "import json,sys; r=json.load(sys.stdin); print(f\"  round {r['round']}: {r['system']:13} {r['workers']} workers  {r['steps']} steps  {r['samples_per_s']:9.0f} samples/s  val_acc {r['final_val_accuracy']:.4f}\")"
    done
  done
done
echo "train_scaling: load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"

"$python" - "$results" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def cell(system, n, key):
    v = [r[key] for r in rows if r["system"] == system and r["workers"] == n]
    return statistics.median(v) if v else float("nan")
print()
systems = [s for s in ("celer-train", "celer-cluster", "pytorch-ddp") if any(r["system"] == s for r in rows)]
title = {"celer-train": "celer embedded", "celer-cluster": "celer cluster", "pytorch-ddp": "DDP"}
head = ("| workers | steps | " + " | ".join(title[s] + " samples/s" for s in systems) + " | " +
        " | ".join(title[s].split()[-1] + " / DDP" for s in systems[:-1]) + " | val acc (" +
        ", ".join(title[s].split()[-1] for s in systems) + ") |")
print(head)
print("|" + "---|" * (head.count("|") - 1))
for n in sorted({r["workers"] for r in rows}):
    rate = {s: cell(s, n, "samples_per_s") for s in systems}
    print(f"| {n} | {cell(systems[0], n, 'steps'):.0f} | " + " | ".join(f"{rate[s]:,.0f}" for s in systems) + " | " +
          " | ".join(f"{rate[s] / rate['pytorch-ddp']:.2f}" for s in systems[:-1]) + " | " +
          " / ".join(f"{cell(s, n, 'final_val_accuracy'):.4f}" for s in systems) + " |")
print(f"\n(median of {max(r['round'] for r in rows)} rounds each)")
EOF
