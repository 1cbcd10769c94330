#!/usr/bin/env bash
# Builds ray_cpp_perf (the driver) and libray_cpp_workloads.so (the remote functions, which
# Ray's C++ workers load from the driver's code_search_path) with g++ against the headers and
# libray_api.so of the PyPI wheel `ray-cpp` in the bench venv, without Bazel. The wheel is
# built with the old libstdc++ string ABI, hence -D_GLIBCXX_USE_CXX11_ABI=0; its headers are
# C++17. Installs ray-cpp (the version of the venv's `ray`) when it is missing.
#
#   bench/peers/ray_cpp/build.sh [--venv DIR] [--out DIR]     (default out: build/ray-cpp)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${CELER_BENCH_VENV:-$HOME/.cache/celer/bench-venv}
out=$(cd "$here/../../.." && pwd)/build/ray-cpp
while [[ $# -gt 0 ]]; do
  case $1 in
    --venv) venv=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "build.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
py=$venv/bin/python
ray_version=$("$py" -c 'import ray; print(ray.__version__)') ||
  { echo "build.sh: no ray in $venv (bench/compare.sh installs it)" >&2; exit 1; }
cpp=$("$py" -c 'import os, ray; print(os.path.join(os.path.dirname(ray.__file__), "cpp"))')
if [[ ! -f $cpp/lib/libray_api.so || ! -f $cpp/include/ray/api.h ]]; then
  echo "build.sh: installing ray-cpp==$ray_version into $venv"
  "$venv/bin/pip" install -q "ray-cpp==$ray_version" >&2
fi
mkdir -p "$out"
flags=(-std=c++17 -D_GLIBCXX_USE_CXX11_ABI=0 -O2 -fPIC -I"$cpp/include" -Wall -Wno-unused-variable)
lib=(-L"$cpp/lib" -Wl,--no-as-needed -lray_api -Wl,--as-needed -Wl,-rpath,"$cpp/lib")
g++ "${flags[@]}" -c "$here/workloads.cpp" -o "$out/workloads.o"
g++ -shared "$out/workloads.o" -o "$out/libray_cpp_workloads.so" "${lib[@]}"
g++ "${flags[@]}" "$here/ray_cpp_perf.cpp" "$out/workloads.o" -o "$out/ray_cpp_perf" "${lib[@]}"
echo "$ray_version" >"$out/ray_version"
echo "build.sh: $out/ray_cpp_perf and $out/libray_cpp_workloads.so (ray-cpp $ray_version)"
