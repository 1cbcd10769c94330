"""Attacker suite, section H: one arena per job: job J maps only its own objects (issue 34).

Each attack is a function of (suite, check): `suite` is attacker_suite.Suite (its cluster,
the victim job K, the attacker job J and its JobPeer), `check(name, ok, detail)` records
PASS/FAIL. ATTACKS lists them in the order they run.

Job K's stored object (the victim's 4 MiB put, in the store of the head's node) holds bytes
i * 13 + 1 (mod 256); every other job's holds i * 29 + 1 (tests/security/victim.cpp), so
memory that holds K's bytes is found by searching for a window of them.
"""

import mmap
import os
import random
import socket
import stat
import struct
import time

from attack_tools import idv, log_lines

TITLE = "H. the object store from job J's processes"

# A window of job K's stored object: its bytes repeat every 256, so any 512 in a row of them
# hold this one.
K_BYTES = bytes((i * 13 + 1) & 0xFF for i in range(512))
# How much of each mappable fd is searched (the object store's memfd is sized to its whole
# capacity, sparse; K's object is among the first written in it).
SEARCH_BYTES = 256 << 20
TICKET_BYTES = 32
REPLY_FIELDS = ("request_id", "ok", "offset", "size", "arena", "capacity", "pulled", "fail",
                "ticket", "socket")


def _store_create(suite, size=4096):
    """store_create as job J at the head's node (where K's object lives): the reply, as a
    dict of store_reply's fields, or None."""
    c, jp = suite.cluster, suite.jpeer
    oid = random.getrandbits(128) | 1
    jp.send(c.head_endpoint, c.head_node_id, "store_create",
            [random.getrandbits(32), jp.address, idv(oid), size, 0, jp.address, idv(suite.j),
             False, 0])
    r = jp.reply("store_reply")
    if r is None:
        return oid, None
    return oid, dict(zip(REPLY_FIELDS, r))


def _release(suite, oid):
    c, jp = suite.cluster, suite.jpeer
    jp.send(c.head_endpoint, c.head_node_id, "store_release", [idv(oid), jp.address, True])


def _present(sock_name, arena, ticket):
    """Presents `ticket` for `arena` at the node's abstract socket: (fd or None, answer)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect("\0" + sock_name)
        s.sendall(struct.pack("<Q", arena) + ticket)
        msg, fds, _, _ = socket.recv_fds(s, 1024, 1)
        rest = msg
        while fds == [] and msg:
            msg = s.recv(1024)
            rest += msg
        return (fds[0] if fds else None), rest[:200]
    finally:
        s.close()


def _holds_k(fd):
    """Whether the first SEARCH_BYTES of what `fd` maps hold job K's bytes."""
    size = os.fstat(fd).st_size
    if size <= 0:
        return False
    m = mmap.mmap(fd, min(size, SEARCH_BYTES), mmap.MAP_SHARED, mmap.PROT_READ)
    try:
        return m.find(K_BYTES) >= 0
    finally:
        m.close()


def _j_credentials(suite):
    """(uid, gid, groups) of one of job J's worker processes (as J's code runs)."""
    for pid, (job, _, _) in suite.cluster.workers().items():
        if int(job, 16) != suite.j:
            continue
        uid = gid = None
        groups = []
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Uid:"):
                    uid = int(line.split()[1])
                elif line.startswith("Gid:"):
                    gid = int(line.split()[1])
                elif line.startswith("Groups:"):
                    groups = [int(g) for g in line.split()[1:]]
        return pid, uid, gid, groups
    return None, os.getuid(), os.getgid(), os.getgroups()


def _as_j(suite, fn):
    """Runs fn() in a child that takes J's worker's uid, gid and groups; its result (a short
    text) through a pipe."""
    pid_j, uid, gid, groups = _j_credentials(suite)
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(r)
        try:
            if os.geteuid() != uid:  # as root; run by J's own user (runuser), it is J's already
                os.setgroups(groups)
                os.setgid(gid)
                os.setuid(uid)
            out = fn()
        except Exception as e:  # reported, never raised in the child
            out = f"error {type(e).__name__}: {e}"
        os.write(w, out.encode()[:60000])
        os._exit(0)
    os.close(w)
    chunks = []
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    os.waitpid(child, 0)
    return pid_j, uid, b"".join(chunks).decode(errors="replace")


