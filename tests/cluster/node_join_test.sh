#!/usr/bin/env bash
# A joining node says hello again while the head does not answer (cluster/head_join.hpp): a
# node started before its head keeps trying and joins once the head is up, and a node whose
# head never answers gives up after CELER_NODE_HEAD_TIMEOUT_MS, saying so. Real processes on
# 127.0.0.1; each daemon with a CELER_TEMP_DIR of its own, the token from a file.
#
#   tests/cluster/node_join_test.sh path/to/celer
set -euo pipefail
source "$(dirname "$0")/lib.sh"
celer=$1
work=$(mktemp -d /tmp/celer-join-test.XXXXXX)
status=1
node_cli=
cleanup() {
  [[ -n $node_cli ]] && kill "$node_cli" 2>/dev/null || true
  for d in "$work"/head "$work"/node "$work"/alone; do CELER_TEMP_DIR=$d "$celer" stop >/dev/null 2>&1 || true; done
  [[ $status -eq 0 ]] || { tail_logs "$work"/node.out "$work"/*/session_*/logs/*.log; }
  rm -rf "$work"
}
trap cleanup EXIT
unset CELER_TOKEN CELER_ADDRESS
mkdir -p "$work"/head "$work"/node "$work"/alone
od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$work/token"
chmod 600 "$work/token"
# A port nothing listens on (yet).
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# --- A node started before its head: its hellos go unanswered, and it joins once the head is up.
port=$(free_port)
CELER_TEMP_DIR=$work/node CELER_CONNECT_TIMEOUT_MS=500 \
  "$celer" start --address "127.0.0.1:$port" --token-file "$work/token" --num-cpus 1 >"$work/node.out" 2>&1 &
node_cli=$!
# Its first hello goes unanswered (the line it logs), within its 500 ms wait and a pause.
for _ in $(seq 300); do
  grep -q "did not answer hello 1" "$work/node.out" && break
  kill -0 "$node_cli" 2>/dev/null || fail "the node gave up before the head started: $(cat "$work/node.out")"
  sleep 0.1
done
grep -q "did not answer hello 1" "$work/node.out" || fail "the node did not say its first hello went unanswered"
echo "ok: the node's hello went unanswered and it tries again: $(grep -m1 "did not answer hello 1" "$work/node.out")"
out=$(CELER_TEMP_DIR=$work/head "$celer" start --head --port "$port" --token-file "$work/token" --num-cpus 1 2>&1) ||
  fail "the head did not start: $out"
echo "$out" | head -1
# The node's `celer start` returns once it has joined (bounded by node_head_timeout_ms, 60 s).
wait "$node_cli" || fail "the node did not join once the head was up: $(cat "$work/node.out")"
node_cli=
grep -q "celer node started and joined 127.0.0.1:$port" "$work/node.out" ||
  fail "the node did not say it joined: $(cat "$work/node.out")"
echo "ok: a node started before its head joined it: $(grep "started and joined" "$work/node.out")"
# The head counts it: two nodes alive (its own and the one that waited for it).
for _ in $(seq 100); do
  st=$(CELER_TEMP_DIR=$work/head "$celer" status 2>&1 || true)
  grep -q "2 node(s), 2 alive" <<<"$st" && break
  sleep 0.1
done
grep -q "2 node(s), 2 alive" <<<"$st" || fail "the head does not list two live nodes: $st"
echo "ok: the head lists both nodes alive"

# --- A node whose head never answers gives up after node_head_timeout_ms, naming the knob.
port=$(free_port)
if out=$(CELER_TEMP_DIR=$work/alone CELER_CONNECT_TIMEOUT_MS=300 CELER_NODE_HEAD_TIMEOUT_MS=2000 \
  "$celer" start --address "127.0.0.1:$port" --token-file "$work/token" --num-cpus 1 2>&1); then
  fail "a node joined a head that does not exist: $out"
fi
grep -q "cannot join the cluster at 127.0.0.1:$port" <<<"$out" && grep -q "node_head_timeout_ms is 2000" <<<"$out" ||
  fail "the node's failure does not say why: $out"
[[ $(grep -c "did not answer hello" <<<"$out") -ge 2 ]] || fail "the node did not try again before giving up: $out"
echo "ok: a node with no head gave up after node_head_timeout_ms: $(tail -1 <<<"$out")"

status=0
echo "node join: passed"
