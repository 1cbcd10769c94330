#!/usr/bin/env bash
# Runs `celer microbenchmark` (embedded, and on a local cluster: a head with its node, worker
# processes like Ray's and Dask's, and a second node with no CPUs, which the transfer row
# reads objects from) and the same workloads on Ray (Python), on Ray's C++ API
# (bench/peers/ray_cpp) and on Dask, in one run on this machine with the same CPU count, and
# prints one table: workload, celer, Ray, Ray C++, Dask and celer's ratio to each. Installs
# what is missing (Ray, ray-cpp and Dask from PyPI into a virtual environment); a peer that
# cannot run is reported as missing, with why.
#
#   bench/compare.sh [--duration S] [--num-cpus N] [--only PATTERN] [--build DIR] [--out DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
duration=2
cpus=$(nproc)
only=""
build=build
out=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --duration) duration=$2; shift 2 ;;
    --num-cpus) cpus=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "compare.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
out=${out:-$(mktemp -d /tmp/celer-compare.XXXXXX)}
mkdir -p "$out"
rm -f "$out"/{celer,celer-cluster,ray,ray-cpp,dask}.json
venv=${CELER_BENCH_VENV:-$HOME/.cache/celer/bench-venv}

if [[ ! -x $build/runtime/celer || ! -x $build/bench/celer-microbenchmark ]]; then
  echo "compare: building celer in $build"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build "$build" || exit 1
fi

missing_ray=""
missing_dask=""
if [[ ! -x $venv/bin/python ]]; then
  python3 -m venv "$venv" 2>"$out/venv.log" || missing_ray="cannot make a Python virtual environment (see $out/venv.log)"
fi
if [[ -z $missing_ray ]]; then
  "$venv/bin/python" -c "import ray, numpy" 2>/dev/null ||
    "$venv/bin/pip" install -q "ray[default]" numpy >"$out/pip-ray.log" 2>&1 ||
    missing_ray="pip install ray failed (see $out/pip-ray.log)"
  "$venv/bin/python" -c "import distributed, numpy" 2>/dev/null ||
    "$venv/bin/pip" install -q distributed numpy >"$out/pip-dask.log" 2>&1 ||
    missing_dask="pip install distributed failed (see $out/pip-dask.log)"
else
  missing_dask=$missing_ray
fi

common=(--duration "$duration")
[[ -n $only ]] && common+=(--only "$only")
echo "compare: celer ($cpus CPUs)"
"$build/runtime/celer" microbenchmark "${common[@]}" --json "$out/celer.json" --celer-num-cpus="$cpus" ||
  { echo "compare: celer microbenchmark failed" >&2; exit 1; }
missing_cluster=""
echo "compare: celer on a local cluster (head with its node, $cpus CPUs; a second node, no CPUs)"
export CELER_TEMP_DIR="$out/cluster"
node2_dir=$out/cluster-node2
started=$("$build/runtime/celer" start --head --port 0 --num-cpus "$cpus" 2>"$out/cluster-start.log")
address=$(sed -n 's/^celer head started at \([^ ]*\).*/\1/p' <<<"$started")
if [[ -z $address ]]; then
  missing_cluster="celer start --head failed (see $out/cluster-start.log)"
else
  # The second node: a temp dir of its own, joining with the head's token as a node on
  # another machine would. No CPUs, so that tasks and placement groups stay on the head's
  # node; the microbenchmark keeps its actors there too (soft node affinity).
  CELER_TEMP_DIR=$node2_dir "$build/runtime/celer" start --address "$address" --num-cpus 0 \
    --token-file "$out/cluster/session_latest/token" >>"$out/cluster-start.log" 2>&1 ||
    echo "compare: the second node did not start (see $out/cluster-start.log): no transfer row" >&2
  "$build/runtime/celer" microbenchmark "${common[@]}" --address "$address" \
    --json "$out/celer-cluster.json" 2>"$out/cluster.log" ||
    missing_cluster="celer microbenchmark --address failed (see $out/cluster.log)"
fi
CELER_TEMP_DIR=$node2_dir "$build/runtime/celer" stop >/dev/null 2>&1
"$build/runtime/celer" stop >/dev/null 2>&1
unset CELER_TEMP_DIR
missing_ray_cpp=$missing_ray
if [[ -z $missing_ray ]]; then
  echo "compare: Ray ($cpus CPUs)"
  (cd bench/peers && "$venv/bin/python" ray_perf.py "${common[@]}" --num-cpus "$cpus" \
    --json "$out/ray.json") 2>"$out/ray.log" || missing_ray="ray_perf.py failed (see $out/ray.log)"
fi
if [[ -z $missing_ray_cpp ]]; then
  echo "compare: Ray's C++ API ($cpus CPUs; one driver per workload)"
  bench/peers/ray_cpp/run.sh "${common[@]}" --num-cpus "$cpus" --venv "$venv" --build "$build/ray-cpp" \
    --json "$out/ray-cpp.json" 2>"$out/ray-cpp.log" ||
    [[ -s $out/ray-cpp.json ]] ||
    missing_ray_cpp="bench/peers/ray_cpp/run.sh failed: $(tail -n 1 "$out/ray-cpp.log") (see $out/ray-cpp.log)"
fi
if [[ -z $missing_dask ]]; then
  echo "compare: Dask ($cpus worker processes)"
  (cd bench/peers && "$venv/bin/python" dask_perf.py "${common[@]}" --num-cpus "$cpus" \
    --json "$out/dask.json") 2>"$out/dask.log" || missing_dask="dask_perf.py failed (see $out/dask.log)"
fi
echo
python3 bench/peers/table.py "$out/celer.json" "$out/ray.json" "$out/dask.json" \
  --cluster "$out/celer-cluster.json" --missing-cluster "$missing_cluster" \
  --ray-cpp "$out/ray-cpp.json" --missing-ray-cpp "$missing_ray_cpp" \
  --missing-ray "$missing_ray" --missing-dask "$missing_dask" | tee "$out/table.txt"
echo
echo "compare: results in $out"
