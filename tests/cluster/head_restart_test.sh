#!/usr/bin/env bash
# A head killed with SIGKILL and started again on the same port and session (celer start
# --head --port P --resume) recovers the cluster from its tables: the node agent and the
# driver reconnect by themselves, the driver's actor calls go on, the head finds the named
# actor again (for that driver and for a second one), and a new job's task runs. Prints how long
# after the restart the head answered the driver's lookups again.
#
#   tests/cluster/head_restart_test.sh path/to/celer path/to/celer-head-restart-driver
set -euo pipefail
celer=$1
driver=$2
CELER_TEMP_DIR=$(mktemp -d /tmp/celer-head-restart.XXXXXX)
export CELER_TEMP_DIR
unset CELER_ADDRESS
status=1
driver_pid=
cleanup() {
  [[ -n $driver_pid ]] && kill -KILL "$driver_pid" 2>/dev/null || true
  "$celer" stop >/dev/null 2>&1 || true
  if [[ $status -ne 0 ]]; then
    echo "---- driver (last 30 lines)"
    tail -n 30 "$CELER_TEMP_DIR/driver.out" 2>/dev/null || true
    for f in "$CELER_TEMP_DIR"/session_latest/logs/*.log; do
      [[ -s $f ]] || continue
      echo "---- $(basename "$f") (last 30 lines)"
      tail -n 30 "$f"
    done
  fi
  rm -rf "$CELER_TEMP_DIR"
}
trap cleanup EXIT
fail() { echo "FAILED: $*"; exit 1; }
now_ms() { date +%s%3N; }
session=$CELER_TEMP_DIR/session_latest
out=$CELER_TEMP_DIR/driver.out
stop=$CELER_TEMP_DIR/stop
name=counter-$$

# A head without a node of its own (killing it kills no worker), and one node agent.
started=$("$celer" start --head --port 0 --num-cpus 0)
addr=$(sed -n 's/^celer head started at \([^ ]*\).*/\1/p' <<<"$started")
port=${addr##*:}
"$celer" start --address "$addr" --num-cpus 2 >/dev/null
node_pid=$(cat "$session"/pids/node-*)
export CELER_ADDRESS=$addr
# Both drivers name their actor in one shared namespace: a name in a job's own namespace is
# that job's alone (docs/scheduling.md, "Named actors and namespaces").
export CELER_NAMESPACE=head-restart-test

"$driver" serve "$name" "$stop" >"$out" 2>&1 &
driver_pid=$!
for _ in $(seq 300); do
  [[ $(grep -c '^lookup ok' "$out" || true) -ge 2 ]] && break
  sleep 0.1
done
[[ $(grep -c '^lookup ok' "$out" || true) -ge 2 ]] || fail "the driver never got going"

head_pid=$(cat "$session"/pids/head-*)
kill -KILL "$head_pid"
killed_at=$(now_ms)
sleep 2  # the head is down: actor calls go straight to the worker meanwhile
calls_while_down=$(awk -v t="$killed_at" '$1 == "call" && $3 > t' "$out" | wc -l)
restart_at=$(now_ms)
"$celer" start --head --port "$port" --resume --num-cpus 0 | grep "celer head resumed at $addr" >/dev/null ||
  fail "celer start --head --resume did not resume the head at $addr"
[[ ! -e $session/pids/head-$head_pid.pid ]] || fail "the dead head's pid file was left for celer stop"

# The driver's lookups need the head: the first one answered after the restart.
back_at=
for _ in $(seq 300); do
  back_at=$(awk -v t="$restart_at" '$1 == "lookup" && $2 == "ok" && $3 > t { print $3; exit }' "$out")
  [[ -n $back_at ]] && break
  sleep 0.1
done
[[ -n $back_at ]] || fail "the driver's lookups of its named actor did not succeed within 30 s of the restart"
grep -q "recovered from its tables: 1 live node(s)" "$session/logs/head.log" ||
  fail "the restarted head did not recover the node from its tables"
grep -q "the head says it restarted" "$session"/logs/node-*.log ||
  fail "the node was not told that the head restarted"

# A second driver (a job the restarted head never knew) finds the actor by its name and
# runs a new task.
actor=$(sed -n 's/^ready //p' "$out")
found=$("$driver" find "$name") || fail "the second driver failed: $found"
grep -q "^found $actor\$" <<<"$found" || fail "the second driver did not find actor $actor: $found"
grep -q '^task 5$' <<<"$found" || fail "the second driver's new task did not run: $found"

# The node lived through it and is still known alive; the driver's calls went on.
kill -0 "$node_pid" 2>/dev/null || fail "the node agent exited while the head was away"
"$celer" status | grep "1 node(s), 1 alive" >/dev/null || fail "celer status after the restart: $("$celer" status 2>&1)"
sleep 1
calls_after=$(awk -v t="$back_at" '$1 == "call" && $3 > t' "$out" | wc -l)
[[ $calls_after -gt 0 ]] || fail "the driver's calls did not go on after the restart"
! grep -q '^call failed' "$out" || fail "a call of the actor failed: $(grep -m1 '^call failed' "$out")"
! grep -q '^lookup wrong' "$out" || fail "the head found another actor under the name"

touch "$stop"
wait "$driver_pid" || fail "the driver exited with status $?"
driver_pid=
echo "calls while the head was down: $calls_while_down; lookups answered again $((back_at - restart_at)) ms after the restart began"
status=0
echo "head restart: passed"
