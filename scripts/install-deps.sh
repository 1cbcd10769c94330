#!/usr/bin/env bash
# Installs every Debian package that building and testing celer needs.
# Idempotent and non-interactive: running it twice is safe and the second run is quick.
# Usage: scripts/install-deps.sh            (as root, or with sudo available)
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  ccache                          # optional: CMake compiles through it when found (CELER_CCACHE)
  libcaf-dev                      # CAF 0.17: the actor system under head, node and worker
  libzmq3-dev cppzmq-dev          # transport
  libmsgpack-cxx-dev libboost-dev # wire encoding (msgpack-cxx's CMake package wants Boost headers)
  librocksdb-dev                  # object spill, durable objects, head state
  libxxhash-dev                   # checksums of objects on disk and in transfer
  zlib1g-dev                      # the shipped data sets are gzipped (actors/data)
  catch2                          # tests (Catch2 v2)
  libcli11-dev                    # the celer command line
  nlohmann-json3-dev              # JSON output of CLI and benchmarks
  libsodium-dev                   # cluster tokens
  libcpp-httplib-dev libssl-dev   # the head's HTTP server (REST API, /metrics, dashboard), TLS
  prometheus curl openssl         # tests: promtool checks /metrics, a real Prometheus scrapes it,
                                  # curl asks the HTTP API, openssl makes a TLS certificate
  chromium chromium-driver python3-selenium
                                  # tests: the dashboard in headless Chromium (tests/http/dashboard_test.py)
  iproute2 procps                 # network-namespace tests, process checks
  clang libclang-rt-14-dev llvm   # libFuzzer targets (scripts/fuzz.sh): clang 14, its fuzzer
                                  # and sanitizer runtimes, llvm-symbolizer for their reports
  libtorch-dev                    # LibTorch 1.13 (CPU): models in the built-in actors (actors/)
                                  # and the apps; -DCELER_WITH_TORCH=OFF builds without it
  libyaml-cpp-dev                 # the apps' YAML configs (config/)
  dataset-fashion-mnist           # Fashion-MNIST (IDX files) for celer-tune's larger run
  fortunes-min                    # fortune files (BSD licence): the text of the character-level
                                  # transformer (actors/data/text.cpp reads /usr/share/games/fortunes)
  python3 python3-zmq python3-msgpack python3-nacl
                                  # the attacker suite (tests/security/attacker_suite.py):
                                  # raw ZeroMQ peers, msgpack messages, CURVE keys from a token
)

sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: done"
