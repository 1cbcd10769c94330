"""Attacker suite, section G: placement groups, resource amounts, what a job reports, cross-job queries, names, packages (issue 34).

Each attack is a function of (suite, check): `suite` is attacker_suite.Suite (its cluster,
the victim job K, the attacker job J and its JobPeer), `check(name, ok, detail)` records
PASS/FAIL. ATTACKS lists them in the order they run.

Every message here is one J's connection may send (the transport admits it: its job fields
name J); what refuses it is the head's or the node's check of what it names.
"""

import os
import random
import re
import tempfile
import time

from attack_tools import (MIB, NIL, NO_ADDR, alive, hwm, idv, log_lines, mib, peak_before, rss,
                          task_spec)

TITLE = "G. job J's messages about what is not its own"

HEAD = (0, 1)
UNIT = 10000  # fixed-point resource units (protocol/resources.hpp)
INVALID_ARGUMENT, PERMISSION_DENIED = 2, 6  # celer::error_code
PLACEMENT_GROUP = 4  # scheduling_strategy::kind::placement_group


def _short(x):
    return f"{x:032x}"[:8]


def spec(job, owner, *, function="count_hits", kind=0, actor=0, resources=None, group=None,
         bundle=-1, package="", name="", name_space=""):
    """A full task_spec (protocol 19): attack_tools.task_spec and the fields after it."""
    s = task_spec(job, owner, function=function, kind=kind, actor=actor)
    if resources is not None:
        s[4] = [resources]
    if name:
        s[7] = name
    if group is not None:
        s[13] = [PLACEMENT_GROUP, NIL, False, "", 0, [], idv(group), bundle]
    # max_restarts, restarts, restore_method, max_task_retries, attempt, package, name_space
    return s + [0, 0, "", 0, 1, package, name_space]


def _sent(suite, name, endpoint, dest, fields, log, pattern, timeout=3.0):
    """Sends as J; the log line (matching `pattern`) of the process that refused it, or None."""
    since = len(log_lines(log))
    time.sleep(0.25)  # under the refusal log's 5 lines a second
    suite.jpeer.send(endpoint, dest, name, fields)
    return suite.log_has(log, pattern, since, timeout)


def _workers_of(suite, job):
    return {p for p, w in suite.cluster.workers().items() if w[0] == f"{job:032x}"}


def _cpu_used(suite):
    """'CPU used/total' of each node in `celer status`."""
    return re.findall(r"CPU (-?[\d.e+]+)/(-?[\d.e+]+)", suite.cluster.status().stdout)


def group_bundles(suite, check):
    """G1: job K's placement-group bundle used by job J."""
    c, jp, v = suite.cluster, suite.jpeer, suite.victim
    jshort = _short(suite.j)
    head, node = c.head_endpoint, c.node_endpoint
    before_j = _workers_of(suite, suite.j)
    slot = {"victim_slot": UNIT}
    pattern = rf"permission_denied: job {jshort} asked about running \S+ in (bundle \d+ of )?placement group"
    for what, ep, dest, log in (("the head", head, HEAD, c.head_log),
                                ("the head's node", head, c.head_node_id, c.head_log),
                                ("the second node", node, c.node_id, c.node_log)):
        lease = spec(suite.j, jp.address, resources=slot, group=v.group, bundle=0)
        line = _sent(suite, "request_lease", ep, dest, [lease, False, []], log, pattern)
        got = [b for n, b in jp.replies(1.5) if n == "lease_reply"]
        # The node holding K's bundle refuses it itself; the other has no such bundle (it
        # refuses it as not reserved there, or the head does).
        check(f"G1 request_lease from job J in job K's placement group bundle, to {what}, is refused",
              (line or got) and not any(b[1] for b in got),
              f"log: {line!r}; lease replies to J (ok, code, why): "
              f"{[(b[1], b[6][1], b[6][2][:90]) for b in got]}")
    actor = random.getrandbits(128)
    create = spec(suite.j, jp.address, function="make_counter", kind=1, actor=actor, resources=slot,
                  group=v.group, bundle=-1)
    line = _sent(suite, "create_actor", head, HEAD, [5, jp.address, create], c.head_log, pattern)
    r = jp.reply("create_actor_reply", 3.0)
    check("G1b create_actor from job J in job K's placement group is refused",
          line and r is not None and r[1] is False and r[2][1] == PERMISSION_DENIED,
          f"log: {line!r}; reply ok={r[1] if r else None} code={r[2][1] if r else None}: "
          f"{r[2][2] if r else 'no reply'!r}")
    time.sleep(0.5)
    after_j = _workers_of(suite, suite.j)
    listed = re.search(rf"group {v.group:032x} .*CREATED", c.groups().stdout) is not None
    check("G1c no worker of job J started in job K's bundle; K's group is unchanged",
          after_j <= before_j and listed,
          f"J's workers: {len(before_j)} before, {len(after_j)} after; K's group CREATED: {listed}")
    # The listing: J's own query shows none of K's groups (J's own group only).
    jp.send(head, HEAD, "placement_group_query", [21, jp.address, NIL, NIL])
    r = jp.reply("placement_group_list", 3.0)
    groups = [g[0] for g in r[1]] if r else None
    jp.send(head, HEAD, "placement_group_query", [22, jp.address, idv(v.group), NIL])
    r2 = jp.reply("placement_group_list", 3.0)
    foreign = [g for g in (r[1] if r else []) if (g[4][0] << 64 | g[4][1]) != suite.j]
    check("G1d placement_group_query from job J lists none of job K's groups",
          r is not None and r2 is not None and not foreign and not r2[1] and
          idv(v.group) not in groups,
          f"J sees {len(groups) if groups is not None else 'no answer'} group(s), "
          f"{len(foreign)} of another job; asked for K's group by id: "
          f"{len(r2[1]) if r2 else 'no answer'} listed")


