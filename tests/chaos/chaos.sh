#!/usr/bin/env bash
# The chaos run: a head and N node agents on this machine run tests/chaos/chaos_workload.cpp
# while this script SIGKILLs, every few seconds, a random node agent or worker process
# (never more than two down at once) and starts again each node agent it killed; and
# kills the head --head-kills times, starting it again on the same port and session.
# Then it checks: the workload's results were all right, every number it sent was
# recorded, no durable object was lost, available resources equal the total within 60 s,
# and no process of the run is left. It prints the figures: kills survived, results
# checked, time lost per kill, recovery after each head kill.
#
#   tests/chaos/chaos.sh path/to/celer path/to/celer-chaos-workload [--duration S]
#       [--kill-every S] [--head-kills N] [--nodes N] [--keep]
#
# Run as root (where `ip netns` works), one more node agent runs in a network namespace of
# its own, joined by a veth link, and the link is cut for 5 s (once per 5 minutes, at least
# once): the head declares that node dead, its actors restart elsewhere, and the node,
# told so when the link is back, leaves; it is started again.
#
# CI runs 120 s (tests/CMakeLists.txt); the long run is 1800 s with a kill every 3 s
# (README). --keep leaves the run's directory (logs, records, rounds.csv, kills.csv).
set -euo pipefail
celer=$1
workload=$2
shift 2
duration=120
kill_every=4
head_kills=2
nodes=3
keep=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --duration) duration=$2; shift 2 ;;
    --kill-every) kill_every=$2; shift 2 ;;
    --head-kills) head_kills=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    *) echo "chaos.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

