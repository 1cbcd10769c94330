#!/usr/bin/env bash
# Ray's microbenchmark workloads in Ray's C++ API (ray_cpp_perf.cpp) on a Ray cluster of its
# own: `ray start --head --block --node-ip-address=<this host's IP> --num-cpus N` in a private
# temp dir with a private auth token, then each workload in a driver of its own that connects
# to that IP (a C++ driver given 127.0.0.1 cannot reach the node, which listens on its IP),
# then the head is stopped (SIGTERM to the `ray start --block` this script started, which
# stops its processes; never `ray stop`, which would stop every Ray cluster of this user).
# Builds the driver first (build.sh) when it is missing. Writes the JSON of
# bench/peers/common.py, which bench/peers/table.py reads.
#
#   bench/peers/ray_cpp/run.sh [--num-cpus N] [--duration S] [--only PATTERN] [--json FILE]
#                              [--smoke] [--venv DIR] [--build DIR] [--timeout S]
#
# --timeout S: a workload whose driver has not finished after S seconds (default 120 + 10 x
# the duration) is stopped and reported as not finished.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${CELER_BENCH_VENV:-$HOME/.cache/celer/bench-venv}
build=$(cd "$here/../../.." && pwd)/build/ray-cpp
cpus=$(nproc)
duration=2
only=""
json=""
smoke=()
timeout_s=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --num-cpus) cpus=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --json) json=$2; shift 2 ;;
    --smoke) smoke=(--smoke); shift ;;
    --venv) venv=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
timeout_s=${timeout_s:-$(python3 -c "print(int(120 + 10 * $duration))")}
mkdir -p "$build" && build=$(cd "$build" && pwd)  # absolute: the workers load the library by it
if [[ ! -x $build/ray_cpp_perf || ! -f $build/libray_cpp_workloads.so ||
      -n $(find "$here" -name '*.?pp' -newer "$build/ray_cpp_perf") ]]; then
  "$here/build.sh" --venv "$venv" --out "$build" >&2 || exit 1
fi
version=$(cat "$build/ray_version")
ip=$(hostname -I 2>/dev/null | awk '{print $1}')
[[ -n $ip ]] || ip=$("$venv/bin/python" -c 'import ray._private.services as s; print(s.get_node_ip_address())')
[[ -n $ip ]] || { echo "run.sh: cannot tell this host's IP" >&2; exit 1; }

tmp=$(mktemp -d /tmp/celer-raycpp.XXXXXX)  # short: Ray's socket paths must fit in 107 bytes
head_pid=""
cleanup() {
  if [[ -n $head_pid ]] && kill -0 "$head_pid" 2>/dev/null; then
    kill -TERM "$head_pid" 2>/dev/null
    for _ in $(seq 30); do kill -0 "$head_pid" 2>/dev/null || break; sleep 1; done
    kill -0 "$head_pid" 2>/dev/null && echo "run.sh: ray start (pid $head_pid) still running after SIGTERM" >&2
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

list=$("$build/ray_cpp_perf" --list --only "$only") || exit 1
address=""
if grep -q $'\tmeasured$' <<<"$list"; then
  # A token of this cluster's own (Ray 2.60 authenticates every connection; its default token
  # in ~/.ray is shared with every other cluster of this user).
  (umask 077 && "$venv/bin/python" -c 'import secrets; print(secrets.token_hex(32))' >"$tmp/token")
  export RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=$tmp/token
  export RAY_BACKEND_LOG_LEVEL=${RAY_BACKEND_LOG_LEVEL:-warning}
  "$venv/bin/ray" start --head --block --node-ip-address="$ip" --port=0 --num-cpus="$cpus" \
    --include-dashboard=false --disable-usage-stats --temp-dir="$tmp/ray" >"$tmp/head.log" 2>&1 &
  head_pid=$!
  for _ in $(seq 120); do
    [[ -s $tmp/ray/ray_current_cluster ]] && break
    kill -0 "$head_pid" 2>/dev/null || break
    sleep 0.5
  done
  address=$(cat "$tmp/ray/ray_current_cluster" 2>/dev/null)
  if [[ -z $address ]]; then
    echo "run.sh: ray start --head did not come up; its output:" >&2
    tail -n 30 "$tmp/head.log" >&2
    exit 1
  fi
  echo "run.sh: Ray $version head at $address ($cpus CPUs); one driver per workload"
fi

# Each workload's JSON, or why it has none, one a line ("json<TAB>FILE" or "skip<TAB>NAME<TAB>WHY").
rows=$tmp/rows
: >"$rows"
status=0
i=0
printf '%-48s %28s  %s\n' workload "mean +- std" unit
while IFS=$'\t' read -r name kind; do
  [[ -n $name ]] || continue
  i=$((i + 1))
  part=$tmp/part-$i.json
  timeout -k 10 "$timeout_s" "$build/ray_cpp_perf" --address "$address" \
    --code-search-path "$build/libray_cpp_workloads.so" --workload "$name" --duration "$duration" \
    --system "ray C++ $version" --json "$part" "${smoke[@]}" 2>"$tmp/driver-$i.log" |
    sed -n '2,$p'
  rc=${PIPESTATUS[0]}
  if [[ $rc -eq 124 || $rc -eq 137 ]]; then
    printf 'skip\t%s\tnot finished within %ss (its driver was stopped)\n' "$name" "$timeout_s" >>"$rows"
    echo "$name: not finished within ${timeout_s}s (stopped)" >&2
    status=1
  elif [[ $rc -ne 0 || ! -s $part ]]; then
    why=$(grep -v '^\[' "$tmp/driver-$i.log" | tail -n 1)
    printf 'skip\t%s\tthe driver failed (exit %s): %s\n' "$name" "$rc" "${why:0:200}" >>"$rows"
    echo "$name: the driver failed (exit $rc); its last lines:" >&2
    tail -n 5 "$tmp/driver-$i.log" >&2
    status=1
  else
    printf 'json\t%s\n' "$part" >>"$rows"
  fi
done <<<"$list"

if [[ -n $json ]]; then
  python3 - "$json" "ray C++ $version" "$duration" "$rows" <<'EOF'
import json, sys
out, system, duration, rows = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
results = []
with open(rows) as f:
    for line in f:
        kind, *rest = line.rstrip("\n").split("\t")
        if kind == "json":
            with open(rest[0]) as part:
                results.extend(json.load(part)["results"])
        else:
            results.append({"name": rest[0], "skipped": rest[1]})
with open(out, "w") as f:
    json.dump({"system": system, "duration_s": duration, "results": results}, f, indent=2)
EOF
fi
exit $status