def resource_amounts(suite, check):
    """G2: negative, NaN, infinite and huge amounts."""
    c, jp = suite.cluster, suite.jpeer
    jshort = _short(suite.j)
    head, node = c.head_endpoint, c.node_endpoint
    before = _cpu_used(suite)
    targets = (("the head", head, HEAD, c.head_log), ("the second node", node, c.node_id, c.node_log))
    for label, amounts in (("-100 CPUs", {"CPU": -100 * UNIT}), ("-100 GPUs", {"GPU": -100 * UNIT}),
                           ("2^63-1 GPUs", {"GPU": (1 << 63) - 1}),
                           ("10^7 CPUs", {"CPU": 10_000_000 * UNIT})):
        for what, ep, dest, log in targets:
            lease = spec(suite.j, jp.address, resources=amounts)
            line = _sent(suite, "request_lease", ep, dest, [lease, False, []], log,
                         rf"invalid_argument: .*job {jshort}.*outside 0 to")
            got = [b for n, b in jp.replies(1.0) if n == "lease_reply"]
            check(f"G2 request_lease for {label} from job J, to {what}, is refused (invalid_argument)",
                  line and got and all(b[1] is False and b[6][1] == INVALID_ARGUMENT for b in got),
                  f"log: {line!r}; replies: {[(b[1], b[6][1], b[6][2][:80]) for b in got]}")
    # A float where an integer amount belongs: the message does not decode.
    for label, value in (("NaN", float("nan")), ("inf", float("inf")), ("1e300", 1e300)):
        lease = spec(suite.j, jp.address, resources={"GPU": value})
        line = _sent(suite, "request_lease", head, HEAD, [lease, False, []], c.head_log,
                     rf"dropped a message from job {jshort}")
        got = [b for n, b in jp.replies(0.5) if n == "lease_reply"]
        check(f"G2b request_lease for {label} GPUs from job J is dropped undecoded",
              line and not got, f"log: {line!r}; lease replies: {len(got)}")
    actor = random.getrandbits(128)
    create = spec(suite.j, jp.address, function="make_counter", kind=1, actor=actor,
                  resources={"CPU": -100 * UNIT})
    jp.send(head, HEAD, "create_actor", [6, jp.address, create])
    r = jp.reply("create_actor_reply", 3.0)
    check("G2c create_actor for -100 CPUs from job J is refused (invalid_argument)",
          r is not None and r[1] is False and r[2][1] == INVALID_ARGUMENT,
          f"reply: {r[2][2] if r else 'none'!r}")
    gid = random.getrandbits(128)
    jp.send(head, HEAD, "create_placement_group",
            [7, jp.address, idv(gid), "neg", 0, [[[{"CPU": -4 * UNIT}], spec(0, NO_ADDR)[13]]], idv(suite.j)])
    r = jp.reply("placement_group_reply", 3.0)
    check("G2d create_placement_group with a bundle of -4 CPUs from job J is refused (invalid_argument)",
          r is not None and r[1] is False and r[2][1] == INVALID_ARGUMENT, f"reply: {r[2][2] if r else 'none'!r}")
    time.sleep(0.5)
    after = _cpu_used(suite)
    check("G2e celer status shows every node's CPUs unchanged", before and after == before,
          f"CPU used/total before {before}, after {after}")