CELER_TEMP_DIR=$(mktemp -d /tmp/celer-chaos.XXXXXX)
export CELER_TEMP_DIR
# Dead nodes are found in 2 s; drivers and nodes wait a minute for a head that is away.
# The chaos driver's workers share its folders (see with_cluster.sh): confinement off.
export CELER_JOB_ISOLATION=${CELER_JOB_ISOLATION:-off}
export CELER_NODE_TIMEOUT_MS=2000 CELER_HEAD_TIMEOUT_MS=60000 CELER_NODE_HEAD_TIMEOUT_MS=60000
unset CELER_ADDRESS
work=$CELER_TEMP_DIR/run
mkdir -p "$work"
session=$CELER_TEMP_DIR/session_latest
status=1
workload_pid=
now_ms() { date +%s%3N; }
log() { echo "[chaos $(( ($(now_ms) - t0) / 1000 ))s] $*"; }
leftovers() {
  # The run's daemons have its CELER_TEMP_DIR in their environment, its worker processes
  # its head's endpoint (a worker gets a fresh environment).
  local p exe
  for p in /proc/[0-9]*; do
    exe=$(readlink "$p/exe" 2>/dev/null) || continue
    [[ $exe == "$(readlink -f "$celer")" || $exe == "$(readlink -f "$workload")" ]] || continue
    if grep -qsz -e "^CELER_TEMP_DIR=$CELER_TEMP_DIR\$" -e "^CELER_WORKER_HEAD_ENDPOINT=tcp://[0-9.]*:${port:-none}\$" "$p/environ"; then
      echo "${p#/proc/}"
    fi
  done
}
netns=
cleanup() {
  [[ -n $workload_pid ]] && kill "$workload_pid" 2>/dev/null || true
  "$celer" stop >/dev/null 2>&1 || true
  for pid in $(leftovers); do kill -9 "$pid" 2>/dev/null || true; done
  if [[ -n $netns ]]; then
    ip netns del "$netns" 2>/dev/null || true
    ip link del "$host_if" 2>/dev/null || true
  fi
  if [[ $status -ne 0 ]]; then
    for f in "$session"/logs/head*.log "$session"/logs/node-*.log; do
      [[ -s $f ]] || continue
      echo "---- $(basename "$f") (last 15 lines)"
      tail -n 15 "$f"
    done
  fi
  if [[ $keep -eq 1 ]]; then echo "chaos: the run's files are in $CELER_TEMP_DIR"; else rm -rf "$CELER_TEMP_DIR"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() { echo "FAILED: $*"; exit 1; }

# The namespace for the partition, when this runs as root.
head_ip=()
if [[ $(id -u) -eq 0 ]] && command -v ip >/dev/null && ip netns list >/dev/null 2>&1; then
  tag=$$
  # A run SIGKILLed (a ctest timeout) leaves its namespace and veth behind: remove those of
  # runs whose process is gone, and take a subnet no interface here holds (a stale one with
  # the same /24 would take the replies to the namespace).
  for ns in $(ip netns list | sed -n 's/^cc\([0-9]*\).*/\1/p'); do
    if ! kill -0 "$ns" 2>/dev/null; then ip netns del "cc$ns" 2>/dev/null || true; ip link del "vc$ns" 2>/dev/null || true; fi
  done
  for try in $(seq 0 49); do
    subnet=10.$((150 + (tag + try) % 50)).$(((tag + try * 7) % 250))
    grep -q " $subnet\." <<<"$(ip -4 -o addr)" || break
  done
  host_if=vc$tag
  if ip netns add "cc$tag" 2>/dev/null; then
    netns=cc$tag
    ip link add "$host_if" type veth peer name "pc$tag"
    ip link set "pc$tag" netns "$netns"
    ip addr add "$subnet.1/24" dev "$host_if"
    ip link set "$host_if" up
    ip netns exec "$netns" ip link set lo up
    ip netns exec "$netns" ip addr add "$subnet.2/24" dev "pc$tag"
    ip netns exec "$netns" ip link set "pc$tag" up
    head_ip=(--node-ip-address "$subnet.1")  # reachable from the namespace
  fi
fi
start_head() { "$celer" start --head --port "$@" --num-cpus 1 --labels role=head "${head_ip[@]}"; }
start_netns_node() { ip netns exec "$netns" "$celer" start --address "$addr" --num-cpus 2 >/dev/null; }

t0=$(now_ms)
out=$(start_head 0)
addr=$(sed -n 's/^celer head started at \([^ ]*\).*/\1/p' <<<"$out")
port=${addr##*:}
for _ in $(seq "$nodes"); do "$celer" start --address "$addr" --num-cpus 2 >/dev/null; done
partitions=0 partition_cuts=0 next_cut=
if [[ -n $netns ]]; then
  start_netns_node
  partitions=$(( duration / 300 > 1 ? duration / 300 : 1 ))
  next_cut=$((t0 + duration * 1000 / (partitions + 1) + 1500))
fi
log "head at $addr and $nodes node agent(s)${netns:+ and one in network namespace $netns}; workload for ${duration}s, a kill every ${kill_every}s, $head_kills head kill(s), $partitions partition(s)"

pid_of() { local f; for f in "$session"/pids/"$1"-*.pid; do [[ -e $f ]] && cat "$f"; done; }
alive() { kill -0 "$1" 2>/dev/null; }
# The live node agents' pids. A pid file stays behind when its agent is SIGKILLed or exits
# on its own (declared dead), and its pid may be reused by another process: once it was the
# restarted head's, which the killer then took for a node agent. A pid counts only while
# its process is a `celer start` node agent; stale files are removed.
node_pids() {
  local f pid cmd
  for f in "$session"/pids/node-*.pid; do
    [[ -e $f ]] || continue
    pid=$(cat "$f")
    cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)
    if [[ $cmd == *" start "* && $cmd != *"--head"* ]]; then echo "$pid"; else rm -f "$f"; fi
  done
}

CELER_ADDRESS=$addr "$workload" --duration "$duration" --dir "$work" >"$work/workload.out" 2>&1 &
workload_pid=$!
echo "ms,kind,pid" >"$work/kills.csv"
node_kills=0 worker_kills=0 head_kill_count=0 replaced=0
down=()           # node agents killed and not started again: "ms_killed"
head_restarts=()  # "killed_ms restarted_ms"
next_head_kill=$((t0 + duration * 1000 / (head_kills + 1)))
while alive "$workload_pid"; do
  pause_until=$(( $(now_ms) + $(awk -v k="$kill_every" -v r=$RANDOM 'BEGIN { printf "%d", k * 1000 * (0.5 + r / 32768) }') ))
  while alive "$workload_pid" && (( $(now_ms) < pause_until )); do sleep 0.2; done
  alive "$workload_pid" || break
  now=$(now_ms)
  # Start again the node agents killed a while ago.
  still=()
  for killed in "${down[@]}"; do
    if (( now - killed > 1500 )); then
      "$celer" start --address "$addr" --num-cpus 2 >/dev/null 2>&1 || log "a node agent did not start again"
    else
      still+=("$killed")
    fi
  done
  down=("${still[@]}")
  # A node agent that exited on its own (the head declared it dead: late heartbeats on a
  # loaded machine) is replaced, as a supervisor would; the one in the namespace is started
  # again after its partition.
  in_ns=" $( [[ -n $netns ]] && ip netns pids "$netns" 2>/dev/null | tr '\n' ' ') "
  live=0
  for p in $(node_pids); do [[ $in_ns == *" $p "* ]] || live=$((live + 1)); done
  for (( i = live + ${#down[@]}; i < nodes; ++i )); do
    if "$celer" start --address "$addr" --num-cpus 2 >/dev/null 2>&1; then
      replaced=$((replaced + 1))
    else
      log "a node agent did not start in place of one that exited"
    fi
  done
  if (( head_kill_count < head_kills && now >= next_head_kill )); then
    head=$(pid_of head)
    [[ -n $head ]] || fail "no head pid file in $session/pids"
    kill -9 "$head"
    while alive "$head"; do sleep 0.05; done
    killed=$(now_ms)
    echo "$killed,head,$head" >>"$work/kills.csv"
    rm -f "$session"/pids/head-"$head".pid
    start_head "$port" --resume >/dev/null || fail "the head did not start again on port $port"
    head_restarts+=("$killed $(now_ms)")
    head_kill_count=$((head_kill_count + 1))
    next_head_kill=$((t0 + duration * 1000 * (head_kill_count + 1) / (head_kills + 1)))
    log "killed the head (pid $head) and started it again"
    continue
  fi
  if [[ -n $next_cut ]] && (( partition_cuts < partitions && now >= next_cut )); then
    ns_pids=$(ip netns pids "$netns" 2>/dev/null | tr '\n' ' ')
    ip link set "$host_if" down
    echo "$(now_ms),partition,$ns_pids" >>"$work/kills.csv"
    log "cut the link of network namespace $netns for 5 s"
    sleep 5
    ip link set "$host_if" up
    partition_cuts=$((partition_cuts + 1))
    next_cut=$((t0 + duration * 1000 * (partition_cuts + 1) / (partitions + 1) + 1500))
    # Declared dead meanwhile, its node agent leaves when it hears so; one starts again.
    for _ in $(seq 100); do [[ -z $(ip netns pids "$netns" 2>/dev/null) ]] && break; sleep 0.1; done
    [[ -z $(ip netns pids "$netns" 2>/dev/null) ]] || log "the node agent cut off is still running 10 s after the link came back"
    start_netns_node || log "the node agent in $netns did not start again"
    continue
  fi
  # A node agent (when fewer than two are down), else a worker process.
  victim= kind=
  if (( ${#down[@]} < 2 && RANDOM % 3 == 0 )); then
    # Not the one in the namespace: the partitions stop and start it (started again
    # outside, each of its kills would leave one agent more).
    mapfile -t agents < <(for p in $(node_pids); do [[ $in_ns == *" $p "* ]] || echo "$p"; done)
    if (( ${#agents[@]} > 1 )); then
      victim=${agents[RANDOM % ${#agents[@]}]} kind=node
    fi
  fi
  if [[ -z $victim ]]; then
    mapfile -t workers < <(for p in $(pid_of head) $(node_pids); do pgrep -P "$p" || true; done)
    (( ${#workers[@]} > 0 )) || continue
    victim=${workers[RANDOM % ${#workers[@]}]} kind=worker
  fi
  kill -9 "$victim" 2>/dev/null || continue
  echo "$(now_ms),$kind,$victim" >>"$work/kills.csv"
  if [[ $kind == node ]]; then
    node_kills=$((node_kills + 1))
    rm -f "$session"/pids/node-*-"$victim".pid
    down+=("$(now_ms)")
  else
    worker_kills=$((worker_kills + 1))
  fi
done
wait "$workload_pid" && workload_status=0 || workload_status=$?
workload_pid=
if [[ $workload_status -ne 0 ]]; then
  # Why first (CI shows the start of a failed test's output), then the workload's last words.
  grep -E "FAILED|terminate|what\(\)" "$work/workload.out" | head -5 || true
  echo "--- the workload's last 60 lines ($(wc -l <"$work/workload.out") in all):"
  tail -n 60 "$work/workload.out"
  fail "the workload failed (status $workload_status)"
fi
# Its summary (the runtime's warnings about the kills it survived are in workload.out).
grep -v "^\[celer " "$work/workload.out" || true
for _ in "${down[@]}"; do "$celer" start --address "$addr" --num-cpus 2 >/dev/null; done

CELER_ADDRESS=$addr "$workload" --check-resources 60 || fail "resources were not all given back"
"$celer" stop >/dev/null
for _ in $(seq 50); do
  [[ -z $(leftovers) ]] && break
  sleep 0.1
done
left=$(leftovers)
[[ -z $left ]] || fail "processes left behind: $(for p in $left; do echo -n "$(tr '\0' ' ' </proc/"$p"/cmdline 2>/dev/null)($p) "; done)"

# The figures.
kills=$((node_kills + worker_kills + head_kill_count))
summary=$(cat "$work/summary.json")
# Time lost: each round's latency above the median, summed, per kill.
lost=$(awk -F, 'NR > 1 { print $3 }' "$work/rounds.csv" | sort -n | awk '
  { l[NR] = $1; sum += $1 } END { m = l[int((NR + 1) / 2)]; for (i = 1; i <= NR; ++i) if (l[i] > m) over += l[i] - m;
    printf "%d %d %d", m, over, NR }')
read -r median over rounds <<<"$lost"
echo "chaos: passed"
echo "  kills survived: $kills ($worker_kills worker processes, $node_kills node agents, $head_kill_count heads), $partition_cuts network partition(s) of 5 s; $replaced node agent(s) that exited on their own replaced"
echo "  workload: $summary"
echo "  round latency median ${median} ms; time lost to kills ${over} ms in all, $(( kills > 0 ? over / kills : 0 )) ms per kill"
# Recovery after a head kill: from its restart to the end of the first round after it.
start_ms=$(sed -n 's/.*"start_ms": \([0-9]*\).*/\1/p' "$work/summary.json")
for r in "${head_restarts[@]}"; do
  read -r killed restarted <<<"$r"
  first=$(awk -F, -v s="$start_ms" -v t="$restarted" 'NR > 1 && $2 + s > t { printf "%.0f\n", $2 + s; exit }' "$work/rounds.csv")
  echo "  head kill: down $((restarted - killed)) ms; first round done $(( ${first:-restarted} - restarted )) ms after its restart"
done
status=0
