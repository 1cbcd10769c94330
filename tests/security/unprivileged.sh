#!/usr/bin/env bash
# Runs the attacker suite (its arguments after RUNUSER PYTHON) as the unprivileged user
# `nobody`, from root: CI runs as root. Exits 77 (skipped) when not root.
set -euo pipefail
runuser=$1 python=$2
shift 2
if [[ $(id -u) -ne 0 ]]; then
  echo "skipped: runs the suite as nobody through runuser, which needs root"
  exit 77
fi
# nobody has no home: the cluster's session directories go under /tmp (the suite's own).
exec "$runuser" -u nobody -- env HOME=/tmp PATH=/usr/bin:/bin "$python" "$@"
