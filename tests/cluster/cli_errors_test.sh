#!/usr/bin/env bash
# The CLI's error paths when no head answers: `celer status` with a stale session (its head
# SIGKILLed) or an address where nothing listens says so at once, with what to do, instead of
# after the hello's timeout (connect_timeout_ms, 10 s); `celer start --address` to a port
# where nothing listens says that nothing answers there (not "no token"), and still says "no
# token" when a head does answer; an example program prints celer's error and a hint instead
# of "terminate called". Real processes on 127.0.0.1, each with a CELER_TEMP_DIR of its own.
#
#   tests/cluster/cli_errors_test.sh path/to/celer path/to/celer-example-fan_out
set -euo pipefail
source "$(dirname "$0")/lib.sh"
celer=$1
example=$2
work=$(mktemp -d /tmp/celer-cli-errors-test.XXXXXX)
status=1
cleanup() {
  for d in "$work"/head "$work"/stranger "$work"/node; do CELER_TEMP_DIR=$d "$celer" stop >/dev/null 2>&1 || true; done
  [[ $status -eq 0 ]] || { tail_logs "$work"/*/session_*/logs/*.log; }
  rm -rf "$work"
}
trap cleanup EXIT
unset CELER_TOKEN CELER_ADDRESS
mkdir -p "$work"/head "$work"/stranger "$work"/node
od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$work/token"
chmod 600 "$work/token"
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
# Runs a command, keeping its output in $out, its exit code in $rc and its time in $took (ms).
timed() {
  local t0
  t0=$(now_ms)
  rc=0
  out=$("$@" 2>&1) || rc=$?
  took=$(( $(now_ms) - t0 ))
}
# Today's timeout is 10 s: well under it, with room for a loaded machine.
bound_ms=5000

# --- A head that runs: `celer status` answers.
port=$(free_port)
addr=127.0.0.1:$port
CELER_TEMP_DIR=$work/head "$celer" start --head --port "$port" --num-cpus 0 --dashboard-port -1 >/dev/null ||
  fail "the head did not start"
session=$(readlink -f "$work/head/session_latest")
timed env CELER_TEMP_DIR="$work/head" "$celer" status
[[ $rc -eq 0 ]] || fail "celer status with a live head: $out"

# --- A machine without the token, while the head answers: it still says "no token".
timed env CELER_TEMP_DIR="$work/stranger" "$celer" start --address "$addr" --num-cpus 1
[[ $rc -ne 0 ]] || fail "a node without a token joined: $out"
grep -q "no token for the cluster at $addr" <<<"$out" || fail "a node without a token, with a head there, did not say so: $out"
echo "ok: no token, a head answering: $(head -1 <<<"$out")"

# --- The head SIGKILLed: its session stays, with its pid file. `celer status` says at once.
head_pid=$(cat "$session"/pids/head-*.pid)
kill -KILL "$head_pid"
for _ in $(seq 100); do kill -0 "$head_pid" 2>/dev/null || break; sleep 0.05; done
timed env CELER_TEMP_DIR="$work/head" "$celer" status
[[ $rc -ne 0 ]] || fail "celer status with a dead head exited 0: $out"
grep -q "no cluster runs at $addr: its head (pid $head_pid) is gone" <<<"$out" || fail "celer status with a dead head: $out"
grep -q "celer start --head" <<<"$out" || fail "celer status with a dead head does not say what to do: $out"
(( took < bound_ms )) || fail "celer status with a dead head took $took ms: $out"
echo "ok: celer status, the head SIGKILLed, in $took ms: $(head -1 <<<"$out")"
# The commands that go through the head's HTTP server say the same.
timed env CELER_TEMP_DIR="$work/head" "$celer" list nodes
[[ $rc -ne 0 ]] && grep -q "no cluster runs at $addr: its head (pid $head_pid) is gone" <<<"$out" ||
  fail "celer list nodes with a dead head: $out"
echo "ok: celer list nodes, the head SIGKILLed: $(head -1 <<<"$out")"

# --- The same session once `celer stop` has removed the stale pid file: nothing listens at
# the address, and the hello says so at the first refused connection.
CELER_TEMP_DIR=$work/head "$celer" stop >/dev/null
timed env CELER_TEMP_DIR="$work/head" "$celer" status
[[ $rc -ne 0 ]] || fail "celer status with no head exited 0: $out"
grep -q "nothing answers at tcp://$addr" <<<"$out" && grep -q "celer start --head" <<<"$out" ||
  fail "celer status with no head at the session's address: $out"
(( took < bound_ms )) || fail "celer status with no head took $took ms: $out"
echo "ok: celer status, nothing at the session's address, in $took ms: $(head -1 <<<"$out")"

# --- `celer status --address` where nothing listens, on a machine without the token.
free=127.0.0.1:$(free_port)
timed env CELER_TEMP_DIR="$work/stranger" "$celer" status --address "$free"
[[ $rc -ne 0 ]] || fail "celer status --address $free exited 0: $out"
grep -q "nothing answers at $free" <<<"$out" || fail "celer status --address $free: $out"
! grep -q "no token" <<<"$out" || fail "celer status --address $free blamed the token: $out"
(( took < bound_ms )) || fail "celer status --address $free took $took ms: $out"
echo "ok: celer status --address, nothing there, in $took ms: $(head -1 <<<"$out")"

# --- `celer start --address` where nothing listens, without a token: nothing answers there.
timed env CELER_TEMP_DIR="$work/stranger" "$celer" start --address "$free" --num-cpus 1
[[ $rc -ne 0 ]] || fail "celer start --address $free exited 0: $out"
grep -q "nothing answers at $free" <<<"$out" && grep -q "celer start --head" <<<"$out" ||
  fail "celer start --address $free without a token: $out"
(( took < bound_ms )) || fail "celer start --address $free without a token took $took ms: $out"
echo "ok: celer start --address, nothing there, no token, in $took ms: $(head -1 <<<"$out")"

# --- With a token the node keeps saying hello until node_head_timeout_ms (a node may start
# before its head: node_join_test.sh), then says that nothing answers there.
timed env CELER_TEMP_DIR="$work/node" CELER_CONNECT_TIMEOUT_MS=300 CELER_NODE_HEAD_TIMEOUT_MS=1500 \
  "$celer" start --address "$free" --token-file "$work/token" --num-cpus 1
[[ $rc -ne 0 ]] || fail "celer start --address $free with a token exited 0: $out"
grep -q "cannot join the cluster at $free: .*nothing answers at tcp://$free" <<<"$out" ||
  fail "a node that gave up does not say that nothing answers: $out"
grep -q "Is its head running" <<<"$out" || fail "a node that gave up does not say what to do: $out"
echo "ok: celer start --address, nothing there, a token: $(tail -1 <<<"$out")"

# --- An example program pointed at nothing: celer's error and a hint, exit 1, no terminate.
timed env CELER_TEMP_DIR="$work/stranger" CELER_ADDRESS="$free" CELER_TOKEN="$(cat "$work/token")" \
  CELER_CONNECT_TIMEOUT_MS=500 "$example" --tasks 4
[[ $rc -eq 1 ]] || fail "the example exited $rc: $out"
grep -q "^celer: unavailable: cannot connect to the cluster at $free: nothing answers at tcp://$free" <<<"$out" ||
  fail "the example did not print celer's error: $out"
grep -q "^hint: .*celer start --head" <<<"$out" || fail "the example gave no hint: $out"
! grep -q "terminate called" <<<"$out" || fail "the example was terminated: $out"
echo "ok: the example, no cluster there: $(head -1 <<<"$out")"
timed env CELER_TEMP_DIR="$work/stranger" CELER_ADDRESS="$free" "$example" --tasks 4
[[ $rc -eq 1 ]] || fail "the example without a token exited $rc: $out"
grep -q "^celer: unauthenticated: no token for the cluster at $free" <<<"$out" && grep -q "^hint: .*CELER_TOKEN" <<<"$out" ||
  fail "the example without a token: $out"
echo "ok: the example, no token: $(head -1 <<<"$out")"

status=0
echo "cli errors: passed"
