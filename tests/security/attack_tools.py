"""Tools of the attacker suite (attacker_suite.py): cluster keys derived from a token as
runtime/src/transport/credentials.cpp derives them, protocol messages encoded as
runtime/src/transport/wire.cpp encodes them (docs/protocol.md, "Wire encoding"), and what
/proc says about a process: memory, descriptors, sockets, children, environment."""

import hashlib
import os
import random
import re

import msgpack
import nacl.bindings

HERE = os.path.dirname(os.path.abspath(__file__))
MESSAGES_DEF = os.path.join(HERE, "..", "..", "runtime", "src", "protocol", "messages.def")
MIB = 1 << 20
U64 = (1 << 64) - 1

# ---------------------------------------------------------------------------------------
# Keys, as runtime/src/transport/credentials.cpp derives them


def blake(data, key):
    return hashlib.blake2b(data, digest_size=32, key=key).digest()


class Keys:
    def __init__(self, token):
        self.token = token
        self.secret = blake(token.encode(), b"celer-token-v1")
        self.cluster_public, self.cluster_secret = nacl.bindings.crypto_box_seed_keypair(
            blake(b"celer/cluster/v1", self.secret))

    def job_secret(self, job):
        return blake(b"celer/job/v1" + job.to_bytes(16, "big"), self.secret)

    def job_keypair(self, job):
        return nacl.bindings.crypto_box_seed_keypair(
            blake(b"celer/job-key/v1", self.job_secret(job)))


def random_keypair():
    return nacl.bindings.crypto_box_keypair()


# ---------------------------------------------------------------------------------------
# The wire (docs/protocol.md, "Wire encoding")


def message_tags():
    tags = {}
    with open(MESSAGES_DEF) as f:
        for line in f:
            m = re.match(r"CELER_MESSAGE\((\w+),", line)
            if m:
                tags[m.group(1)] = len(tags)
    return tags


TAGS = message_tags()
PROTOCOL = 8  # replaced by what `celer --version` says in main()


def idv(x):
    if isinstance(x, tuple):
        return list(x)
    return [x >> 64, x & U64]


def id_bytes(x):
    hi, lo = idv(x)
    return hi.to_bytes(8, "big") + lo.to_bytes(8, "big")


def hex_id(h):
    return int(h, 16)


def addr(i, endpoint):
    return [idv(i), endpoint]


NIL = [0, 0]
NO_ADDR = [NIL, ""]


def resources(**amounts):
    return [{k: v for k, v in amounts.items()}]


def placement():
    # how, node, soft, accelerator_type, gpu_memory_bytes, labels, group, bundle
    return [0, NIL, False, "", 0, [], NIL, -1]


def task_spec(job, owner, function="count_hits", kind=0, actor=0, args=None, binary="/bin/true",
              env_vars=None):
    # id, kind, function, args, resources, owner, actor, actor_name, class_type,
    # max_concurrency, job, binary, durable, where, priority, preemptible, grace
    spec = [idv(random.getrandbits(128)), kind, function, args or [], resources(CPU=10000),
            owner, idv(actor), "", "", 1, idv(job), binary, False, placement(), 0, False, 0]
    if env_vars is not None:
        # max_restarts, restarts, restore_method, max_task_retries, attempt, package,
        # name_space, num_returns, max_pending_calls, generator, concurrency_groups,
        # method_groups, concurrency_group, namespace_named, max_retries, env_vars (22)
        spec += [0, 0, "", 0, 1, "", "", 1, -1, 0, {}, {}, "", False, 0, env_vars]
    return spec


def pack(obj):
    return msgpack.packb(obj, use_bin_type=True)


def frames_of(name, body_fields, bulk=()):
    """A message's frames after its kind and destination: the message frame (body, header,
    the header's length: docs/protocol.md), then the bulk frames."""
    body = pack(body_fields)
    header = pack(["celer", PROTOCOL, TAGS[name], len(body), len(bulk)])
    return [body + header + bytes([len(header)]), *bulk]


def split_message(frame):
    """The (header, body) of a message frame (without kind and destination)."""
    n = frame[-1]
    return msgpack.unpackb(frame[-1 - n:-1], raw=False), frame[:-1 - n]


def hello(register_job="", sender="attacker"):
    return [b"H", pack(["celer", PROTOCOL, register_job, sender])]


# ---------------------------------------------------------------------------------------
# Processes: memory, descriptors, logs


def proc_status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0]) * 1024
    return out


def rss(pid):
    return proc_status(pid)["VmRSS"]


def hwm(pid):
    return proc_status(pid)["VmHWM"]


def reset_hwm(pid):
    """Resets VmHWM to the current RSS (Linux 4.0+, own processes or root), so that each
    attack's peak is its own; False where the kernel refuses (then peaks accumulate, which
    only makes the bounds stricter)."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_before(pid):
    reset_hwm(pid)
    return hwm(pid)


def fds(pid):
    """Open descriptors of `pid`; -1 where /proc refuses (a daemon is not dumpable: only root
    may list them)."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except PermissionError:
        return -1


def alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def mib(n):
    return f"{n / MIB:.1f} MiB"


def log_lines(path):
    try:
        with open(path, errors="replace") as f:
            return f.read().splitlines()
    except OSError:
        return []


def socket_inodes(pid):
    out = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            out.add(link[8:-1])
    return out


def tcp_sockets(pid):
    """(local port, remote port, state) of the process's IPv4 TCP sockets."""
    inodes = socket_inodes(pid)
    out = []
    with open(f"/proc/{pid}/net/tcp") as f:
        next(f)
        for line in f:
            p = line.split()
            if p[9] in inodes:
                out.append((int(p[1].split(":")[1], 16), int(p[2].split(":")[1], 16), p[3]))
    return out


def listening_ports(pid):
    return [lp for lp, _, st in tcp_sockets(pid) if st == "0A"]


def children(pid):
    """Child processes of `pid` (forked by any of its threads)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(d))
        except (OSError, ValueError, IndexError):
            pass
    return out


def environ(pid):
    with open(f"/proc/{pid}/environ", "rb") as f:
        return f.read()


def env_var(raw, name):
    for kv in raw.split(b"\0"):
        if kv.startswith(name.encode() + b"="):
            return kv.split(b"=", 1)[1].decode()
    return None


