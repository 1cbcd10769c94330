#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz/ with clang (ASan+UBSan) and runs each for
# the given number of seconds (default 30). Needs clang; prints why and exits 0 without it.
# Usage: scripts/fuzz.sh [seconds] [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
out=${2:-build-fuzz}
if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found; install clang to build the libFuzzer targets"
  exit 0
fi
mkdir -p "$out"
sources=(runtime/src/transport/wire.cpp runtime/src/protocol/messages.cpp
         runtime/src/protocol/resources.cpp runtime/src/common.cpp)
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
       -Iruntime/include -Iruntime/src -Igpu/include)
# The runtime sources are compiled once (as a library for libFuzzer: no main) and linked
# into every target.
objects=()
for src in "${sources[@]}"; do
  obj="$out/$(basename "$src" .cpp).o"
  clang++ "${flags[@]/-fsanitize=fuzzer,/-fsanitize=fuzzer-no-link,}" -c "$src" -o "$obj"
  objects+=("$obj")
done
for target in tests/fuzz/*_fuzz.cpp; do
  name=$(basename "$target" .cpp)
  clang++ "${flags[@]}" "$target" "${objects[@]}" -o "$out/$name"
  mkdir -p "$out/$name.corpus"
  echo "fuzz: running $name for $seconds s"
  log="$out/$name.log"
  status=0
  (cd "$out" && "./$name" -max_total_time="$seconds" -print_final_stats=1 "$name.corpus") \
    > "$log" 2>&1 || status=$?
  grep -E 'Done|stat::number_of_executed_units|ERROR|SUMMARY' "$log" || true
  if [[ $status -ne 0 ]]; then
    echo "fuzz: $name failed (exit $status); the input is in $out/crash-*; log: $log" >&2
    exit 1
  fi
done
echo "fuzz: all targets ran clean"