def report_sizes(suite, check):
    """G3: what a job reports in its heartbeat: 100 rows of 1 MiB."""
    c, jp = suite.cluster, suite.jpeer
    before = peak_before(c.head_pid)
    rss_before = rss(c.head_pid)
    half = "x" * (MIB // 2)
    sent = 0
    for batch in range(10):
        rows = []
        for i in range(10):
            # task_event: task, function, state (3 failed), attempt, at_ms, detail
            rows.append([idv(random.getrandbits(128)), half, 3, 1, int(time.time() * 1000), half])
        counts = [10, 0, 10, 0, 0, 0, [], 0, rows, 0]
        jp.send(c.head_endpoint, HEAD, "job_heartbeat", [idv(suite.j), counts, NO_ADDR])
        sent += len(rows)
        time.sleep(0.2)
    time.sleep(1.0)
    grew, kept = hwm(c.head_pid) - before, rss(c.head_pid) - rss_before
    check(f"G3 {sent} task rows of 1 MiB in job J's heartbeats: the head's memory stays bounded",
          grew < 64 * MIB and kept < 32 * MIB,
          f"peak RSS grew by {mib(grew)} (limit 64 MiB), RSS by {mib(kept)} (limit 32 MiB; "
          "unbounded, the rows alone kept 100 MiB)")
    out = c.run(["list", "tasks", "--address", c.address, "--job", f"{suite.j:032x}", "--limit", "100"],
                timeout=30).stdout
    longest = max((len(l) for l in out.splitlines()), default=0)
    marked = out.count("...[truncated]")
    check("G3b the rows are kept cut short (function 256 bytes, detail 1,024), with a marker",
          marked >= 2 * sent and longest < 1200,
          f"celer list tasks --job J: {len(out)} bytes, {marked} fields marked ...[truncated], "
          f"longest line {longest} bytes")


def cross_job_queries(suite, check):
    """G4: status, actor subscriptions, re-creating an actor, why an actor waits."""
    c, jp, v = suite.cluster, suite.jpeer, suite.victim
    jshort = _short(suite.j)
    head = c.head_endpoint
    jp.send(head, HEAD, "status_query", [31, jp.address, NIL])
    r = jp.reply("status_reply", 3.0)
    waiting_jobs = set()
    if r:
        for n in r[1]:
            for w in n[12]:
                waiting_jobs.add(w[2][0] << 64 | w[2][1])
    admin = c.status().stdout
    m = re.search(r"actors: (\d+) alive", admin)
    check("G4 status_query from job J counts only J's actors and lists only J's waiting work",
          r is not None and r[2] <= 1 and waiting_jobs <= {suite.j} and len(r[1]) == 2,
          f"J sees {len(r[1]) if r else 0} nodes, {r[2] if r else None} actor(s) alive (its own: 1; "
          f"the admin sees {m.group(1) if m else '?'}), waiting work of jobs {sorted(map(_short, waiting_jobs))}")
    # subscribe_actor to K's actor, naming J's inbox and then K's driver as the subscriber.
    for who, address in (("J's inbox", jp.address),
                         ("K's driver", [idv(random.getrandbits(128)), suite.victim_endpoint])):
        line = _sent(suite, "subscribe_actor", head, HEAD, [idv(v.actor), address, NIL], c.head_log,
                     rf"permission_denied: job {jshort} asked about subscribing to actor")
        got = [b for n, b in jp.replies(1.0) if n == "actor_update"]
        check(f"G4b subscribe_actor to job K's actor from job J (subscriber: {who}) is refused, nothing sent",
              line and not got, f"log: {line!r}; actor_updates to J: {len(got)}")
    create = spec(suite.j, jp.address, function="make_counter", kind=1, actor=v.actor)
    line = _sent(suite, "create_actor", head, HEAD, [8, jp.address, create], c.head_log,
                 rf"permission_denied: job {jshort} asked about creating again actor")
    r = jp.reply("create_actor_reply", 3.0)
    check("G4c create_actor with job K's actor's id, from job J, is refused",
          line and r is not None and r[1] is False and r[2][1] == PERMISSION_DENIED,
          f"log: {line!r}; reply ok={r[1] if r else None}: {r[2][2] if r else 'none'!r}")
    jp.send(head, HEAD, "explain_placement", [9, jp.address, idv(v.actor), [{}], spec(0, NO_ADDR)[13], NIL])
    r = jp.reply("placement_explained", 3.0)
    check("G4d explain_placement of job K's actor, from job J, is refused",
          r is not None and "permission_denied" in r[1], f"answer: {r[1] if r else None!r}")
    ok, said = v.check()
    check("G4e job K's actor still answers K, as before", ok, f"K: '{said}'")


def actor_names(suite, check):
    """G5: J takes the name of K's actor, and a name K wants next."""
    c, jp, v = suite.cluster, suite.jpeer, suite.victim
    head = c.head_endpoint
    kp = type(jp)(suite.ctx, c, suite.k)  # K's own credential: K's lookups
    try:
        # Resources that exist but are all reserved (victim_slot: K's and J's groups hold
        # both): the actors wait, named, and start no process.
        slot = {"victim_slot": UNIT}
        squat = random.getrandbits(128)
        jp.send(head, HEAD, "create_actor",
                [11, jp.address, spec(suite.j, jp.address, function="make_counter", kind=1, actor=squat,
                                      resources=slot, name="victim-counter")])
        r = jp.reply("create_actor_reply", 3.0)
        taken = r is not None and r[1] is True
        kp.send(head, HEAD, "lookup_actor", [12, kp.address, "victim-counter", idv(suite.k), ""])
        found = kp.reply("lookup_actor_reply", 3.0)
        k_gets = found[2][0] << 64 | found[2][1] if found and found[1] else None
        check("G5 job J names an actor as job K's actor is named: K's lookup still finds K's actor",
              k_gets == v.actor,
              f"J's create accepted (in J's namespace): {taken}; K's lookup: "
              f"{f'{k_gets:032x}' if k_gets else 'not found'} (K's actor {v.actor:032x})")
        # J takes a name first; K then creates it: in K's own namespace, K's.
        want = f"k-wants-{random.getrandbits(32):08x}"
        first = random.getrandbits(128)
        jp.send(head, HEAD, "create_actor",
                [13, jp.address, spec(suite.j, jp.address, function="make_counter", kind=1, actor=first,
                                      resources=slot, name=want)])
        jp.reply("create_actor_reply", 3.0)
        mine = random.getrandbits(128)
        kp.send(head, HEAD, "create_actor",
                [14, kp.address, spec(suite.k, kp.address, function="make_counter", kind=1, actor=mine,
                                      resources=slot, name=want)])
        r = kp.reply("create_actor_reply", 3.0)
        kp.send(head, HEAD, "lookup_actor", [15, kp.address, want, idv(suite.k), ""])
        found = kp.reply("lookup_actor_reply", 3.0)
        k_gets = found[2][0] << 64 | found[2][1] if found and found[1] else None
        check("G5b a name job J took first is still job K's to take in K's namespace",
              r is not None and r[1] is True and k_gets == mine,
              f"K's create: {r[1] if r else None} {r[2][2] if r and not r[1] else ''}; K's lookup finds "
              f"{'its own' if k_gets == mine else k_gets}")
        # J naming K's job namespace by hand reaches a shared namespace of that name, not K's.
        jp.send(head, HEAD, "lookup_actor", [16, jp.address, "victim-counter", idv(suite.j), f"job:{suite.k:032x}"])
        found = jp.reply("lookup_actor_reply", 3.0)
        jp.send(head, HEAD, "lookup_actor", [17, jp.address, "victim-counter", idv(suite.j), ""])
        own = jp.reply("lookup_actor_reply", 3.0)
        own_gets = own[2][0] << 64 | own[2][1] if own and own[1] else None
        check("G5c job J's lookups of K's actor's name never find K's actor",
              found is not None and not found[1] and own_gets != v.actor,
              f"in 'job:<K>': found {found[1] if found else None}; in J's own: "
              f"{'J squat' if own_gets == squat else own_gets}")
        for peer, a in ((jp, squat), (jp, first), (kp, mine)):
            peer.send(head, HEAD, "kill_actor", [idv(a), "attack cleanup", NIL])
    finally:
        kp.close()


def cluster_subscriptions(suite, check):
    """G6: 100,000 subscribe_cluster from job J."""
    c, jp = suite.cluster, suite.jpeer
    jshort = _short(suite.j)
    tables = os.path.join(c.session, "head")

    def du(path):
        total = 0
        for root, _, files in os.walk(path):
            for f in files:
                try:
                    total += os.path.getsize(os.path.join(root, f))
                except OSError:
                    pass
        return total
    before, disk_before = peak_before(c.head_pid), du(tables)
    since = len(log_lines(c.head_log))
    n = 100_000
    t0 = time.time()
    for i in range(n):
        endpoint = f"tcp://127.0.0.1:{1 + i % 60000}/{i}#job={suite.j:032x}"
        jp.send(c.head_endpoint, HEAD, "subscribe_cluster", [[idv(random.getrandbits(128)), endpoint], NIL])
    took = time.time() - t0
    # The head has read them all once it answers a query sent after them.
    jp.send(c.head_endpoint, HEAD, "status_query", [41, jp.address, NIL])
    answered = jp.reply("status_reply", 60.0) is not None
    line = suite.log_has(c.head_log, rf"resource_exhausted: subscribe_cluster from job {jshort}", since, 5.0)
    grew, disk = hwm(c.head_pid) - before, du(tables) - disk_before
    check(f"G6 {n:,} subscribe_cluster from job J ({took:.1f}s): the extra ones are refused",
          answered and line, f"head answers after: {answered}; log: {line!r}")
    check("G6b the head's memory and its tables on disk stay bounded",
          grew < 64 * MIB and disk < 16 * MIB,
          f"peak RSS grew by {mib(grew)} (limit 64 MiB); tables grew by {mib(disk)} (limit 16 MiB)")


def packages(suite, check):
    """G7: J's workers in job K's working directory, named by its digest."""
    c, jp = suite.cluster, suite.jpeer
    jshort = _short(suite.j)
    fan_out = os.path.abspath(suite.args.fan_out)
    # A job submitted with a working directory: its workers' nodes unpack it.
    wd = tempfile.mkdtemp(prefix="celer-wd.", dir=suite.work)
    with open(os.path.join(wd, "secret.txt"), "w") as f:
        f.write("job K's data\n")
    out = c.run(["submit", "--address", c.address, "--working-dir", wd, "--follow", "--",
                 fan_out, "--tasks", "8", "--darts-per-task", "1000"], timeout=120)
    # Each node unpacks a package into <its session>/workdirs/<digest>/.
    digest, where = None, None
    for session, log in ((c.session, c.head_log), (c.node_session, c.node_log)):
        root = os.path.join(session, "workdirs")
        for d in (os.listdir(root) if os.path.isdir(root) else []):
            if re.fullmatch(r"[0-9a-f]{32}", d) and os.path.exists(os.path.join(root, d, "secret.txt")):
                digest, where = d, log
    if digest is None:
        check("G7 setup: a job submitted with --working-dir had its package unpacked on a node", False,
              f"celer submit: rc {out.returncode} {out.stdout[-300:]} {out.stderr[-300:]}")
    else:
        ep, dest = ((c.head_endpoint, c.head_node_id) if where == c.head_log
                    else (c.node_endpoint, c.node_id))
        before_j = _workers_of(suite, suite.j)
        # No resources: it is dispatched at once however busy the node is (on that node, or
        # on the other if it goes through the head: each asks the head about the package).
        lease = spec(suite.j, jp.address, resources={}, package=digest)
        pattern = rf"permission_denied: job {jshort} named the working directory {digest}"
        since = {log: len(log_lines(log)) for log in (c.head_log, c.node_log)}
        time.sleep(0.25)
        jp.send(ep, dest, "request_lease", [lease, False, []])
        got = [b for n, b in jp.replies(3.0) if n == "lease_reply"]
        line = (suite.log_has(c.head_log, pattern, since[c.head_log], 2.0) or
                suite.log_has(c.node_log, pattern, since[c.node_log], 0.5))
        after_j = _workers_of(suite, suite.j)
        in_wd = [p for p in after_j if digest in (os.readlink(f"/proc/{p}/cwd") if alive(p) else "")]
        check("G7 request_lease from job J naming job K's unpacked working directory is refused",
              line and got and all(b[1] is False for b in got) and after_j <= before_j and not in_wd,
              f"log: {line!r}; replies: {[(b[1], b[6][2][:100]) for b in got]}; J's workers "
              f"{len(before_j)} -> {len(after_j)}, in K's folder: {len(in_wd)}")
    made_up = "%032x" % random.getrandbits(128)
    lease = spec(suite.j, jp.address, resources={}, package=made_up)
    jp.send(c.node_endpoint, c.node_id, "request_lease", [lease, False, []])
    got = [b for n, b in jp.replies(3.0) if n == "lease_reply"]
    check("G7b request_lease from job J naming a made-up working directory is refused",
          got and all(b[1] is False for b in got),
          f"replies: {[(b[1], b[6][2][:100]) for b in got]}")


ATTACKS = [group_bundles, resource_amounts, report_sizes, cross_job_queries, actor_names,
           cluster_subscriptions, packages]
