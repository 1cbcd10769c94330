"""Attacker suite, section F: the head's HTTP server (CSRF, bodies before authentication, slow senders, logs in pages, invalid UTF-8) (issue 34).

Each attack is a function of (suite, check): `suite` is attacker_suite.Suite (its cluster,
the victim job K, the attacker job J and its JobPeer), `check(name, ok, detail)` records
PASS/FAIL. ATTACKS lists them in the order they run. Each runs against the real head's HTTP
server, as a stranger (no credential), with job J's credential, and as a browser holding the
admin's dashboard cookie; a refusal is asserted by its effect (nothing submitted, the
head's memory, the admin's answers), by its status and JSON reason, by the head's
celer_http_responses_total and by the head's log line.
"""

import http.client
import json
import os
import random
import re
import select
import socket
import subprocess
import time

from attack_tools import MIB, NO_ADDR, hwm, idv, log_lines, mib, peak_before, rss

TITLE = "F. HTTP: with job J's credential and without one"

HEAD_COMPONENT = (0, 1)
HOSTILE = "\x1b]0;pwned\x07\x1b[2J"


class Head:
    """The head's HTTP server as attacks reach it: its URL from the session, the token, J's
    credential."""

    def __init__(self, suite):
        c = suite.cluster
        with open(os.path.join(c.session, "http_url")) as f:
            url = f.read().strip()
        m = re.match(r"http://([^:/]+):(\d+)", url)
        self.host, self.port = m.group(1), int(m.group(2))
        self.origin = f"http://{self.host}:{self.port}"
        self.token = c.token
        self.job_credential = c.keys.job_secret(suite.j).hex()
        self.cookie_name = f"celer_session_{self.port}"

    def request(self, method, path, body=None, headers=None, timeout=30):
        """(status, parsed JSON or text, headers) of one request on a connection of its own."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            raw = r.read()
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = raw.decode("utf-8", "replace")
            return r.status, parsed, dict(r.getheaders())
        finally:
            conn.close()

    def admin(self, method, path, body=None, headers=None, timeout=30):
        h = {"Authorization": f"Bearer {self.token}"}
        h.update(headers or {})
        return self.request(method, path, body, h, timeout)

    def responses(self):
        """celer_http_responses_total by code, from /metrics."""
        _, text, _ = self.admin("GET", "/metrics")
        out = {}
        for m in re.finditer(r'celer_http_responses_total\{code="(\d+)"\} (\d+)', text):
            out[int(m.group(1))] = int(m.group(2))
        return out

    def login_cookie(self):
        """The admin's dashboard session, as the browser holds it after logging in."""
        status, _, headers = self.request("POST", "/api/login", json.dumps({"token": self.token}),
                                          {"Content-Type": "application/json"})
        cookie = headers.get("Set-Cookie", "")
        return status, cookie.split(";", 1)[0]

    def job_count(self):
        status, jobs, _ = self.admin("GET", "/api/jobs/")
        return len(jobs) if status == 200 else -1


def grew(before, after, code):
    return after.get(code, 0) - before.get(code, 0)


def raw_request(host, port, head, body_bytes=0, chunk=1 << 20, timeout=20):
    """Sends `head` and then up to `body_bytes` of body, stopping as soon as the server
    answers; returns (the server's status line, body bytes sent before the answer)."""
    s = socket.create_connection((host, port), timeout=timeout)
    sent = 0
    got = b""
    try:
        s.sendall(head.encode())
        block = b"x" * chunk
        try:
            while sent < body_bytes:
                if select.select([s], [], [], 0)[0]:
                    break  # the server answered: no more body
                n = min(chunk, body_bytes - sent)
                s.sendall(block[:n])
                sent += n
        except OSError:
            pass  # the server closed: what it answered is below
        try:
            while b"\r\n" not in got:
                part = s.recv(4096)
                if not part:
                    break
                got += part
        except OSError:
            pass
        return got.split(b"\r\n", 1)[0].decode("latin-1"), sent
    finally:
        s.close()


