#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz/ with clang (ASan+UBSan) and runs each one,
# starting from its checked-in seeds (tests/fuzz/corpus/<target>/). Inputs found along the
# way go to <build-dir>/<target>.corpus, never into the checked-in corpus.
#
# Usage: scripts/fuzz.sh [mode] [build-dir]           (build-dir: build-fuzz)
#   --ci            each target runs a fixed number of inputs (the table below), 10^6 in
#                   all: what ctest runs (default)
#   --runs N        each target runs N inputs
#   --seconds S     each target runs for S seconds (a bare number means the same)
#   --long          the long campaign: each target for 1 hour (FUZZ_SECONDS overrides), all
#                   CPUs (one libFuzzer worker per CPU, -fork), new inputs kept
#   --make-corpus   rewrites tests/fuzz/corpus/ from real encoded messages, then stops
# FUZZ_TARGETS="a b" picks targets. A crash stops the script with exit 1; the input is in
# <build-dir>/crash-* (replay: <build-dir>/<target> <that file>).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=--ci
value=
case "${1:-}" in
  --ci|--long|--make-corpus) mode=$1; shift ;;
  --runs|--seconds) mode=$1; value=${2:?"$1 needs a number"}; shift 2 ;;
  ''|-*) ;;
  *) mode=--seconds; value=$1; shift ;;
esac
out=${1:-build-fuzz}

# Inputs per target in --ci mode: 1.5 million in all, about a minute on the 2-core CI
# machine (figures in docs/security.md), weighted towards the cheap decoders.
declare -A ci_runs=(
  [hello_decode_fuzz]=400000
  [wire_decode_fuzz]=350000
  [multipart_decode_fuzz]=300000
  [bulk_frames_fuzz]=250000
  [node_store_fuzz]=200000
)

if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found; scripts/install-deps.sh installs clang and libFuzzer" >&2
  exit 1
fi
mkdir -p "$out"
root=$PWD
start=$(date +%s)

# A fuzz target is built from the runtime's and the store's sources directly, so it reaches
# into their src/ (the one place outside a module's own tests allowed to: scripts/check-boundaries.sh).
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
       -Ibase/include -Iruntime/include -Iruntime/src -Igpu/include -Istore/include
       -Istore/src -Itests -Itests/fuzz)
library_flags=("${flags[@]/-fsanitize=fuzzer,/-fsanitize=fuzzer-no-link,}")
wire_sources=(runtime/src/transport/wire.cpp runtime/src/protocol/messages.cpp
              runtime/src/protocol/resources.cpp runtime/src/common.cpp
              runtime/src/remote_registry.cpp runtime/src/type_names.cpp
              base/src/error.cpp base/src/ids.cpp)
store_sources=(runtime/src/node/node_store.cpp runtime/src/node/chunk_server.cpp runtime/src/node/store_clients.cpp
               runtime/src/node/job_fence.cpp runtime/src/node/dropped_chunk_log.cpp
               runtime/src/node/arena_handout.cpp runtime/src/config/knobs.cpp
               runtime/src/node/chunk_seal.cpp runtime/src/transport/bulk_lane.cpp
               store/src/checksum.cpp store/src/object_store.cpp store/src/shm_arena.cpp
               store/src/spill_db.cpp store/src/spill_file.cpp store/src/rocksdb_env.cpp)

