#!/usr/bin/env bash
# `celer start` takes the cluster token from a file (--token-file), standard input
# (--token-stdin) or the environment (CELER_TOKEN), never from its command line: the head and
# node daemons it leaves running have no token in /proc/PID/cmdline, --token VALUE is refused
# with a message that says what to use instead, and a token file others can read is refused.
# Each node joins with a CELER_TEMP_DIR of its own, as on another machine, so it uses the
# token it was given and cannot read the head's session directory.
#
#   tests/cluster/token_hygiene_test.sh path/to/celer
set -euo pipefail
source "$(dirname "$0")/lib.sh"
celer=$1
work=$(mktemp -d /tmp/celer-token-test.XXXXXX)
# Every CELER_TEMP_DIR a daemon may be started in (start_in runs in subshells).
dirs=("$work"/{head-a,head-b,head-c,head-d,node-1,node-2,node-3,refused})
status=1
cleanup() {
  for d in "${dirs[@]}"; do CELER_TEMP_DIR=$d "$celer" stop >/dev/null 2>&1 || true; done
  [[ $status -eq 0 ]] || tail_logs "$work"/*/session_*/logs/*.log
  rm -rf "$work"
}
trap cleanup EXIT
export CELER_NODE_TIMEOUT_MS=3000
unset CELER_TOKEN CELER_ADDRESS

new_token() { od -An -tx1 -N32 /dev/urandom | tr -d ' \n'; }
# The pid in "celer ... started ... (pid N)".
pid_of() { sed -n 's/.*(pid \([0-9]*\)).*/\1/p' <<<"$1"; }
addr_of() { sed -n 's/^celer head started at \([^ ]*\).*/\1/p' <<<"$1"; }
# No token in the daemon's command line (nor in its parent's, the shell's, if still there).
check_cmdline() {
  local pid=$1 token=$2 what=$3
  [[ -n $pid && -r /proc/$pid/cmdline ]] || fail "$what: no running daemon (pid '$pid')"
  if tr '\0' ' ' </proc/"$pid"/cmdline | contains -F "$token"; then
    fail "$what: the token is in /proc/$pid/cmdline: $(tr '\0' ' ' </proc/"$pid"/cmdline)"
  fi
  echo "ok: $what (pid $pid) has no token in its command line: $(tr '\0' ' ' </proc/"$pid"/cmdline)"
}
start_in() {  # start_in DIR args...: celer start with CELER_TEMP_DIR=DIR
  local d=$1
  shift
  mkdir -p "$d"
  CELER_TEMP_DIR=$d "$celer" start "$@" 2>&1
}

# --- --token VALUE is refused, in either form, and the message says what to use.
for form in "--token XYZ-sekret-0123456789" "--token=XYZ-sekret-0123456789"; do
  # shellcheck disable=SC2086
  if out=$(CELER_TEMP_DIR=$work/refused "$celer" start --head --port 0 $form 2>&1); then
    fail "celer start $form was accepted: $out"
  fi
  grep -qF -- "--token is not accepted" <<<"$out" || fail "no refusal message: $out"
  grep -qF -- "--token-file" <<<"$out" && grep -qF -- "--token-stdin" <<<"$out" &&
    grep -qF "CELER_TOKEN" <<<"$out" || fail "the refusal does not say what to use: $out"
  grep -qF "XYZ-sekret" <<<"$out" && fail "the refusal repeats the token: $out"
  echo "ok: celer start $form is refused: $out"
done
[[ ! -e $work/refused/session_latest ]] || fail "a refused start made a session"

# --- A token file that others can read, or that is missing, is refused.
token_a=$(new_token)
printf '%s\n' "$token_a" >"$work/token-a"
chmod 644 "$work/token-a"
if out=$(start_in "$work/head-a" --head --port 0 --token-file "$work/token-a"); then
  fail "a mode 0644 token file was accepted: $out"
fi
grep -qF "chmod 600" <<<"$out" || fail "no chmod hint: $out"
echo "ok: a 0644 token file is refused: $out"
if out=$(start_in "$work/head-a" --head --port 0 --token-file "$work/missing"); then
  fail "a missing token file was accepted: $out"
fi
echo "ok: a missing token file is refused: $out"
chmod 600 "$work/token-a"

# --- Head A with --token-file; node 1 joins with --token-stdin, node 2 with CELER_TOKEN.
out=$(start_in "$work/head-a" --head --port 0 --num-cpus 1 --token-file "$work/token-a")
echo "$out"
addr=$(addr_of "$out")
[[ -n $addr ]] || fail "head A did not start: $out"
grep -qF -- "--token-file" <<<"$out" || fail "the head's hint does not use --token-file: $out"
grep -qF "$token_a" <<<"$out" && fail "celer start printed the token: $out"
check_cmdline "$(pid_of "$out")" "$token_a" "head A (--token-file)"
[[ $(cat "$work/head-a/session_latest/token") == "$token_a" ]] ||
  fail "head A's session does not hold the token it was given"

out=$(printf '%s\n' "$token_a" | start_in "$work/node-1" --address "$addr" --num-cpus 1 --token-stdin)
echo "$out"
grep -q "joined" <<<"$out" || fail "node 1 (--token-stdin) did not join: $out"
check_cmdline "$(pid_of "$out")" "$token_a" "node 1 (--token-stdin)"

out=$(CELER_TOKEN=$token_a start_in "$work/node-2" --address "$addr" --num-cpus 1)
echo "$out"
grep -q "joined" <<<"$out" || fail "node 2 (CELER_TOKEN) did not join: $out"
check_cmdline "$(pid_of "$out")" "$token_a" "node 2 (CELER_TOKEN)"

# A node with another token is refused by the head.
other=$(new_token)
printf '%s\n' "$other" >"$work/token-other"
chmod 600 "$work/token-other"
if out=$(start_in "$work/node-3" --address "$addr" --num-cpus 1 --token-file "$work/token-other"); then
  fail "a node with a wrong token joined: $out"
fi
echo "ok: a node with a wrong token is refused: $out"

for _ in $(seq 100); do
  st=$(CELER_TEMP_DIR=$work/head-a "$celer" status --address "$addr" 2>&1) || true
  grep -q "3 alive" <<<"$st" && break
  sleep 0.1
done
grep -q "3 node(s), 3 alive" <<<"$st" || fail "head A does not have its 3 nodes: $st"
echo "ok: head A serves its node and the two that joined with the token"

# --- Head B with --token-stdin, head C with CELER_TOKEN; a driver with the token reaches each.
token_b=$(new_token)
out=$(printf '%s\n' "$token_b" | start_in "$work/head-b" --head --port 0 --num-cpus 1 --token-stdin)
echo "$out"
addr_b=$(addr_of "$out")
[[ -n $addr_b ]] || fail "head B (--token-stdin) did not start: $out"
check_cmdline "$(pid_of "$out")" "$token_b" "head B (--token-stdin)"
[[ $(cat "$work/head-b/session_latest/token") == "$token_b" ]] || fail "head B's token differs"

token_c=$(new_token)
out=$(CELER_TOKEN=$token_c start_in "$work/head-c" --head --port 0 --num-cpus 1)
echo "$out"
addr_c=$(addr_of "$out")
[[ -n $addr_c ]] || fail "head C (CELER_TOKEN) did not start: $out"
check_cmdline "$(pid_of "$out")" "$token_c" "head C (CELER_TOKEN)"
[[ $(cat "$work/head-c/session_latest/token") == "$token_c" ]] || fail "head C's token differs"

mkdir -p "$work/driver"
st=$(CELER_TEMP_DIR=$work/driver CELER_TOKEN=$token_b "$celer" status --address "$addr_b" 2>&1) ||
  fail "a driver with head B's token was refused: $st"
st=$(CELER_TEMP_DIR=$work/driver CELER_TOKEN=$token_c "$celer" status --address "$addr_c" 2>&1) ||
  fail "a driver with head C's token was refused: $st"
if st=$(CELER_TEMP_DIR=$work/driver CELER_TOKEN=$token_b "$celer" status --address "$addr_c" 2>&1); then
  fail "head C accepted head B's token: $st"
fi
echo "ok: heads B and C serve their own tokens only"

# A head refuses a token too short to protect it.
if out=$(CELER_TOKEN=short start_in "$work/head-d" --head --port 0); then
  fail "a head started with a 5-character token: $out"
fi
echo "ok: a short token is refused for a head: $out"

status=0
echo "token hygiene: passed"
