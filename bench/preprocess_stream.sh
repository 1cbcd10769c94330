#!/usr/bin/env bash
# The floor under celer-preprocess's figures: how fast this machine streams the input's
# bytes with no parsing at all. Reads the files once (so that the page cache holds them),
# then times `cat FILE... > /dev/null` and prints GB/s (10^9 bytes per second) and the
# size. A pipeline that reads these files cannot read them faster than this.
#
#   bench/preprocess_stream.sh FILE...            e.g. bench/preprocess_stream.sh DIR/catalog-*.jsonl
#   bench/preprocess_stream.sh celer_results/catalog/shard-*.rec   # and celer-bench-records on them
set -euo pipefail
if [[ $# -eq 0 ]]; then
  echo "usage: $0 FILE..." >&2
  exit 2
fi
bytes=$(cat -- "$@" | wc -c)   # the warm read: afterwards the page cache holds them
rounds=3
best=""
for ((i = 0; i < rounds; i++)); do
  start=$EPOCHREALTIME
  cat -- "$@" >/dev/null
  end=$EPOCHREALTIME
  s=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.6f", b - a }')
  if [[ -z $best ]] || awk -v x="$s" -v y="$best" 'BEGIN { exit !(x < y) }'; then best=$s; fi
done
awk -v n="$bytes" -v s="$best" -v f="$#" 'BEGIN {
  printf "floor_cat: %d files, %.3f GB in %.4f s = %.2f GB/s (cat > /dev/null, page cache warm, best of 3)\n",
         f, n / 1e9, s, (s > 0 ? n / 1e9 / s : 0) }'

# celer's own reader on record files (CELERRC1 shards), when the files given are record
# files: every record read through record_reader::next with its CRC-32 checked.
if [[ ${1##*.} == rec ]]; then
  records=${CELER_BENCH_RECORDS:-$(dirname "$0")/../build/bench/celer-bench-records}
  "$records" "$@"
fi
