#!/usr/bin/env bash
# Checks the module boundaries of DESIGN.md §1: a module uses another only through its
# include/, and no include path reaches into another module's src/. The modules are
# base (celer::base), runtime, store, gpu and actors; dependencies run one way
# (base <- store, gpu <- runtime <- actors <- apps), which the link graph already enforces.
#
#  1. No CMake file names another module's src/ (an include directory, a source, anything
#     outside a comment), and none climbs into a src/ with "../".
#  2. No #include names a path into another module's src/, and none climbs with "../".
#  3. No script hands a compiler -I<module>/src for a module it does not belong to.
#
# A file belongs to the module whose folder holds it; tests/unit/<module>/ belongs to
# <module> (a module's own tests may use its internals). The few other exceptions are listed
# in `allowed` below, each with its reason. scripts/check-headers.sh checks the public
# headers themselves (no src/ or third-party implementation headers; each compiles alone).
# Usage: scripts/check-boundaries.sh
set -euo pipefail
cd "$(dirname "$0")/.."

modules='base|runtime|store|gpu|actors'

# "file-or-folder-prefix module" pairs: these may reach into that module's src/.
allowed=(
  # The fuzz build compiles the runtime's and the store's sources straight into its targets.
  "scripts/fuzz.sh runtime"
  "scripts/fuzz.sh store"
  # celer-bench-scheduler drives the scheduler's policy code (runtime/src/scheduler) on
  # simulated nodes, as the runtime's own tests do; the scheduler has no public interface.
  # celer-bench-sim-cluster's simulated node agents speak the cluster protocol with the
  # runtime's own messages, wire encoding, admission and credentials (runtime/src/protocol,
  # transport) against a real head: node agents have no public interface either.
  "bench/CMakeLists.txt runtime"
)

# The module a file belongs to (empty for files of no module: apps/, bench/, scripts/ ...).
owner() {
  local f=$1
  if [[ $f =~ ^tests/unit/([a-z_]+)/ ]]; then
    case ${BASH_REMATCH[1]} in
      base) echo base ;;
      *) echo "${BASH_REMATCH[1]}" ;;
    esac
    return
  fi
  if [[ $f =~ ^($modules)/ ]]; then
    echo "${BASH_REMATCH[1]}"
  fi
}

is_allowed() {  # is_allowed <file> <module whose src/ it names>
  local f=$1 m=$2 entry
  [[ $(owner "$f") == "$m" ]] && return 0
  for entry in "${allowed[@]}"; do
    [[ $f == "${entry% *}"* && $m == "${entry#* }" ]] && return 0
  done
  return 1
}

# The modules whose src/ a text names, one a line: "${PROJECT_SOURCE_DIR}/store/src" names
# store, "-Ibase/src" base.
src_modules_named() {
  grep -oE "(^|[^A-Za-z0-9_])($modules)/src([^A-Za-z0-9_]|\$)" | sed -E 's@^[^a-z]*@@; s@/src.*$@@' || true
}
climbs_into_src='\.\./([^[:space:]]*/)?src([^A-Za-z0-9_]|$)'

status=0
violation() {  # violation <file:line> <what>
  echo "$1: $2" >&2
  status=1
}

# Tracked and untracked-but-not-ignored files: build trees and fetched dependencies are not
# the project's code.
files=$(git ls-files --cached --others --exclude-standard)

# 1. CMake files (comments stripped; "../" into a src/ is refused outright).
for f in $(grep -E '(^|/)CMakeLists\.txt$|\.cmake(\.in)?$' <<< "$files"); do
  [[ -f $f ]] || continue
  n=0
  while IFS= read -r line; do
    n=$((n + 1))
    code=${line%%#*}
    if [[ $code =~ $climbs_into_src ]]; then
      violation "$f:$n" "climbs into a src/ folder with '../': $line"
    fi
    for m in $(src_modules_named <<< "$code"); do
      is_allowed "$f" "$m" || violation "$f:$n" "reaches into $m/src: $line"
    done
  done < "$f"
done

# 2. Includes in C++ sources and headers.
for f in $(grep -E '\.(cpp|hpp|h|cu|def|cc)$' <<< "$files"); do
  [[ -f $f ]] || continue
  while IFS=: read -r n line; do
    path=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]([^">]*)[">].*/\1/' <<< "$line")
    if [[ $path == *../* ]]; then
      violation "$f:$n" "includes with '../' (include through the module's include/ instead): $line"
    fi
    if [[ $path =~ (^|/)($modules)/src/ ]]; then
      m=${BASH_REMATCH[2]}
      is_allowed "$f" "$m" || violation "$f:$n" "includes from $m/src: $line"
    fi
  done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]' "$f" || true)
done

# 3. Compiler flags in scripts: -I<module>/src (also -I path/to/<module>/src).
for f in $(grep -E '\.sh$|^\.ci/' <<< "$files"); do
  [[ -f $f && $f != scripts/check-boundaries.sh ]] || continue
  while IFS=: read -r n line; do
    code=${line%%#*}
    for m in $(grep -oE -- "-I[[:space:]]*[^[:space:]]*" <<< "$code" |
               sed -E 's/^-I[[:space:]]*//' | src_modules_named); do
      is_allowed "$f" "$m" || violation "$f:$n" "puts $m/src on an include path: $line"
    done
  done < <(grep -nE -- "-I" "$f" || true)
done

if [[ $status -eq 0 ]]; then
  echo "check-boundaries: no include path or #include reaches into another module's src/"
else
  echo "check-boundaries: the lines above cross a module boundary (DESIGN.md §1)" >&2
fi
exit $status
