#!/usr/bin/env bash
# What celer's public headers cost a user's translation unit to compile, and how much of it
# is msgpack (the API's value format, a public dependency: docs/api.md, "Headers"). Compiles
# each case with the flags a user's release build has (g++ -std=c++20 -O2 -c), several
# rounds, alternating the cases so that a busy machine slows all alike, and prints each
# case's median CPU time (user + system: what the compiler spent, not how long it waited).
#
#   bench/header-cost.sh [--rounds N] [--cxx COMPILER]
#
# The cases: the standard headers the API uses anyway; <celer/fwd.hpp> (naming celer's
# types); <celer/handles.hpp> and <celer/bytes.hpp> (holding refs, handles, bulk data);
# <msgpack.hpp> alone; <celer/celer.hpp> (the whole API); and a small program that uses it
# (a task, an actor, put and get of a struct of its own), where the templates are
# instantiated.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=5
cxx=${CXX:-g++}
while [[ $# -gt 0 ]]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --cxx) cxx=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "header-cost: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cases=(standard fwd handles_bytes msgpack celer program)
printf '#include <chrono>\n#include <functional>\n#include <map>\n#include <memory>\n#include <optional>\n#include <string>\n#include <vector>\n' > "$tmp/standard.cpp"
printf '#include <celer/fwd.hpp>\n' > "$tmp/fwd.cpp"
printf '#include <celer/bytes.hpp>\n#include <celer/handles.hpp>\n' > "$tmp/handles_bytes.cpp"
printf '#include <msgpack.hpp>\n' > "$tmp/msgpack.cpp"
printf '#include <celer/celer.hpp>\n' > "$tmp/celer.cpp"
cat > "$tmp/program.cpp" <<'EOF'
#include <celer/celer.hpp>
#include <string>
#include <vector>
struct sample {
  std::string label;
  std::vector<float> x;
  MSGPACK_DEFINE(label, x);
};
int add(int a, int b) { return a + b; }
float total(sample s) {
  float t = 0;
  for (float v : s.x) t += v;
  return t;
}
struct counter {
  int n = 0;
  int incr(int by) { return n += by; }
};
counter* make_counter(int start) { return new counter{start}; }
CELER_REMOTE(add, total, make_counter, &counter::incr);
int main(int argc, char** argv) {
  celer::init(argc, argv);
  auto s = celer::put(sample{"cat", {0.1f, 0.2f}});
  auto c = celer::actor(make_counter).remote(0);
  int three = celer::get(celer::task(add).remote(1, 2));
  float t = celer::get(celer::task(total).remote(s), std::chrono::seconds(5));
  int five = celer::get(c.task(&counter::incr).remote(5));
  celer::shutdown();
  return three + five + static_cast<int>(t) == 8 ? 0 : 1;
}
EOF

includes=(-Iruntime/include -Ibase/include -Igpu/include)
declare -A times
for ((r = 0; r < rounds; ++r)); do
  for c in "${cases[@]}"; do
    rm -f "$tmp/$c.o"
    /usr/bin/time -o "$tmp/time" -f '%U %S' "$cxx" -std=c++20 -O2 -c "${includes[@]}" \
      "$tmp/$c.cpp" -o "$tmp/$c.o" 2>"$tmp/err" ||
      { echo "header-cost: $c does not compile:" >&2; cat "$tmp/err" >&2; exit 1; }
    times[$c]+="$(awk '{print $1 + $2}' "$tmp/time") "
  done
done

median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR + 1) / 2)]}'; }
printf '%-16s %s\n' case "median CPU seconds ($rounds rounds, $cxx -O2 -c)"
for c in "${cases[@]}"; do
  printf '%-16s %.2f\n' "$c" "$(median "${times[$c]}")"
done
