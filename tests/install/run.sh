#!/usr/bin/env bash
# Installs a built celer tree into a fresh prefix, then checks what a user gets from it:
# the installed binaries run without LD_LIBRARY_PATH, and a project outside the tree
# (tests/install/consumer) configures with find_package(celer), builds and runs.
#
# Usage (tests/install/CMakeLists.txt passes these):
#   run.sh --cmake CMAKE --build-dir DIR --work-dir DIR --consumer-src DIR
#          --generator GEN --make-program PROG --cxx-compiler CXX --config CONFIG
#          --bindir DIR --libdir DIR --includedir DIR   (CMAKE_INSTALL_*DIR, relative)
#          [--cxx-flags FLAGS]
set -euo pipefail

cxx_flags=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cmake) cmake="$2" ;;
    --build-dir) build_dir="$2" ;;
    --work-dir) work_dir="$2" ;;
    --consumer-src) consumer_src="$2" ;;
    --generator) generator="$2" ;;
    --make-program) make_program="$2" ;;
    --cxx-compiler) cxx_compiler="$2" ;;
    --config) config="$2" ;;
    --bindir) bindir="$2" ;;
    --libdir) libdir_rel="$2" ;;
    --includedir) includedir="$2" ;;
    --cxx-flags) cxx_flags="$2" ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift 2
done
for required in cmake build_dir work_dir consumer_src generator make_program cxx_compiler config \
                bindir libdir_rel includedir; do
  [[ -n "${!required:-}" ]] || { echo "run.sh: missing argument for $required" >&2; exit 2; }
done

prefix="$work_dir/prefix"
consumer_build="$work_dir/consumer-build"
# Start from nothing, so that a file left by an earlier run cannot make this one pass.
rm -rf "$prefix" "$consumer_build"
mkdir -p "$work_dir"
# What the installed programs see: no library path, nothing from the build tree.
unset LD_LIBRARY_PATH

step() { echo "== install test: $*"; }

step "cmake --install into $prefix"
"$cmake" --install "$build_dir" --prefix "$prefix" --config "$config"

step "check the installed layout"
libdir="$prefix/$libdir_rel"
for f in "$includedir/celer/celer.hpp" "$bindir/celer" "$bindir/celer-example-counter" \
         "$libdir_rel/libceler_runtime.so" \
         "$libdir_rel/cmake/celer/celerConfig.cmake" \
         "$libdir_rel/cmake/celer/celerConfigVersion.cmake" \
         "$libdir_rel/cmake/celer/celer-targets.cmake"; do
  [[ -e "$prefix/$f" ]] || { echo "missing from the install: $f" >&2; exit 1; }
done
# The exported interface names only public dependencies; CAF stays inside the library.
if grep -n -i 'caf' "$libdir"/cmake/celer/celer-targets*.cmake; then
  echo "a private dependency leaks into the exported targets" >&2
  exit 1
fi

step "installed binaries run without LD_LIBRARY_PATH"
"$prefix/$bindir/celer" --version
"$prefix/$bindir/celer-example-counter" --celer-num-cpus=2
# Which libceler_runtime.so a program loads, as a canonical path.
loaded_runtime() {
  local path
  path="$(ldd "$1" | awk '$1 ~ /^libceler_runtime\.so/ { print $3 }')"
  echo "$1 loads $path" >&2
  readlink -f "$path"
}
expect_installed_runtime() {
  [[ "$(loaded_runtime "$1")" == "$(readlink -f "$libdir/libceler_runtime.so")" ]] ||
    { echo "$1 does not load the installed libceler_runtime.so" >&2; exit 1; }
}
expect_installed_runtime "$prefix/$bindir/celer"

step "configure the consumer project with CMAKE_PREFIX_PATH=$prefix"
"$cmake" -S "$consumer_src" -B "$consumer_build" -G "$generator" \
  -DCMAKE_MAKE_PROGRAM="$make_program" -DCMAKE_CXX_COMPILER="$cxx_compiler" \
  -DCMAKE_BUILD_TYPE="$config" -DCMAKE_CXX_FLAGS="$cxx_flags" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
found_dir="$(sed -n 's/^celer_DIR:PATH=//p' "$consumer_build/CMakeCache.txt")"
[[ "$found_dir" == "$libdir/cmake/celer" ]] ||
  { echo "found celer in $found_dir, not in the test prefix" >&2; exit 1; }

step "build the consumer"
"$cmake" --build "$consumer_build"

step "run the consumer"
expect_installed_runtime "$consumer_build/consumer"
"$consumer_build/consumer" --celer-num-cpus=2
step "passed"