def attack_csrf(suite, check):
    """F1: what a page on another port of this host (or any site) can make the admin's
    browser send. The browser holds the admin's dashboard cookie; the page submits a job with
    a form (text/plain JSON, or urlencoded), or with fetch and no CSRF token."""
    h = Head(suite)
    c = suite.cluster
    status, cookie = h.login_cookie()
    check("F1 control: the admin logs in to the dashboard (a cookie named for this port)",
          status == 204 and cookie.startswith(h.cookie_name + "="), f"{status} {cookie[:24]}...")
    jobs_before, codes_before = h.job_count(), h.responses()
    since = len(log_lines(c.head_log))
    job = json.dumps({"entrypoint": "/bin/true", "submission_id": "csrf-" + str(random.getrandbits(32))})
    evil = f"http://{h.host}:{h.port + 1}"
    tries = [
        ("a text/plain form from another port", {"Cookie": cookie, "Origin": evil, "Content-Type": "text/plain"}, 403),
        ("a text/plain form with no Origin (an old browser)", {"Cookie": cookie, "Content-Type": "text/plain"}, 403),
        ("a fetch from another port", {"Cookie": cookie, "Origin": evil, "Content-Type": "application/json"}, 403),
        ("the cookie and JSON but no CSRF token", {"Cookie": cookie, "Content-Type": "application/json"}, 403),
        ("a Referer from another port", {"Cookie": cookie, "Referer": evil + "/x", "Content-Type": "application/json"}, 403),
        ("the token with text/plain (a program's form post)",
         {"Authorization": f"Bearer {h.token}", "Content-Type": "text/plain"}, 415),
    ]
    results = []
    for what, headers, want in tries:
        st, body, _ = h.request("POST", "/api/jobs/", job, headers)
        reason = body.get("error", "") if isinstance(body, dict) else ""
        results.append((what, st, want, reason))
    st, body, _ = h.request("POST", "/api/login", f"token={h.token}",
                            {"Origin": evil, "Content-Type": "application/x-www-form-urlencoded"})
    results.append(("the login form posted from another port", st, 403, body.get("error", "") if isinstance(body, dict) else ""))
    line = suite.log_has(c.head_log, r"HTTP: refused POST /api/jobs/ from .*cross-origin request refused", since)
    jobs_after, codes_after = h.job_count(), h.responses()
    bad = [f"{w}: {st} (wanted {want})" for w, st, want, reason in results if st != want or not reason]
    check("F1 a cross-site form or fetch with the admin's cookie submits no job: each refused with a reason",
          not bad and jobs_after == jobs_before and line is not None,
          f"{len(results)} tries, unexpected: {bad or 'none'}; jobs {jobs_before} -> {jobs_after}; "
          f"403s +{grew(codes_before, codes_after, 403)}, 415s +{grew(codes_before, codes_after, 415)}; "
          f"log: {line!r}; e.g. {results[0][3]!r}")
    # The dashboard's own page: the token it embeds makes the same request go through.
    st, page, _ = h.request("GET", "/", headers={"Cookie": cookie, "Accept": "text/html"})
    m = re.search(r'name="csrf" value="([0-9a-f]{64})"', page if isinstance(page, str) else "")
    token = m.group(1) if m else ""
    st2, body2, _ = h.request("GET", "/api/version", headers={"Cookie": cookie, "X-CSRF-Token": token})
    st3, _, _ = h.request("POST", "/api/logout", headers={"Cookie": cookie, "Origin": h.origin,
                                                           "X-CSRF-Token": token})
    check("F1b control: the dashboard's page carries its CSRF token, and with it the same origin logs out",
          st == 200 and token and st2 == 200 and st3 == 204, f"page {st}, token {'found' if token else 'missing'}, "
          f"GET with cookie {st2}, logout {st3}")


def attack_bodies_before_auth(suite, check):
    """F2: bodies the head must not read. Four 150 MiB POSTs without a credential, and 150
    MiB with job J's credential (a job submission and a package upload, which only the
    token may send large): each answered from its headers."""
    h = Head(suite)
    c = suite.cluster
    time.sleep(1.1)  # a fresh second of the head's log (5 refusal lines a second)
    before = peak_before(c.head_pid)
    codes_before = h.responses()
    since = len(log_lines(c.head_log))
    big = 150 * MIB
    answers = []

    def post(path, auth, method="POST", ctype="application/json"):
        head = (f"{method} {path} HTTP/1.1\r\nHost: {h.host}:{h.port}\r\nContent-Type: {ctype}\r\n"
                f"{auth}Content-Length: {big}\r\n\r\n")
        return raw_request(h.host, h.port, head, big)

    for _ in range(4):
        answers.append(("none",) + post("/api/jobs/", ""))
    jcred = f"Authorization: Bearer {h.job_credential}\r\n"
    answers.append(("J",) + post("/api/jobs/", jcred))
    answers.append(("J",) + post("/api/packages/" + "0" * 32, jcred, "PUT", "application/octet-stream"))
    grown = hwm(c.head_pid) - before
    codes_after = h.responses()
    line = suite.log_has(c.head_log, r"HTTP: refused (POST|PUT) /api/(jobs|packages)/.* \((401|413)\)", since)
    statuses = [a[1] for a in answers]
    ok = all(s.startswith("HTTP/1.1 401") for s in statuses[:4]) and all(s.startswith("HTTP/1.1 413") for s in statuses[4:])
    taken = max(a[2] for a in answers)
    check("F2 150 MiB bodies without a credential, or beyond J's limit, are refused from their headers",
          ok and grown < 32 * MIB and line is not None,
          f"answers {statuses}; at most {mib(taken)} of a body sent before the answer came; peak RSS grew by "
          f"{mib(grown)} for {mib(6 * big)} sent (limit 32 MiB; was +790 MiB for four); 401s "
          f"+{grew(codes_before, codes_after, 401)}, 413s +{grew(codes_before, codes_after, 413)}; log: {line!r}")


