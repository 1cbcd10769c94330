# Shared by the cluster test scripts (source it): how they fail, and what a failed run prints.
#
#   source "$(dirname "$0")/lib.sh"
#   fail "the node never joined"                     # prints FAILED: ..., exits 1
#   tail_logs "$work"/*/session_*/logs/*.log          # in a cleanup trap, when status != 0

# Prints "FAILED: <message>" and exits 1.
fail() { echo "FAILED: $*"; exit 1; }

# The last 20 lines of each non-empty file named (globs that matched nothing are skipped).
tail_logs() {
  local f
  for f in "$@"; do
    [[ -s $f ]] || continue
    echo "---- $f (last 20 lines)"
    tail -n 20 "$f"
  done
}

# Like `grep -q`, but reads all of its input: under `set -o pipefail`, `producer | grep -q`
# fails whenever grep quits at the first match while the producer still writes (curl exits
# 23, a celer command dies of SIGPIPE), which a busy machine makes likely.
#   curl -sf "$url/dashboard.js" | contains "fetch(path" || fail "..."
contains() { grep "$@" > /dev/null; }
