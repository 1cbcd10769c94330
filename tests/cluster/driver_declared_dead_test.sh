#!/usr/bin/env bash
# A driver the head declared gone is told so when it wakes: a driver stopped (SIGSTOP) past
# node_timeout_ms has its job ended by the head (its workers stopped); continued, its next
# heartbeat is answered with job_ended, and its waits fail with the head's reason instead of
# waiting for work that no longer runs. The head ends the job once and does not take it back.
#
#   tests/cluster/driver_declared_dead_test.sh path/to/celer path/to/celer-head-restart-driver
set -euo pipefail
celer=$1
driver=$2
source "$(dirname "$0")/lib.sh"
CELER_TEMP_DIR=$(mktemp -d /tmp/celer-driver-dead.XXXXXX)
export CELER_TEMP_DIR CELER_NODE_TIMEOUT_MS=1000
unset CELER_ADDRESS
status=1
driver_pid=
cleanup() {
  [[ -n $driver_pid ]] && kill -CONT "$driver_pid" 2>/dev/null && kill -KILL "$driver_pid" 2>/dev/null || true
  "$celer" stop >/dev/null 2>&1 || true
  if [[ $status -ne 0 ]]; then
    tail_logs "$CELER_TEMP_DIR/driver.out" "$CELER_TEMP_DIR"/session_latest/logs/*.log
  fi
  rm -rf "$CELER_TEMP_DIR"
}
trap cleanup EXIT
session=$CELER_TEMP_DIR/session_latest
out=$CELER_TEMP_DIR/driver.out

started=$("$celer" start --head --port 0 --num-cpus 1)
export CELER_ADDRESS=$(sed -n 's/^celer head started at \([^ ]*\).*/\1/p' <<<"$started")
"$driver" tasks >"$out" 2>&1 &
driver_pid=$!
for _ in $(seq 300); do
  [[ $(grep -c '^task ok' "$out" || true) -ge 2 ]] && break
  sleep 0.1
done
[[ $(grep -c '^task ok' "$out" || true) -ge 2 ]] || fail "the driver never got going"

kill -STOP "$driver_pid"
for _ in $(seq 100); do
  contains "stopped heartbeating" "$session/logs/head.log" && break
  sleep 0.1
done
contains "stopped heartbeating" "$session/logs/head.log" || fail "the head never ended the stopped driver's job"
sleep 1  # its next tick: what the driver would otherwise find revived
kill -CONT "$driver_pid"
code=0
for _ in $(seq 150); do
  kill -0 "$driver_pid" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$driver_pid" 2>/dev/null && fail "the driver still runs 15 s after it woke"
wait "$driver_pid" || code=$?
driver_pid=
[[ $code -eq 3 ]] || fail "the driver exited with $code, not 3 (a wait failing with the head's reason)"
contains "task failed .*: the head ended job .*: its driver sent no heartbeat for .* (node_timeout_ms is 1000 ms)" "$out" ||
  fail "no wait failed with the head's reason"
[[ $(grep -c "stopped heartbeating" "$session/logs/head.log") -eq 1 ]] || fail "the head ended the job more than once"
status=0
echo "driver declared dead: passed"