def attack_slow_senders(suite, check):
    """F3: 40 connections that send a request's headers a byte at a time and never finish
    (more than the server's 32 threads), as a stranger: the admin's requests are answered
    all the while, and each slow sender is closed (made room for, or cut at the 10 s header
    deadline)."""
    h = Head(suite)
    c = suite.cluster
    time.sleep(1.1)  # a fresh second of the head's log
    since = len(log_lines(c.head_log))
    slow = []
    for i in range(40):
        s = socket.create_connection((h.host, h.port), timeout=5)
        s.sendall(f"GET /api/nodes HTTP/1.1\r\nHost: {h.host}\r\nX-Slow-{i}: ".encode())
        slow.append(s)
    answered, took = [], []
    for _ in range(5):
        t0 = time.time()
        try:
            st, _, _ = h.admin("GET", "/api/version", timeout=15)
        except OSError as e:
            st = f"{type(e).__name__}"
        answered.append(st)
        took.append(time.time() - t0)
        for s in slow:  # they keep dripping
            try:
                s.sendall(b"a")
            except OSError:
                pass
    # Each slow sender is closed by the server within the deadline (10 s) and a margin:
    # made room for (no answer), or cut at its deadline (cpp-httplib answers the request it
    # could not read with a 400). Never a 200.
    closed, answered_slow = 0, []
    deadline = time.time() + 20
    for s in slow:
        s.settimeout(max(0.1, deadline - time.time()))
        got = b""
        try:
            while True:
                part = s.recv(4096)
                if not part:
                    closed += 1
                    break
                got += part
        except socket.timeout:
            pass  # still open
        except OSError:
            closed += 1  # reset by the head
        if got:
            answered_slow.append(got.split(b"\r\n", 1)[0].decode("latin-1"))
        s.close()
    line = suite.log_has(c.head_log, r"HTTP: (all \d+ connections taken|closed the connection from .* did not "
                                     r"arrive in time)", since)
    bad = [a for a in answered_slow if not a.startswith("HTTP/1.1 400")]
    check("F3 40 slow senders: the admin's requests are answered meanwhile, and every slow sender is closed",
          answered == [200] * 5 and closed == len(slow) and not bad and line is not None,
          f"admin's answers {answered} in {', '.join(f'{t:.2f}s' for t in took)}; {closed}/{len(slow)} slow "
          f"connections closed by the head ({len(slow) - len(answered_slow)} made room for, "
          f"{len(answered_slow)} cut at the deadline with a 400; other answers: {bad or 'none'}); log: {line!r}")


def attack_large_log(suite, check):
    """F4: a job writes a 32 MiB log; the admin reads all of it (celer job logs, page by
    page) and one page as large as it may ask: the head holds a page at a time."""
    h = Head(suite)
    c = suite.cluster
    size = 32 * MIB
    sid = "biglog-" + str(random.getrandbits(32))
    line = "0123456789abcdef" * 4 + "\n"
    script = f"/usr/bin/yes {line.strip()} | /usr/bin/head -c {size}"
    r = c.run(["submit", "--address", c.address, "--submission-id", sid, "--", "/bin/sh", "-c", script], timeout=60)
    done = False
    deadline = time.time() + 60
    while time.time() < deadline:
        st, job, _ = h.admin("GET", f"/api/jobs/{sid}")
        if st == 200 and job.get("status") in ("SUCCEEDED", "FAILED", "STOPPED"):
            done = job.get("status") == "SUCCEEDED"
            break
        time.sleep(0.2)
    before = peak_before(c.head_pid)
    st, page, _ = h.admin("GET", f"/api/jobs/{sid}/logs?offset=0&limit=1000000000")
    # The log holds the job's 32 MiB and the job manager's closing line.
    logged = page.get("size", 0) if st == 200 else 0
    page_ok = st == 200 and len(page.get("logs", "")) <= MIB and logged >= size and page.get("more") is True
    st_j, _, _ = h.request("GET", f"/api/jobs/{sid}/logs", headers={"Authorization": f"Bearer {h.job_credential}"})
    t0 = time.time()
    out = subprocess.run([c.celer, "job", "logs", sid, "--address", c.address], env=dict(c.env, CELER_TEMP_DIR=c.head_dir),
                         capture_output=True, timeout=120)
    took = time.time() - t0
    grown = hwm(c.head_pid) - before
    whole = out.returncode == 0 and len(out.stdout) == logged and out.stdout[:65] == line.encode()
    check("F4 a 32 MiB log is read whole in pages of at most 1 MiB: the head's peak RSS grows by less than 24 MiB",
          r.returncode == 0 and done and page_ok and whole and grown < 24 * MIB and st_j == 404,
          f"job {sid} {'succeeded' if done else 'did not succeed'}; job J's credential gets {st_j} for it; "
          f"a page asked for 1 GB holds "
          f"{len(page.get('logs', '')) if isinstance(page, dict) else '?'} bytes of size {page.get('size') if isinstance(page, dict) else '?'}; "
          f"celer job logs wrote {len(out.stdout)} bytes in {took:.1f}s (rc {out.returncode}); the head's peak RSS "
          f"grew by {mib(grown)} (was +416 MiB), RSS now {mib(rss(c.head_pid))}")
    h.admin("DELETE", f"/api/jobs/{sid}")


