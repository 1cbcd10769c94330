#!/usr/bin/env bash
# The head's HTTP server on a real head (docs/dashboard.md): every method and path needs a
# credential (401 without, 403 with a wrong one, whatever the Origin or User-Agent); with
# the token, /api/version, /api/nodes and /metrics answer; promtool accepts /metrics; a real
# Prometheus scrapes it with the token and answers a query for a celer metric; the dashboard
# page, its login form and session cookie; the default port falls back to a free one when
# taken; --dashboard-port -1 serves no HTTP.
#
#   tests/cluster/http_api_test.sh path/to/celer
set -euo pipefail
source "$(dirname "$0")/lib.sh"
celer=$1
work=$(mktemp -d /tmp/celer-http-test.XXXXXX)
dirs=("$work"/{a,b,c})
prom_pid=
status=1
cleanup() {
  [[ -n $prom_pid ]] && kill "$prom_pid" 2>/dev/null || true
  for d in "${dirs[@]}"; do CELER_TEMP_DIR=$d "$celer" stop >/dev/null 2>&1 || true; done
  [[ $status -eq 0 ]] || tail_logs "$work"/*/session_*/logs/*.log "$work"/prometheus.log
  rm -rf "$work"
}
trap cleanup EXIT
unset CELER_TOKEN CELER_ADDRESS
code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }

mkdir -p "${dirs[@]}"
out=$(CELER_TEMP_DIR=$work/a "$celer" start --head --port 0 --num-cpus 1 --dashboard-port 0)
grep -q "REST API and metrics: http://127.0.0.1:" <<<"$out" || fail "no URL in: $out"
url=$(cat "$work"/a/session_latest/http_url)
token=$(cat "$work"/a/session_latest/token)
auth=(-H "Authorization: Bearer $token")

# Strangers: 401 on every method and path, known or not; a wrong credential: 403.
# (A POST or PUT carries a body, if an empty one: without a Content-Length the request is
# malformed and refused as 400 before anything reads it.)
for path in /api/version /api/nodes /metrics /api/jobs/ /api/jobs/x /nowhere /; do
  for method in GET DELETE; do
    [[ $(code -X "$method" "$url$path") == 401 ]] || fail "$method $path without a credential was not 401"
  done
  for method in POST PUT; do
    [[ $(code -X "$method" --data '{"entrypoint": "rm -rf /"}' "$url$path") == 401 ]] ||
      fail "$method $path without a credential was not 401"
  done
done
[[ $(code -H "Origin: $url" -A "Mozilla/5.0" "$url/api/nodes") == 401 ]] || fail "an Origin or User-Agent let a request in"
[[ $(code -H "Authorization: Bearer $(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" "$url/api/nodes") == 403 ]] ||
  fail "a wrong token was not 403"
[[ $(code -H "Authorization: Basic $(printf 'celer:%s' "$token" | base64 -w0)" "$url/api/nodes") == 401 ]] ||
  fail "Basic authentication was not refused"

# The admin.
version=$(curl -sf "${auth[@]}" "$url/api/version") || fail "GET /api/version"
grep -q '"protocol_version":23' <<<"$version" || fail "version: $version"
nodes=$(curl -sf "${auth[@]}" "$url/api/nodes") || fail "GET /api/nodes"
python3 - "$nodes" <<'PY' || fail "nodes: $nodes"
import json, sys
nodes = json.loads(sys.argv[1])["nodes"]
assert len(nodes) == 1 and nodes[0]["state"] == "ALIVE" and nodes[0]["total"]["CPU"] == 1.0, nodes
PY
[[ $(code "${auth[@]}" -X DELETE "$url/api/nodes") == 405 ]] || fail "DELETE /api/nodes was not 405"
curl -sf "${auth[@]}" -D "$work/headers" "$url/metrics" -o "$work/metrics.txt" || fail "GET /metrics"
grep -qi '^content-type: text/plain; version=0.0.4' "$work/headers" || fail "metrics content type: $(cat "$work/headers")"
grep -q '^celer_nodes{state="alive"} 1$' "$work/metrics.txt" || fail "celer_nodes in: $(head -5 "$work/metrics.txt")"
grep -q '^celer_http_responses_total{code="401"} ' "$work/metrics.txt" || fail "no 401s counted"
promtool check metrics < "$work/metrics.txt" || fail "promtool check metrics"

# The state lists: actors and placement groups (from the head's snapshot, refreshed each
# heartbeat), object stores and task queues (from the nodes' heartbeats).
for _ in $(seq 50); do [[ $(code "${auth[@]}" "$url/api/actors") == 200 ]] && break; sleep 0.1; done
curl -sf "${auth[@]}" "$url/api/actors" | python3 -c '
import json, sys
a = json.load(sys.stdin)
assert a["total"] == 0 and a["actors"] == [] and a["truncated"] is False, a' || fail "GET /api/actors"
curl -sf "${auth[@]}" "$url/api/placement_groups" | contains '"placement_groups":\[\]' || fail "GET /api/placement_groups"
curl -sf "${auth[@]}" "$url/api/objects" | python3 -c '
import json, sys
o = json.load(sys.stdin)
assert len(o["nodes"]) == 1 and o["summary"]["capacity_bytes"] > 0, o' || fail "GET /api/objects"
curl -sf "${auth[@]}" "$url/api/tasks" | python3 -c '
import json, sys
t = json.load(sys.stdin)
assert t["summary"]["QUEUED_ON_NODES"] == 0 and t["summary"]["SUBMITTED"] == 0 and t["waiting"] == [], t' || fail "GET /api/tasks"
for path in /api/actors /api/placement_groups /api/objects /api/tasks /api/jobs/; do
  [[ $(code "$url$path") == 401 ]] || fail "GET $path without a credential was not 401"
done
CELER_TEMP_DIR=$work/a "$celer" list actors | contains '^0 actor(s)' || fail "celer list actors"
CELER_TEMP_DIR=$work/a "$celer" list nodes | contains 'ALIVE' || fail "celer list nodes"
CELER_TEMP_DIR=$work/a "$celer" list objects | contains 'object stores:' || fail "celer list objects"
CELER_TEMP_DIR=$work/a "$celer" list tasks | contains 'queued on nodes: 0' || fail "celer list tasks"
CELER_TEMP_DIR=$work/a "$celer" list actors | contains 'NAMESPACE' || fail "celer list actors has no NAMESPACE column"
# Killing an actor: one the head does not know is 404, by the API and by the CLI.
[[ $(code "${auth[@]}" -X POST "$url/api/actors/0123456789abcdef0123456789abcdef/kill") == 404 ]] \
  || fail "POST /api/actors/<unknown>/kill was not 404"
[[ $(code -X POST "$url/api/actors/0123456789abcdef0123456789abcdef/kill") == 401 ]] \
  || fail "POST /api/actors/<id>/kill without a credential was not 401"
if out=$(CELER_TEMP_DIR=$work/a "$celer" actor kill no-such-actor 2>&1); then fail "celer actor kill of nothing succeeded: $out"; fi
contains "no live actor has the id or name 'no-such-actor'" <<<"$out" || fail "celer actor kill of nothing said: $out"

# The dashboard: the page and its script with a credential; a browser without one gets the
# login form (with the 401); logging in sets a session cookie that then opens the API.
page=$(curl -sf "${auth[@]}" "$url/") || fail "GET /"
grep -q '<script src="/dashboard.js"></script>' <<<"$page" || fail "the page: $page"
curl -sf "${auth[@]}" "$url/dashboard.js" | contains "fetch(path" || fail "GET /dashboard.js"
[[ $(code -H 'Accept: text/html' "$url/") == 401 ]] || fail "a browser without a session was not 401"
curl -s -H 'Accept: text/html' "$url/" | contains 'action="/api/login"' || fail "no login form for a browser"
[[ $(code -c "$work/jar" --data-urlencode "token=$token" "$url/api/login") == 303 ]] || fail "login"
grep -q 'celer_session' "$work/jar" || fail "no session cookie: $(cat "$work/jar")"
grep -qF "$token" "$work/jar" && fail "the token itself went into the cookie"
[[ $(code -b "$work/jar" "$url/api/nodes") == 200 ]] || fail "the session cookie did not open /api/nodes"
# A state change with the cookie needs the page's CSRF token (docs/dashboard.md).
[[ $(code -b "$work/jar" -X POST --data '' "$url/api/logout") == 403 ]] || fail "logout without the CSRF token"
csrf=$(curl -s -b "$work/jar" "$url/" | sed -n 's/.*name="csrf" value="\([0-9a-f]*\)".*/\1/p')
[[ $(code -b "$work/jar" -X POST --data "csrf=$csrf" "$url/api/logout") == 204 ]] || fail "logout"
[[ $(code -b "$work/jar" "$url/api/nodes") == 401 ]] || fail "the session outlived its logout"

# A real Prometheus scrapes the head with the token and answers a query.
prom_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
printf '%s' "$token" > "$work/token"
cat > "$work/prometheus.yml" <<YML
global: {scrape_interval: 1s}
scrape_configs:
  - job_name: celer
    authorization: {credentials_file: $work/token}
    static_configs: [{targets: ["${url#http://}"]}]
YML
promtool check config "$work/prometheus.yml" > /dev/null || fail "promtool check config"
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" > "$work/prometheus.log" 2>&1 &
prom_pid=$!
value=
for _ in $(seq 1 60); do
  value=$(curl -s "http://127.0.0.1:$prom_port/api/v1/query?query=celer_nodes%7Bstate%3D%22alive%22%7D" |
          python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")' \
          2>/dev/null || true)
  [[ $value == 1 ]] && break
  sleep 0.5
done
[[ $value == 1 ]] || fail "Prometheus did not get celer_nodes{state=\"alive\"} 1 (got '$value')"
kill "$prom_pid"; prom_pid=

# HTTPS with a self-signed certificate: the celer commands on this machine trust the head's
# own certificate (copied into its session); another certificate in CELER_TLS_CA is refused.
mkdir -p "$work/d"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 -keyout "$work/key.pem" -out "$work/cert.pem" \
  > /dev/null 2>&1 || fail "openssl"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 -keyout "$work/other-key.pem" \
  -out "$work/other.pem" > /dev/null 2>&1 || fail "openssl"
dirs+=("$work/d")
CELER_TEMP_DIR=$work/d "$celer" start --head --port 0 --num-cpus 1 --dashboard-port 0 --tls-cert "$work/cert.pem" \
  --tls-key "$work/key.pem" > /dev/null || fail "a head with TLS"
grep -q '^https://' "$work"/d/session_latest/http_url || fail "http_url: $(cat "$work"/d/session_latest/http_url)"
tls_out=$(CELER_TEMP_DIR=$work/d "$celer" submit --follow -- /bin/echo over https 2>&1) || fail "celer submit over HTTPS: $tls_out"
grep -q '^over https$' <<<"$tls_out" || fail "celer submit over HTTPS: $tls_out"
set +e
bad_ca=$(CELER_TEMP_DIR=$work/d CELER_TLS_CA=$work/other.pem "$celer" job list 2>&1)
rc=$?
set -e
[[ $rc != 0 ]] && grep -q 'CELER_TLS_CA' <<<"$bad_ca" || fail "a certificate not trusted was accepted: $bad_ca"

# The default port (8266) falls back to a free one when taken; -1 serves no HTTP.
out_b=$(CELER_TEMP_DIR=$work/b "$celer" start --head --port 0 --num-cpus 0)
url_b=$(cat "$work"/b/session_latest/http_url)
[[ $(code "${auth[@]}" "$url_b/api/version") == 403 ]] || fail "another cluster's head took this token ($url_b)"
out_c=$(CELER_TEMP_DIR=$work/c "$celer" start --head --port 0 --num-cpus 0 --dashboard-port -1)
grep -q "REST API" <<<"$out_c" && fail "--dashboard-port -1 still served HTTP: $out_c"
[[ ! -e $work/c/session_latest/http_url ]] || fail "--dashboard-port -1 wrote an http_url"
status=0
echo "http api: passed"
