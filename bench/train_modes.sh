#!/usr/bin/env bash
# Time to a target accuracy for celer-train's modes (apps/train/README.md, "Modes"): the
# shipped digits MLP (config/train/digits-mlp.yaml) trained synchronously (allreduce),
# asynchronously through a parameter server at staleness 0, 2 and 8, and hybrid (sync for
# --hybrid-steps steps, then async at staleness 2), with 2 and 4 workers, validated every
# --eval-every steps until --target is reached. Each configuration runs --runs times, with
# seeds 1..runs; the rounds alternate the configurations, so a busy machine slows them
# alike. Prints a Markdown table of medians (steps to the target: rank 0's step in async
# modes; training samples all workers had taken by then; seconds from the first step to
# the validation that reached it) and the load average.
#
#   bench/train_modes.sh [--runs 3] [--target 0.95] [--eval-every 5] [--hybrid-steps 30]
#                        [--workers "2 4"] [--build DIR] [--out DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
runs=3
target=0.95
eval_every=5
hybrid_steps=30
workers_list="2 4"
build=build
out=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --target) target=$2; shift 2 ;;
    --eval-every) eval_every=$2; shift 2 ;;
    --hybrid-steps) hybrid_steps=$2; shift 2 ;;
    --workers) workers_list=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "train_modes.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
train=$build/apps/train/celer-train
[[ -x $train ]] || { echo "train_modes.sh: build celer-train first ($train)" >&2; exit 2; }
out=${out:-$(mktemp -d /tmp/celer-train-modes.XXXXXX)}
mkdir -p "$out"
config=config/train/digits-mlp.yaml

# "label|flags" for each mode.
modes=(
  "sync|--mode sync"
  "async, staleness 0|--mode async --staleness 0"
  "async, staleness 2|--mode async --staleness 2"
  "async, staleness 8|--mode async --staleness 8"
  "hybrid: sync $hybrid_steps steps, then staleness 2|--mode hybrid --hybrid-sync-steps $hybrid_steps --staleness 2"
)

echo "train_modes.sh: target $target, validation every $eval_every steps, $runs runs each, results in $out" >&2
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for round in $(seq "$runs"); do
  for workers in $workers_list; do
    # The machine's CPUs shared by the workers (2 workers: 1 each on 2 cores).
    cpus=$(awk -v n="$workers" -v c="$(nproc)" 'BEGIN { x = c / n; if (x > 1) x = 1; print x }')
    for i in "${!modes[@]}"; do
      flags=${modes[$i]#*|}
      name="w$workers-m$i-r$round"
      # shellcheck disable=SC2086  # flags are words
      if ! "$train" --config "$config" --output "$out/$name" --name "$name" --num-workers "$workers" \
           --cpus-per-worker "$cpus" $flags --target-accuracy "$target" --eval-every "$eval_every" --epochs 30 \
           --seed "$round" --progress-interval 1000 > "$out/$name.log" 2>&1; then
        echo "train_modes.sh: $name failed; see $out/$name.log" >&2
      fi
    done
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$out" "$runs" "$target" "$workers_list" "${modes[@]}" <<'EOF'
import json, os, statistics, sys
out, runs, target, workers_list = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4].split()
modes = [m.split("|")[0] for m in sys.argv[5:]]
print(f"| workers | mode | reached {target} | steps (median) | samples (median) | seconds (median) | each run: steps, seconds |")
print("|---|---|---|---|---|---|---|")
for w in workers_list:
    for i, label in enumerate(modes):
        steps, secs, samples, each = [], [], [], []
        for r in range(1, runs + 1):
            p = os.path.join(out, f"w{w}-m{i}-r{r}", "summary.json")
            try:
                s = json.load(open(p))
            except (OSError, ValueError):
                each.append("failed")
                continue
            if s.get("reached_target"):
                steps.append(s["steps_to_target"])
                secs.append(s["seconds_to_target"])
                samples.append(s["samples_to_target"])
                each.append(f'{s["steps_to_target"]}, {s["seconds_to_target"]:.2f}')
            else:
                each.append(f'not in {s["steps"]}')
        med_steps = f"{statistics.median(steps):g}" if steps else "-"
        med_secs = f"{statistics.median(secs):.2f}" if secs else "-"
        med_samples = f"{statistics.median(samples):,.0f}" if samples else "-"
        print(f"| {w} | {label} | {len(steps)}/{runs} | {med_steps} | {med_samples} | {med_secs} | {'; '.join(each)} |")
EOF
echo
echo "load average (1, 5, 15 min): $load_before before, $load_after after; $(nproc) cores"