def heartbeat_with_tasks(job, names, driver):
    """A job_heartbeat of job `job` reporting one submitted task per name (bytes)."""
    now = int(time.time() * 1000)
    changes = [[idv(random.getrandbits(128)), n, 0, 1, now, n] for n in names]
    counts = [len(names), 0, 0, 0, len(names), 0, [0] * 13, 0, changes, 0]
    return [idv(job), counts, driver]


def attack_hostile_strings(suite, check):
    """F5 and F6: job J reports tasks whose names are invalid UTF-8 and terminal escapes
    (its own heartbeat, as its driver sends it). The admin's /api/tasks and /api/jobs still
    answer 200 with JSON; `celer list tasks` and `celer job list` print no ESC or BEL."""
    h = Head(suite)
    c, jp = suite.cluster, suite.jpeer
    invalid = b"bad\xff\xfe\xc3(name"
    hostile = ("esc" + HOSTILE).encode()
    jp.send(c.head_endpoint, HEAD_COMPONENT, "job_heartbeat", heartbeat_with_tasks(suite.j, [invalid, hostile], NO_ADDR))
    seen, names = {}, []
    deadline = time.time() + 10
    while time.time() < deadline:
        st, tasks, _ = h.admin("GET", f"/api/tasks?job={suite.j:032x}&limit=50")
        seen["tasks"] = st
        names = [t.get("name", "") for t in tasks.get("tasks", [])] if isinstance(tasks, dict) else []
        if st == 200 and any(n.startswith("bad") for n in names) and any(n.startswith("esc") for n in names):
            break
        time.sleep(0.3)
    st_jobs, _, _ = h.admin("GET", "/api/jobs/")
    replaced = [n for n in names if n.startswith("bad")]
    check("F5 a task named with invalid UTF-8 by job J: /api/tasks and /api/jobs still answer 200 for the admin",
          seen.get("tasks") == 200 and st_jobs == 200 and replaced and "\ufffd" in replaced[0],
          f"/api/tasks {seen.get('tasks')}, /api/jobs/ {st_jobs}; the name served as {replaced[:1]!r}")
    # A submitted job whose entrypoint and submission id carry the escapes too.
    sid = "esc-" + str(random.getrandbits(32))
    st, _, _ = h.admin("POST", "/api/jobs/", json.dumps({"entrypoint_argv": ["/bin/echo", HOSTILE], "submission_id": sid}),
                       {"Content-Type": "application/json"})
    env = dict(c.env, CELER_TEMP_DIR=c.head_dir)
    outs = {}
    for args in (["list", "tasks", "--job", f"{suite.j:032x}"], ["job", "list"], ["job", "status", sid], ["list", "jobs"]):
        r = subprocess.run([c.celer, *args, "--address", c.address], env=env, capture_output=True, timeout=60)
        outs[" ".join(args[:2])] = r
    leaks = [k for k, r in outs.items() if b"\x1b" in r.stdout + r.stderr or b"\x07" in r.stdout + r.stderr]
    shown = [k for k, r in outs.items() if b"\\x1b]0;pwned\\x07" in r.stdout]
    check("F6 job-controlled names with terminal escapes: celer list tasks, celer job list/status print no ESC or BEL",
          st == 200 and not leaks and all(r.returncode == 0 for r in outs.values()) and len(shown) >= 3,
          f"commands {list(outs)}; with a raw ESC/BEL: {leaks or 'none'}; the escapes shown as text in {shown}")
    h.admin("POST", f"/api/jobs/{sid}/stop", "", {"Content-Type": "application/json"})


ATTACKS = [attack_csrf, attack_bodies_before_auth, attack_slow_senders, attack_large_log, attack_hostile_strings]
