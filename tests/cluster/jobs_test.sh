#!/usr/bin/env bash
# Jobs end to end on a local cluster (docs/jobs.md): `celer submit --working-dir --follow`
# runs a celer program the head starts with its job's credential alone, streams its log and
# exits with its code; a job's exit code and FAILED state; priority and env reach the
# driver; `celer job list|status|logs|stop|delete`; a stopped job's actors go; a job's own
# credential lists only its job; an entrypoint that needs a GPU is refused while no node has
# one; once a node that declares one joins, a job's task sees it, an entrypoint reserving it
# runs, and a second one waits PENDING (saying why) until the first is stopped; each node
# runs the job's workers from its own copy of the working directory, fetched from the head
# (the program and its data files need not be anywhere else on the node); a restarted
# head still lists every job and how it ended, and a browser logged in before stays logged
# in; no shell ever runs an entrypoint.
#
#   tests/cluster/jobs_test.sh path/to/celer path/to/celer-job-driver
set -euo pipefail
source "$(dirname "$0")/lib.sh"
celer=$(realpath "$1")
driver=$(realpath "$2")
work=$(mktemp -d /tmp/celer-jobs-test.XXXXXX)
export CELER_TEMP_DIR=$work/tmp
status=1
cleanup() {
  "$celer" stop >/dev/null 2>&1 || true
  [[ $status -eq 0 ]] || tail_logs "$work"/tmp/session_*/logs/*.log "$work"/tmp/session_*/jobs/*/driver.log
  rm -rf "$work"
}
trap cleanup EXIT
unset CELER_TOKEN CELER_ADDRESS
mkdir -p "$work/tmp" "$work/app/bin" "$work/app/build" "$work/app/data"
cp "$driver" "$work/app/bin/"
echo "hello from the working directory" > "$work/app/data/greeting.txt"
head -c 1048576 /dev/urandom > "$work/app/build/big.o"   # left out with --exclude

"$celer" start --head --port 0 --num-cpus 2 --dashboard-port 0 >/dev/null
session=$work/tmp/session_latest
addr=$(cat "$session/address")
url=$(cat "$session/http_url")
token=$(cat "$session/token")

# 1. Submit and follow: the working directory travels, the driver holds no token, runs tasks
# and an actor, and `celer submit` exits with the driver's code.
out=$("$celer" submit --working-dir "$work/app" --exclude build --priority 5 --env GREETING=hello --follow \
        -- ./bin/celer-job-driver run 5 2>"$work/submit.err") || fail "submit --follow exited $?: $out $(cat "$work/submit.err")"
grep -q '^credential: job-only$' <<<"$out" || fail "the driver held more than its job's credential: $out"
grep -q '^priority: 5$' <<<"$out" || fail "--priority did not reach the driver: $out"
grep -q '^step 5: 10, counter 5$' <<<"$out" || fail "the job's tasks and actor: $out"
grep -q 'SUCCEEDED' "$work/submit.err" || fail "no final state: $(cat "$work/submit.err")"
first=$(grep -o 'celersubmit_[0-9a-f]*' "$work/submit.err" | head -1)
# Its driver's heartbeats told the head what its tasks did (the last one as it ended).
for _ in $(seq 30); do "$celer" job status "$first" | contains 'tasks: *5 submitted, 5 finished, 0 failed' && break; sleep 0.1; done
"$celer" job status "$first" | contains 'tasks: *5 submitted, 5 finished, 0 failed' ||
  fail "the job's task counts: $("$celer" job status "$first")"
# ... and each task's changes of state: the head lists the job's five tasks, finished.
first_job=$("$celer" job status "$first" | sed -n 's/.*(celer job \([0-9a-f]*\)).*/\1/p')
listed=$("$celer" list tasks --job "$first_job" --state FINISHED --limit 10)
[[ $(grep -c " twice  *FINISHED  *1 " <<<"$listed") == 5 ]] || fail "celer list tasks --job $first_job: $listed"
grep -q 'uploading' "$work/submit.err" || fail "the working directory was not uploaded"
du_pkg=$(du -b "$session"/packages/* | awk '{s+=$1} END {print s}')
(( du_pkg < $(stat -c %s "$driver") + 65536 )) || fail "--exclude build did not leave the 1 MiB file out ($du_pkg bytes)"

# 2. The same folder again is not uploaded twice; the driver's exit code comes back.
set +e
"$celer" submit --working-dir "$work/app" --exclude build --submission-id exits-3 --follow \
  -- ./bin/celer-job-driver run 1 3 >/dev/null 2>"$work/submit2.err"
rc=$?
set -e
[[ $rc == 3 ]] || fail "submit --follow of a driver exiting 3 exited $rc: $(cat "$work/submit2.err")"
grep -q uploading "$work/submit2.err" && fail "the same working directory was uploaded again"
st=$("$celer" job status exits-3)
grep -q 'status: *FAILED' <<<"$st" || fail "status: $st"
grep -q 'exit code: *3' <<<"$st" || fail "status: $st"

# 3. Stop a running job: its log streams, it ends STOPPED, its actor goes.
id=$("$celer" submit --working-dir "$work/app" --exclude build -- ./bin/celer-job-driver forever 2>/dev/null)
[[ $id == celersubmit_* ]] || fail "submit printed '$id', not a submission id"
for _ in $(seq 300); do "$celer" job logs "$id" | contains '^tick 3$' && break; sleep 0.1; done
"$celer" job logs "$id" | contains '^tick 3$' || fail "no ticks in the log: $("$celer" job logs "$id")"
"$celer" status | contains 'actors: 1 alive' || fail "the running job's actor: $("$celer" status | head -3)"
stopped=$("$celer" job stop "$id")
grep -q "STOPPED" <<<"$stopped" || fail "stop: $stopped"
for _ in $(seq 100); do "$celer" status | contains 'actors: 0 alive' && break; sleep 0.1; done
"$celer" status | contains 'actors: 0 alive' || fail "the stopped job's actor lives on: $("$celer" status | head -3)"
"$celer" job logs "$id" | contains '^ready$' || fail "the stopped job's log is gone"

# 4. A job's own credential sees its own job only (the CLI inside a job uses it).
"$celer" submit --submission-id lister --follow -- "$celer" job list >"$work/lister.out" 2>/dev/null ||
  fail "celer job list inside a job: $(cat "$work/lister.out")"
grep -q '^1 job(s)$' "$work/lister.out" || fail "a job's credential listed more than its job: $(cat "$work/lister.out")"
grep -q 'lister' "$work/lister.out" || fail "the job did not see itself: $(cat "$work/lister.out")"
all=$("$celer" list jobs)
grep -q '^4 job(s)$' <<<"$all" || fail "the admin's list: $all"

# 5. Never a shell: a Ray-style entrypoint string with shell syntax is refused, and words
# that look like shell are passed as they are.
auth=(-H "Authorization: Bearer $token" -H "Content-Type: application/json")
refused=$(curl -s "${auth[@]}" -X POST "$url/api/jobs/" --data '{"entrypoint": "echo hi; touch '"$work"'/pwned"}')
grep -q 'never through a shell' <<<"$refused" || fail "a shell entrypoint was not refused: $refused"
made=$(curl -sf "${auth[@]}" -X POST "$url/api/jobs/" \
  --data '{"entrypoint": "/bin/echo '"'"'$(touch '"$work"'/pwned)'"'"'", "submission_id": "literal"}') || fail "POST /api/jobs/"
grep -q '"submission_id":"literal"' <<<"$made" || fail "submit: $made"
for _ in $(seq 100); do curl -sf "${auth[@]}" "$url/api/jobs/literal" | contains SUCCEEDED && break; sleep 0.1; done
logs=$(curl -sf "${auth[@]}" "$url/api/jobs/literal/logs")
grep -q 'touch' <<<"$logs" || fail "logs: $logs"
[[ -e $work/pwned ]] && fail "an entrypoint ran through a shell"
[[ $(curl -s -o /dev/null -w '%{http_code}' -X DELETE "$url/api/jobs/literal") == 401 ]] || fail "DELETE without a credential"
[[ $(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" \
  -X POST "$url/api/jobs/" --data '{"entrypoint": "/bin/true"}') == 403 ]] || fail "POST with a wrong token was not 403"
"$celer" job delete literal >/dev/null || fail "delete"
"$celer" job status literal >/dev/null 2>&1 && fail "a deleted job still has a status"

# 6. GPUs: refused while no node has one; runs once a node declaring one joins.
set +e
nogpu=$("$celer" submit --entrypoint-num-gpus 1 -- ./bin/celer-job-driver gpu 2>&1)
set -e
grep -q "the entrypoint's resources (0 CPU, 1 GPU) can never be reserved" <<<"$nogpu" ||
  fail "a GPU entrypoint on a cluster without GPUs: $nogpu"
"$celer" start --address "$addr" --num-cpus 1 --gpus 'T4-16GB:1' >/dev/null
gpu_node=$("$celer" list nodes | awk '/GPU=1/ {print $1}')
[[ -n $gpu_node ]] || fail "no node with a GPU: $("$celer" list nodes)"
# The driver reserves a CPU for itself; its task takes the node's one GPU (an entrypoint
# reserving that GPU would hold it from its own tasks).
gpu=$("$celer" submit --working-dir "$work/app" --exclude build --entrypoint-num-cpus 1 --follow \
        -- ./bin/celer-job-driver gpu 2>/dev/null) || fail "the GPU job: $gpu"
grep -q '^gpu task saw CUDA_VISIBLE_DEVICES=0$' <<<"$gpu" || fail "the GPU job's task: $gpu"
# A job needing the GPU for itself waits while another holds it, and starts when it is free.
"$celer" submit --submission-id gpu-holder --entrypoint-num-gpus 1 -- /bin/sleep 1000 >/dev/null 2>&1
for _ in $(seq 100); do "$celer" job status gpu-holder | contains 'status: *RUNNING' && break; sleep 0.1; done
"$celer" job status gpu-holder | contains "status: *RUNNING" || fail "gpu-holder: $("$celer" job status gpu-holder)"
"$celer" submit --submission-id gpu-waiter --entrypoint-num-gpus 1 -- /bin/true >/dev/null 2>&1
sleep 1
w=$("$celer" job status gpu-waiter)
grep -q 'status: *PENDING' <<<"$w" && grep -q "waiting for the entrypoint's resources (0 CPU, 1 GPU)" <<<"$w" ||
  fail "a second GPU entrypoint did not wait: $w"
"$celer" job stop gpu-holder >/dev/null
for _ in $(seq 100); do "$celer" job status gpu-waiter | contains 'status: *SUCCEEDED' && break; sleep 0.1; done
"$celer" job status gpu-waiter | contains 'status: *SUCCEEDED' || fail "gpu-waiter: $("$celer" job status gpu-waiter)"

# Workers run from each node's own copy of the working directory, fetched from the head: the
# program and the data file beside it are found there, on the head's node and the GPU node.
where=$("$celer" submit --working-dir "$work/app" --exclude build --follow -- ./bin/celer-job-driver where 2>/dev/null) ||
  fail "the where job: $where"
copy='/workdirs/[0-9a-f]\{32\}'
for kind in cpu gpu; do
  grep -q "^$kind task: .*$copy/bin/celer-job-driver in .*$copy: hello from the working directory\$" <<<"$where" ||
    fail "the $kind task did not run from the node's copy of the working directory: $where"
done

# 7. A head killed and started again still lists every job and how it ended.
# (A browser logged in before: its session outlives the head too, on the same HTTP port:
# the session cookie is named for the port, docs/dashboard.md.)
[[ $(curl -s -o /dev/null -w '%{http_code}' -c "$work/jar" --data-urlencode "token=$token" "$url/api/login") == 303 ]] ||
  fail "login"
head_pid=$(cat "$session"/pids/head-*)
kill -KILL "$head_pid"
for _ in $(seq 50); do kill -0 "$head_pid" 2>/dev/null || break; sleep 0.1; done
http_port=${url##*:}
"$celer" start --head --resume --port "${addr##*:}" --num-cpus 2 --dashboard-port "${http_port%%/*}" >/dev/null
after=$("$celer" job list)
grep -q '^8 job(s)$' <<<"$after" || fail "after a head restart: $after"
grep -q 'exits-3 *FAILED' <<<"$after" || fail "after a head restart: $after"
grep -q "$id *STOPPED" <<<"$after" || fail "after a head restart: $after"
url=$(cat "$session/http_url")
[[ $(curl -s -o /dev/null -w '%{http_code}' -b "$work/jar" "$url/api/jobs/") == 200 ]] ||
  fail "the browser's session did not outlive the head"

status=0
echo "jobs: passed"
