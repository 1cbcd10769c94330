// The dashboard page the head serves at / (api.hpp, docs/dashboard.md): plain HTML and a
// script of its own, nothing fetched from elsewhere. Every 2 seconds it reads, with the
// session cookie, /api/version, /api/nodes, /api/jobs/ (and the chosen job's log),
// /api/actors and /api/tasks; a section the credential may not see says so.
#include "http/api.hpp"

namespace celer::http {

const char* dashboard_html() {
  return R"(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>celer</title>
<style>
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em;margin:0 0 .2em}
.meta{color:#666;margin-bottom:1em}
table{border-collapse:collapse;margin:.5em 0 1.5em}
th,td{padding:.3em .8em;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}
th{background:#f4f4f4}
.dead{color:#a00}
.bar{display:inline-block;width:8em;height:.7em;background:#eee;margin-right:.4em}
.bar span{display:block;height:100%;background:#4a7}
#problem{color:#a00}
.note{color:#666}
form{display:inline}
tr.job{cursor:pointer}
tr.chosen{background:#eef5ff}
.SUCCEEDED{color:#070}.FAILED,.DEAD{color:#a00}.STOPPED{color:#a60}.RUNNING,.ALIVE{color:#05a}
pre#log{background:#111;color:#ddd;padding:.8em;max-height:24em;overflow:auto;white-space:pre-wrap}
</style></head>
<body>
<h1>celer</h1>
<div class="meta"><span id="who"></span> &middot; <span id="version"></span> &middot; updated <span id="updated">never</span>
 &middot; <form method="post" action="/api/logout"><input type="hidden" name="csrf" value="{{csrf}}"><button type="submit">Log out</button></form></div>
<p id="problem"></p>
<h2>Nodes</h2>
<table><thead><tr><th>node</th><th>state</th><th>CPU in use</th><th>memory</th><th>GPUs</th><th>workers</th>
<th>queued</th><th>object store</th><th>labels</th></tr></thead><tbody id="nodes"></tbody></table>
<p class="note" id="nodes-note"></p>
<h2>Jobs</h2>
<table><thead><tr><th>submission id</th><th>status</th><th>entrypoint</th><th>submitted</th><th>duration</th>
<th>exit code</th><th>tasks</th><th>message</th></tr></thead><tbody id="jobs"></tbody></table>
<p class="note" id="jobs-note"></p>
<h3>Log of <span id="log-job">-</span></h3>
<pre id="log"></pre>
<h2>Actors</h2>
<p id="actors-summary"></p>
<p class="note" id="actors-note"></p>
<table><thead><tr><th>actor</th><th>class</th><th>name</th><th>state</th><th>job</th><th>node</th><th>restarts</th>
<th>resources</th></tr></thead><tbody id="actors"></tbody></table>
<h2>Tasks</h2>
<p id="tasks"></p>
<p class="note" id="tasks-note"></p>
<table><thead><tr><th>task</th><th>function</th><th>state</th><th>attempt</th><th>job</th><th>node</th>
<th>submitted</th><th>error</th></tr></thead><tbody id="task-list"></tbody></table>
<script src="/dashboard.js"></script>
</body></html>
)";
}

const char* dashboard_js() {
  return R"('use strict';
const text = (s) => document.createTextNode(String(s));
function cell(row, content) {
  const td = document.createElement('td');
  if (content instanceof Node) td.appendChild(content); else td.appendChild(text(content));
  row.appendChild(td);
  return td;
}
function bar(used, total) {
  const wrap = document.createElement('span');
  const b = document.createElement('span');
  b.className = 'bar';
  const fill = document.createElement('span');
  fill.style.width = (total > 0 ? Math.min(100, 100 * used / total) : 0) + '%';
  b.appendChild(fill);
  wrap.appendChild(b);
  wrap.appendChild(text(used.toFixed(1) + ' / ' + total.toFixed(1)));
  return wrap;
}
const gb = (b) => (b / 1e9).toFixed(1) + ' GB';
async function get(path) {
  const r = await fetch(path, {credentials: 'same-origin', headers: {'Accept': 'application/json'}});
  // 401: the session ended; the page again is the login form. 403: this credential may not
  // see it (a job's sees only its own job), which the page says.
  if (r.status === 401) { window.location.reload(); throw new Error('logged out'); }
  if (!r.ok) {
    let why = 'HTTP ' + r.status;
    try { why = (await r.json()).error || why; } catch (e) { /* not JSON */ }
    throw new Error(path + ': ' + why);
  }
  return r.json();
}
const byId = (id) => document.getElementById(id);
const resources = (r) => Object.entries(r).filter(([k]) => !k.startsWith('node:'))
  .map(([k, v]) => k === 'memory' ? k + '=' + gb(v) : k + '=' + v).join(' ') || '-';
// A section the credential may not see (403) says so instead of failing the page.
async function section(noteId, fill) {
  try {
    await fill();
    byId(noteId).textContent = '';
  } catch (e) {
    if (String(e.message).includes('logged out')) throw e;
    byId(noteId).textContent = String(e.message || e);
  }
}
let chosenJob = null;
const taskText = (t) => !t ? '-' : t.FINISHED + ' finished, ' + t.FAILED + ' failed, ' + t.RUNNING + ' running, ' +
  t.WAITING + ' waiting';
async function refreshNodes() {
  const rows = [];
  for (const n of (await get('/api/nodes')).nodes) {
    const row = document.createElement('tr');
    row.dataset.node = n.node_id;
    cell(row, n.node_id.slice(0, 8) + ' ' + n.address);
    const state = cell(row, n.state + (n.dead_reason ? ': ' + n.dead_reason : ''));
    if (n.state !== 'ALIVE') state.className = 'dead';
    const cpu = n.total.CPU || 0, free = n.available.CPU || 0;
    cell(row, bar(cpu - free, cpu));
    const mem = n.total.memory || 0, memFree = n.available.memory || 0;
    cell(row, gb(mem - memFree) + ' / ' + gb(mem));
    cell(row, n.gpus.length === 0 ? '-' : n.gpus.map((g) => g.model + (g.utilisation !== undefined
      ? ' ' + Math.round(100 * g.utilisation) + '%' : '')).join(', '));
    cell(row, n.workers);
    cell(row, n.queued);
    cell(row, gb(n.object_store.memory_bytes) + ' in memory, ' + gb(n.object_store.spilled_bytes) + ' spilled');
    cell(row, Object.entries(n.labels).map(([k, v]) => k + '=' + v).join(', ') || '-');
    rows.push(row);
  }
  byId('nodes').replaceChildren(...rows);
}
async function refreshJobs() {
  const jobs = await get('/api/jobs/');
  if (jobs.length > 0 && !jobs.some((j) => j.submission_id === chosenJob)) chosenJob = jobs[jobs.length - 1].submission_id;
  const rows = [];
  for (const j of jobs) {
    const row = document.createElement('tr');
    row.className = 'job' + (j.submission_id === chosenJob ? ' chosen' : '');
    row.dataset.job = j.submission_id;
    cell(row, j.submission_id);
    cell(row, j.status).className = j.status;
    cell(row, j.entrypoint);
    cell(row, j.start_time ? new Date(j.start_time).toLocaleTimeString() : '-');
    const end = j.end_time || Date.now();
    cell(row, j.start_time ? ((end - j.start_time) / 1000).toFixed(1) + ' s' : '-');
    cell(row, j.driver_exit_code === null ? '-' : j.driver_exit_code);
    cell(row, taskText(j.tasks));
    cell(row, j.message);
    row.addEventListener('click', () => { chosenJob = j.submission_id; refresh(); });
    rows.push(row);
  }
  byId('jobs').replaceChildren(...rows);
  byId('jobs-note').textContent = jobs.length === 0 ? 'No jobs yet: celer submit -- PROGRAM ARGS (docs/jobs.md)' : '';
  byId('log-job').textContent = chosenJob || '-';
  if (chosenJob) {
    const log = byId('log');
    const atEnd = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
    const text = (await get('/api/jobs/' + encodeURIComponent(chosenJob) + '/logs?tail=262144')).logs;  // its last 256 KiB
    if (log.textContent !== text) {
      log.textContent = text;
      if (atEnd) log.scrollTop = log.scrollHeight;
    }
  }
}
async function refreshActors() {
  const a = await get('/api/actors');
  byId('actors-summary').textContent = a.total + ' actor(s): ' +
    (Object.entries(a.by_state).map(([k, v]) => v + ' ' + k).join(', ') || 'none');
  const rows = [];
  for (const x of a.actors) {
    const row = document.createElement('tr');
    cell(row, x.actor_id.slice(0, 8));
    cell(row, x.class_name);
    cell(row, x.name || '-');
    cell(row, x.state + (x.death_cause ? ': ' + x.death_cause : '')).className = x.state;
    cell(row, x.job_id.slice(0, 8));
    cell(row, x.node_id ? x.node_id.slice(0, 8) : '-');
    cell(row, x.num_restarts + (x.max_restarts !== 0 ? ' of ' + (x.max_restarts < 0 ? 'unlimited' : x.max_restarts) : ''));
    cell(row, resources(x.required_resources));
    rows.push(row);
  }
  byId('actors').replaceChildren(...rows);
}
async function refreshTasks() {
  const t = await get('/api/tasks?limit=50');
  const rows = [];
  for (const x of t.tasks) {
    const row = document.createElement('tr');
    cell(row, x.task_id.slice(0, 8));
    cell(row, x.name || '?');
    cell(row, x.state).className = x.state;
    cell(row, x.attempt_number);
    cell(row, x.job_id.slice(0, 8));
    cell(row, x.node_id || '-');
    cell(row, new Date(x.submitted_ms).toLocaleTimeString());
    cell(row, x.error_message || '');
    rows.push(row);
  }
  byId('task-list').replaceChildren(...rows);
  const s = t.summary;
  byId('tasks').textContent = (s.SUBMITTED !== undefined ? s.SUBMITTED + ' submitted: ' + taskText(s) +
    (s.mean_scheduling_latency_ms !== null ? '; mean scheduling latency ' + s.mean_scheduling_latency_ms.toFixed(2) + ' ms'
                                          : '') + '. ' : '') +
    s.QUEUED_ON_NODES + ' queued on nodes, ' + s.worker_processes + ' worker process(es)' +
    (t.waiting.length ? '; oldest waiting: ' + t.waiting.map((w) =>
      w.function + ' (' + w.waiting_ms + ' ms' + (w.why ? ': ' + w.why : '') + ')').join(', ') : '');
}
async function refresh() {
  try {
    const v = await get('/api/version');
    byId('who').textContent = v.you;
    byId('version').textContent = 'celer ' + v.celer_version;
    await section('nodes-note', refreshNodes);
    await section('jobs-note', refreshJobs);
    await section('actors-note', refreshActors);
    await section('tasks-note', refreshTasks);
    byId('updated').textContent = new Date().toLocaleTimeString();
    byId('problem').textContent = '';
  } catch (e) {
    byId('problem').textContent = String(e.message || e);
  }
}
refresh();
setInterval(refresh, 2000);
)";
}

} // namespace celer::http