def h1_no_path_and_no_agent_fd(suite, check):
    c = suite.cluster
    oid, r = _store_create(suite)
    ok = r is not None and r["ok"] is True
    text = repr(r)
    check("H1 control: job J's store_create at the head's node is granted", ok,
          f"arena {r['arena'] if r else None}, socket {r['socket'] if r else None!r}")
    if r:
        _release(suite, oid)
    check("H1a no store reply carries a path: an arena id, a ticket and a socket's name",
          ok and "/proc" not in text and "/" not in (r["socket"] or "") and
          len(r["ticket"] or "") == TICKET_BYTES,
          f"reply fields {sorted(k for k in r) if r else None}; '/proc' in it: {'/proc' in text}")

    # Every fd of the node agents, opened as J's worker is (its uid, gid and groups).
    def try_fds():
        lines = []
        for agent in (c.head_pid, c.node_pid):
            try:
                names = os.listdir(f"/proc/{agent}/fd")
            except OSError as e:
                lines.append(f"{agent}: fd list closed ({e.strerror})")
                continue
            opened = rw = holds = 0
            for n in names:
                path = f"/proc/{agent}/fd/{n}"
                for flags, kind in ((os.O_RDWR, "rw"), (os.O_RDONLY, "ro")):
                    try:
                        fd = os.open(path, flags | os.O_CLOEXEC | os.O_NONBLOCK)
                    except OSError:
                        continue
                    try:
                        opened += 1
                        rw += kind == "rw"
                        if stat.S_ISREG(os.fstat(fd).st_mode) and _holds_k(fd):
                            holds += 1
                    except (OSError, ValueError):
                        pass
                    finally:
                        os.close(fd)
                    break
            lines.append(f"{agent}: {len(names)} fds, {opened} opened ({rw} read-write), "
                         f"{holds} map job K's object")
        return "; ".join(lines)

    pid_j, uid, said = _as_j(suite, try_fds)
    k_found = any(" 0 map job K's object" not in part for part in said.split("; ")
                  if "opened" in part)
    check("H1b no fd of the node agents that job J's process opens maps job K's object",
          "error" not in said and not k_found,
          f"as J's worker (pid {pid_j}, uid {uid}): {said}")


def h2_tickets(suite, check):
    c = suite.cluster
    oid, r = _store_create(suite)
    if not r or not r["ok"]:
        check("H2 ran", False, f"job J's store_create was not granted: {r}")
        return
    _release(suite, oid)
    sock, arena, ticket = r["socket"], r["arena"], r["ticket"].encode()
    log = c.head_log

    def refused(name, arena_id, t):
        since = len(log_lines(log))
        time.sleep(0.25)  # under the log's 5 lines a second
        fd, said = _present(sock, arena_id, t)
        if fd is not None:
            os.close(fd)
        line = suite.log_has(log, r"permission_denied: pid \d+ \(uid \d+\) asked for an object arena", since)
        check(name, fd is None and said[:1] == b"n" and line,
              f"fd received: {fd is not None}; answer {said[:90]!r}; log: {line!r}")

    # Control: J's own ticket gets J's own arena, which holds nothing of K's.
    fd, said = _present(sock, arena, ticket)
    holds = _holds_k(fd) if fd is not None else None
    if fd is not None:
        os.close(fd)
    check("H2 control: job J's own ticket gets job J's arena, and it holds none of job K's bytes",
          fd is not None and holds is False,
          f"fd received: {fd is not None}; K's bytes in it: {holds}")
    refused("H2a a forged ticket is refused, with no fd", arena,
            bytes(random.getrandbits(8) % 16 + 48 for _ in range(TICKET_BYTES)))
    refused("H2b a used ticket presented again is refused, with no fd", arena, ticket)
    # K's tickets travel only to K's processes, on K's encrypted connection: J cannot see
    # one. A fresh ticket of J's, presented for another arena (K's, guessed): refused.
    _, r2 = _store_create(suite)
    if r2 and r2["ok"]:
        refused("H2c job J's ticket presented for another arena is refused, with no fd",
                r2["arena"] ^ 1, r2["ticket"].encode())
        refused("H2d that ticket is spent: presented again for its own arena, refused",
                r2["arena"], r2["ticket"].encode())
    refused("H2e a short request (no whole ticket) is refused, with no fd", arena, b"x" * 5)


def h3_victim_intact(suite, check):
    suite.victim_intact("H")
    suite.serving("H")


ATTACKS = [h1_no_path_and_no_agent_fd, h2_tickets, h3_victim_intact]
