#!/usr/bin/env bash
# A cluster across three network namespaces joined by veth links to a bridge: the head in
# one, a node agent in each of the others, each with its own IP. The driver runs in the
# head's namespace; work must land on all three hosts, and an object made on one host
# must be read on another. Needs root (ip netns); exits 77 (skipped) with a message when
# it cannot run.
#
#   tests/cluster/netns_test.sh path/to/celer path/to/celer_cluster_tests path/to/example
set -euo pipefail
celer=$1
tests=$2
example=$3
if [[ $(id -u) -ne 0 ]]; then
  echo "SKIPPED: the multi-host test makes network namespaces, which needs root"
  exit 77
fi
if ! command -v ip >/dev/null || ! ip netns list >/dev/null 2>&1; then
  echo "SKIPPED: 'ip netns' is not available here (install iproute2)"
  exit 77
fi
tag=$$
# A run SIGKILLed (a ctest timeout) leaves its namespaces and bridge behind: remove those of
# runs whose process is gone, and take a subnet no interface here holds.
for t in $(ip netns list | sed -n 's/^ch\([0-9]*\).*/\1/p'); do
  if ! kill -0 "$t" 2>/dev/null; then
    for ns in ch$t ca$t cb$t; do ip netns del "$ns" 2>/dev/null || true; done
    ip link del "cbr$t" 2>/dev/null || true
  fi
done
for try in $(seq 0 49); do
  subnet=10.$((200 + (tag + try) % 50)).$(((tag + try * 7) % 250))
  grep -q " $subnet\." <<<"$(ip -4 -o addr)" || break
done
bridge=cbr$tag
names=(ch$tag ca$tag cb$tag)
work=$(mktemp -d /tmp/celer-netns.XXXXXX)
cleanup() {
  for i in 0 1 2; do
    CELER_TEMP_DIR=$work/$i "$celer" stop >/dev/null 2>&1 || true
  done
  for ns in "${names[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  ip link del "$bridge" 2>/dev/null || true
  if [[ ${status:-1} -ne 0 ]]; then
    for f in "$work"/*/session_*/logs/*.log; do
      [[ -s $f ]] || continue
      echo "---- $f (last 30 lines)"
      tail -n 30 "$f"
    done
  fi
  rm -rf "$work"
}
trap cleanup EXIT
if ! ip link add "$bridge" type bridge 2>/dev/null; then
  echo "SKIPPED: cannot create a bridge here (no CAP_NET_ADMIN?)"
  status=0
  exit 77
fi
ip link set "$bridge" up
for i in 0 1 2; do
  ns=${names[$i]}
  ip netns add "$ns"
  ip link add "v$i$tag" type veth peer name "p$i$tag"
  ip link set "p$i$tag" netns "$ns"
  ip link set "v$i$tag" master "$bridge" up
  ip netns exec "$ns" ip link set lo up
  ip netns exec "$ns" ip addr add "$subnet.$((i + 1))/24" dev "p$i$tag"
  ip netns exec "$ns" ip link set "p$i$tag" up
  mkdir -p "$work/$i"
done
head_ip=$subnet.1
echo "netns: head at $head_ip, nodes at $subnet.2 and $subnet.3 (namespaces ${names[*]})"
ip netns exec "${names[0]}" env CELER_TEMP_DIR="$work/0" CELER_NODE_TIMEOUT_MS=3000 \
  "$celer" start --head --port 6380 --num-cpus 1 --node-ip-address "$head_ip" \
  --resources '{"node0": 1}'
# As on another machine: the token copied into a file of its own, mode 0600.
install -m 600 "$work/0/session_latest/token" "$work/token"
for i in 1 2; do
  ip netns exec "${names[$i]}" env CELER_TEMP_DIR="$work/$i" \
    "$celer" start --address "$head_ip:6380" --token-file "$work/token" --num-cpus 1 \
    --resources "{\"node$i\": 1}"
done
in_head() { ip netns exec "${names[0]}" env CELER_TEMP_DIR="$work/0" CELER_ADDRESS="$head_ip:6380" "$@"; }
in_head "$celer" status
in_head "$tests" "[netns]"
in_head "$example"
status=0
echo "netns: passed"
