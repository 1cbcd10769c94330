#!/usr/bin/env bash
# celer-preprocess end to end (apps/preprocess/README.md): a small synthetic catalog run
# embedded, then on a local cluster of two nodes (the workers are worker processes running
# celer-preprocess's own binary) with one worker's process ending mid-run
# (CELER_PREPROCESS_CRASH). The cluster run must lose no item and write none twice: the same
# item count and key checksum, and the same shard bytes, as the embedded run. A rerun of the
# cluster's config reads every block from the cache. With celer-train given, it then learns
# the category from the records.
#
#   tests/cluster/preprocess_test.sh path/to/celer path/to/celer-preprocess [path/to/celer-train]
set -euo pipefail
celer=$1
pre=$2
train=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
work=$(mktemp -d /tmp/celer-preprocess-test.XXXXXX)
trap 'rm -rf "$work"' EXIT

cat > "$work/small.yaml" <<YAML
name: small
generate: {dir: $work/catalog, catalogs: 4, items_per_catalog: 700, categories: 6, seed: 5}
input:
  format: jsonl
  paths: [$work/catalog/catalog-*.jsonl]
  fields: {key: id, label: label, category: category, text: [title, description], values: [price, rating]}
  block_items: 128
stages:
  - lowercase
  - tokenize
  - normalize: {mode: zscore}
  - hash_features: {dims: 64}
output: {field: values, shards: 3, shard_by: category}
run: {workers: 3, scheduling: reshard, cache: false}
YAML

json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

echo "== embedded"
"$pre" --config "$work/small.yaml" --output "$work/embedded"
[[ $(json "$work/embedded/manifest.json" "d['items']") == 2800 ]] || fail "embedded: not 2800 items"

# Fixed shares, so that worker 1 surely runs a block of its own (with stealing and backup
# copies the others may finish every block while its process is still starting).
# The cluster runs from / and the driver from $work, with paths relative to $work (the
# config's input and the output): a worker runs where its node runs, so the driver must
# resolve them before sending them (issue 35).
echo "== local cluster, relative paths, fixed shares, worker 1's process ends at its first block of the last pass"
sed "s|$work/||g" "$work/small.yaml" > "$work/relative.yaml"
grep -q "paths: \[catalog/" "$work/relative.yaml" || fail "relative.yaml: $(cat "$work/relative.yaml")"
(cd / && CELER_PREPROCESS_CRASH=1:1 "$here/with_cluster.sh" "$celer" --nodes 2 --cpus 2 --timeout 150 -- \
  bash -c 'cd "$1" && shift && exec "$@"' driver "$work" \
  "$pre" --config relative.yaml --scheduling fixed --output cluster) | tee "$work/cluster.log"
grep -q "on the cluster at" "$work/cluster.log" || fail "the run was not on the cluster"
failures=$(json "$work/cluster/summary.json" "d['worker_failures']")
[[ $failures -ge 1 ]] || fail "no worker failure was seen (the crash hook did not fire)"
for key in items key_checksum; do
  a=$(json "$work/embedded/manifest.json" "d['$key']")
  b=$(json "$work/cluster/manifest.json" "d['$key']")
  [[ $a == "$b" ]] || fail "$key differs: embedded $a, cluster $b"
done
for f in "$work"/embedded/shard-*.rec; do
  cmp "$f" "$work/cluster/$(basename "$f")" || fail "$(basename "$f") differs from the embedded run's"
done
echo "cluster run: $failures worker failure(s), the same $(json "$work/cluster/manifest.json" "d['items']") items, key checksum and shard bytes as embedded"

echo "== the cache: a second run reads every block"
sed -i 's/cache: false/cache: true/' "$work/small.yaml"
"$pre" --config "$work/small.yaml" --output "$work/cached" > /dev/null
"$pre" --config "$work/small.yaml" --output "$work/cached" | tee "$work/cached.log"
blocks=$(json "$work/cached/summary.json" "sum(p['blocks'] for p in d['passes'])")
hits=$(json "$work/cached/summary.json" "d['cache_hits']")
[[ $hits == "$blocks" ]] || fail "the rerun read $hits of $blocks blocks from the cache"
for f in "$work"/embedded/shard-*.rec; do
  cmp "$f" "$work/cached/$(basename "$f")" || fail "the cached run's $(basename "$f") differs"
done

echo "== a config error names the file, line and stage, and runs nothing"
sed 's/dims: 64/dims: 0/' "$work/small.yaml" > "$work/bad.yaml"
set +e
"$pre" --config "$work/bad.yaml" --output "$work/bad" > "$work/bad.log" 2>&1
code=$?
set -e
[[ $code == 2 ]] || fail "a bad stage parameter exited $code, not 2"
grep -q "stage 4 (hash_features): dims is '0'" "$work/bad.log" || fail "the error does not name the stage: $(cat "$work/bad.log")"
[[ ! -e $work/bad/manifest.json ]] || fail "a refused config wrote output"
printf 'name: x\ninput: {format: jsonl, paths: [a]}\nstges: []\n' > "$work/typo.yaml"
set +e
"$pre" --config "$work/typo.yaml" > "$work/typo.log" 2>&1
code=$?
set -e
[[ $code == 2 ]] && grep -q "unknown key 'stges'.*Did you mean 'stages'" "$work/typo.log" ||
  fail "a misspelt key: exit $code, $(cat "$work/typo.log")"

if [[ -n $train ]]; then
  echo "== celer-train learns the category from the records"
  "$train" --data "records:$work/embedded" --output "$work/train" --max-steps 150 | tee "$work/train.log"
  acc=$(json "$work/train/summary.json" "d['final_val_accuracy']")
  python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) > 0.5 else 1)" "$acc" ||
    fail "celer-train reached only $acc on the catalog records (6 categories: chance is ~0.17)"
fi
echo "preprocess_test: all checks passed"
