// The dashboard page the head serves at / (api.hpp, docs/dashboard.md): plain HTML and a
// script of its own, nothing fetched from elsewhere. It reads /api/version and /api/nodes
// with the session cookie, every 2 seconds.
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
form{display:inline}
</style></head>
<body>
<h1>celer</h1>
<div class="meta"><span id="who"></span> &middot; <span id="version"></span> &middot; updated <span id="updated">never</span>
 &middot; <form method="post" action="/api/logout"><button type="submit">Log out</button></form></div>
<p id="problem"></p>
<h2>Nodes</h2>
<table><thead><tr><th>node</th><th>state</th><th>CPU in use</th><th>memory</th><th>GPUs</th><th>workers</th>
<th>queued</th><th>object store</th><th>labels</th></tr></thead><tbody id="nodes"></tbody></table>
<p class="meta">Jobs, actors and tasks come with the rest of the HTTP API (docs/dashboard.md).</p>
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
async function refresh() {
  try {
    const v = await get('/api/version');
    document.getElementById('who').textContent = v.you;
    document.getElementById('version').textContent = 'celer ' + v.celer_version;
    const body = document.getElementById('nodes');
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
    body.replaceChildren(...rows);
    document.getElementById('updated').textContent = new Date().toLocaleTimeString();
    document.getElementById('problem').textContent = '';
  } catch (e) {
    document.getElementById('problem').textContent = String(e.message || e);
  }
}
refresh();
setInterval(refresh, 2000);
)";
}

} // namespace celer::http
