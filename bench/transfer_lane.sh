#!/usr/bin/env bash
# What the bulk lane gains: object_transfer_gigabytes (8 objects of 128 MiB made on a second
# node and read on the head's node, two trials) with CELER_OBJECT_TRANSFER_LANE=1 (the
# default: chunks sealed with AES-256-GCM on a lane of their own) and =0 (chunks inside
# CURVE), alternating, each on a fresh local cluster, so that a busy machine slows both alike.
#
#   bench/transfer_lane.sh [--rounds N] [--build DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
rounds=3
build=build
while [[ $# -gt 0 ]]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    *) echo "usage: bench/transfer_lane.sh [--rounds N] [--build DIR]" >&2; exit 2 ;;
  esac
done
celer=$build/runtime/celer
[[ -x $celer && -x $build/bench/celer-microbenchmark ]] || { echo "build $celer and celer-microbenchmark first" >&2; exit 1; }
unset CELER_ADDRESS
temp=""
trap '[[ -n $temp ]] && { CELER_TEMP_DIR=$temp "$celer" stop >/dev/null 2>&1; rm -rf "$temp"; }' EXIT
echo "round lane load GB/s"
for r in $(seq "$rounds"); do
  for lane in 1 0; do
    temp=$(mktemp -d /tmp/celer-transfer-lane.XXXXXX)
    export CELER_TEMP_DIR=$temp CELER_OBJECT_TRANSFER_LANE=$lane
    addr=$("$celer" start --head --port 0 --num-cpus 1 | sed -n 's/^celer head started at \([^ ]*\).*/\1/p')
    "$celer" start --address "$addr" --num-cpus 0 >/dev/null
    load=$(cut -d' ' -f1 /proc/loadavg)
    rate=$("$celer" microbenchmark --address "$addr" --only object_transfer 2>&1 |
           sed -n 's/^object_transfer_gigabytes *\([0-9.]* +- [0-9.]*\).*/\1/p')
    echo "$r $lane $load ${rate:-failed}"
    "$celer" stop >/dev/null 2>&1
    rm -rf "$temp"
    temp=""
  done
done
