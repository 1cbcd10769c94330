#!/usr/bin/env bash
# Checks the public headers (CAF's forbidden-includes check and Seastar's checkheaders):
#  1. no public header includes an internal (src/) header or an implementation library
#     (ZeroMQ, CAF, RocksDB, LibTorch, CUDA); msgpack only in celer/detail/codec.hpp, which
#     <celer/codec.hpp> brings: it is the documented value format of the API;
#  2. each public header compiles on its own, with only its module's include/ and those of the
#     modules it depends on (so store's headers cannot lean on the runtime's, DESIGN.md §1).
# scripts/check-boundaries.sh checks the rest of the module boundaries.
# Usage: scripts/check-headers.sh
set -euo pipefail
cd "$(dirname "$0")/.."

status=0
# Each module's include/ and, after it, those its public headers may use (base <- store, gpu
# <- runtime <- actors).
declare -A visible=(
  [base/include]="base/include"
  [store/include]="store/include base/include"
  [gpu/include]="gpu/include base/include"
  [runtime/include]="runtime/include gpu/include base/include"
  [actors/include]="actors/include runtime/include store/include gpu/include base/include"
  # The apps' shared library (apps/common): base's errors, and the libraries
  # every app uses (yaml-cpp, CLI11, nlohmann-json, from /usr/include).
  [apps/common/include]="apps/common/include base/include"
)
headers=$( (find "${!visible[@]}" -name '*.hpp' 2>/dev/null || true) | sort)

forbidden='#include [<"](zmq|caf/|rocksdb/|torch/|ATen/|cuda|nccl|nvml)|#include "[^"]*src/'
# LibTorch's headers are allowed in celer::torch's public headers alone (DESIGN.md §1:
# LibTorch only in actors/ and apps/), which compile with LibTorch's include directories.
torch_headers='^actors/include/celer/actors/torch(\.hpp|/)'
torch_includes=(-isystem /usr/include/torch/csrc/api/include)
if grep -nE "$forbidden" $(grep -vE "$torch_headers" <<<"$headers"); then
  echo "check-headers: the includes above do not belong in public headers" >&2
  status=1
fi
if grep -nE '#include [<"]msgpack' $headers | grep -v '^runtime/include/celer/detail/codec.hpp:'; then
  echo "check-headers: include msgpack only through <celer/codec.hpp>" >&2
  status=1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for h in $headers; do
  rel=${h#*/include/}
  includes=()
  for d in ${visible[${h%%/include/*}/include]}; do
    [[ -d $d ]] && includes+=("-I$d")
  done
  if [[ $h =~ $torch_headers ]]; then
    if [[ ! -f /usr/include/torch/csrc/api/include/torch/torch.h ]]; then
      echo "check-headers: skipping <$rel>: LibTorch is not installed (libtorch-dev)"
      continue
    fi
    includes+=("${torch_includes[@]}")
  fi
  printf '#include <%s>\n#include <%s>\n' "$rel" "$rel" > "$tmp/check.cpp"
  if ! g++ -std=c++20 -fsyntax-only -Wall -Wextra -Wpedantic -Werror \
       -Wno-missing-field-initializers "${includes[@]}" "$tmp/check.cpp" 2> "$tmp/err"; then
    echo "check-headers: <$rel> does not compile on its own:" >&2
    head -20 "$tmp/err" >&2
    status=1
  fi
done
[[ $status -eq 0 ]] && echo "check-headers: $(echo "$headers" | wc -l) public headers ok"
exit $status