# Whether $1 is missing or older than any source in the folders after it (default: the
# runtime's and the store's).
stale() {
  local file=$1
  shift
  local dirs=("$@")
  (( ${#dirs[@]} )) || dirs=(base runtime/src runtime/include gpu/include store/include store/src)
  [[ ! -f $file || -n $(find "${dirs[@]}" \( -name '*.cpp' -o -name '*.hpp' -o -name '*.def' \) \
                          -newer "$file" -print -quit) ]]
}

# Through ccache where it is installed (CI's runs share its cache: .ci/run sets its base).
cxx=(clang++)
command -v ccache >/dev/null && cxx=(ccache clang++)

# Sources are compiled once (as a library for libFuzzer: no main), two at a time, and
# linked into the targets that need them.
compile() {  # compile <array to fill> <sources...>
  local -n objects=$1
  shift
  local pids=() src obj pid
  objects=()
  for src in "$@"; do
    obj="$out/$(echo "${src%.cpp}" | tr / _).o"
    objects+=("$obj")
    stale "$obj" || continue
    "${cxx[@]}" "${library_flags[@]}" -c "$src" -o "$obj" &
    pids+=($!)
    if (( ${#pids[@]} >= 2 )); then
      wait "${pids[0]}" || { echo "fuzz: compiling failed" >&2; exit 1; }
      pids=("${pids[@]:1}")
    fi
  done
  for pid in "${pids[@]}"; do wait "$pid" || { echo "fuzz: compiling failed" >&2; exit 1; }; done
}
echo "fuzz: compiling the runtime's decoders and the node store"
compile wire_objects "${wire_sources[@]}"
compile store_objects "${store_sources[@]}"

# Each target's own file, two at a time as well.
targets=()
pids=()
for src in tests/fuzz/*_fuzz.cpp; do
  name=$(basename "$src" .cpp)
  if [[ -n ${FUZZ_TARGETS:-} && " $FUZZ_TARGETS " != *" $name "* ]]; then continue; fi
  targets+=("$name")
  stale "$out/$name" base runtime/src runtime/include gpu/include store/include store/src \
    tests/fuzz tests/fakes || continue
  # Compiled (through ccache), then linked with libFuzzer's main.
  if [[ $name == node_store_fuzz ]]; then
    { "${cxx[@]}" "${library_flags[@]}" -c "$src" -o "$out/$name.o" &&
      clang++ "${flags[@]}" "$out/$name.o" "${wire_objects[@]}" "${store_objects[@]}" \
        -lrocksdb -lxxhash -lcrypto -lzmq -lpthread -o "$out/$name"; } &
  else
    { "${cxx[@]}" "${library_flags[@]}" -c "$src" -o "$out/$name.o" &&
      clang++ "${flags[@]}" "$out/$name.o" "${wire_objects[@]}" -o "$out/$name"; } &
  fi
  pids+=($!)
  if (( ${#pids[@]} >= 2 )); then
    wait "${pids[0]}" || { echo "fuzz: building failed" >&2; exit 1; }
    pids=("${pids[@]:1}")
  fi
done
for pid in "${pids[@]}"; do wait "$pid" || { echo "fuzz: building failed" >&2; exit 1; }; done
echo "fuzz: built ${#targets[@]} targets in $(( $(date +%s) - start )) s"

if [[ $mode == --make-corpus ]]; then
  for name in "${targets[@]}"; do
    rm -rf "tests/fuzz/corpus/$name"
    mkdir -p "tests/fuzz/corpus/$name"
    "$out/$name" --make-corpus="tests/fuzz/corpus/$name"
  done
  exit 0
fi

total=0
for name in "${targets[@]}"; do
  args=(-print_final_stats=1 -max_len=8192 -timeout=10 -rss_limit_mb=2048)
  case $mode in
    --ci) args+=(-runs="${ci_runs[$name]:-100000}") ;;
    --runs) args+=(-runs="$value") ;;
    --seconds) args+=(-max_total_time="$value") ;;
    --long) args+=(-max_total_time="${FUZZ_SECONDS:-3600}" -fork="$(nproc)" -ignore_crashes=0) ;;
  esac
  mkdir -p "$out/$name.corpus"
  log="$out/$name.log"
  t0=$(date +%s)
  status=0
  (cd "$out" && "./$name" "${args[@]}" "$name.corpus" "$root/tests/fuzz/corpus/$name") \
    > "$log" 2>&1 || status=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  echo "fuzz: $name ran ${runs:-?} inputs in $(( $(date +%s) - t0 )) s"
  grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error)' "$log" || true
  if [[ $status -ne 0 ]]; then
    echo "fuzz: $name failed (exit $status); the input is in $out/crash-*; log: $log" >&2
    exit 1
  fi
  total=$(( total + ${runs:-0} ))
done
echo "fuzz: all targets ran clean: $total inputs in $(( $(date +%s) - start )) s"
