"""Attacker suite, section I: what a job's own code reaches on the machine (issue 34).

Each attack is a function of (suite, check): `suite` is attacker_suite.Suite (its cluster,
the victim job K, the attacker job J and its JobPeer), `check(name, ok, detail)` records
PASS/FAIL. ATTACKS lists them in the order they run.

I1-I5 run as a *submitted* job: its driver (the head's job manager starts it, confined as
every job's processes are) is a Python program that tries what issue 34 found possible --
the token through `../../../token` and by its path, another job's credential through
/proc/PID/environ, the daemons' memory and descriptors, signals to the daemons and to K's
workers, K's folder -- and prints what the kernel let it do. I6-I7 run the same attempts
from a *worker* of job J (the attacker's real driver sends them as tasks: victim.cpp's
`probe` and `signal`). Which of these hold in which mode (a user per job as root, Landlock
without root) is docs/security.md's table, "Jobs apart on a machine".
"""

import json
import os
import re

TITLE = "I. a job's own code, on the machine it runs on"

PROBE = r'''
import json, os, sys
args = json.loads(sys.argv[1])
out = {"uid": os.getuid(), "cwd": os.getcwd(),
       "credential": bool(os.environ.get("CELER_JOB_CREDENTIAL")), "tmpdir": os.environ.get("TMPDIR", "")}
def opened(path, write=False):
    try:
        with open(path, "ab" if write else "rb") as f:
            if not write:
                f.read(1)
        return "opened"
    except OSError as e:
        return e.strerror
def listed(path):
    try:
        return "listed %d" % len(os.listdir(path))
    except OSError as e:
        return e.strerror
def signalled(pid):
    try:
        os.kill(pid, 0)
        return "sent"
    except OSError as e:
        return e.strerror
out["token up the tree"] = opened("../../../token")
out["token by path"] = opened(args["session"] + "/token")
out["session listed"] = listed(args["session"])
out["head tables"] = listed(args["session"] + "/head")
for pid in args["daemons"]:
    out["environ of daemon %d" % pid] = opened("/proc/%d/environ" % pid)
    out["signal daemon %d" % pid] = signalled(pid)
    fds = "none"
    try:
        names = os.listdir("/proc/%d/fd" % pid)
        fds = "listed"
        for n in names:
            if opened("/proc/%d/fd/%s" % (pid, n)) == "opened":
                fds = "opened one"
                break
    except OSError as e:
        fds = e.strerror
    out["descriptors of daemon %d" % pid] = fds
for pid in args["workers"]:
    out["environ of K's worker %d" % pid] = opened("/proc/%d/environ" % pid)
    out["signal K's worker %d" % pid] = signalled(pid)
out["K's folder"] = opened(args["k_folder"] + "/tmp/planted", write=True)
print("PROBE " + json.dumps(out), flush=True)
'''


def _refused(result):
    return result not in ("opened", "sent", "opened one") and not result.startswith("listed")


def _submitted_probe(suite):
    """Submits the probe as a job of its own (--follow) and returns what it printed."""
    c = suite.cluster
    k_workers = [p for p, w in c.workers().items() if int(w[0], 16) == suite.k]
    args = {"session": c.session, "daemons": [c.head_pid, c.node_pid], "workers": k_workers,
            "k_folder": os.path.join(suite.job_dir, f"{suite.k:032x}")}
    r = c.run(["submit", "--follow", "--", "/usr/bin/python3", "-c", PROBE, json.dumps(args)], timeout=120)
    m = re.search(r"^PROBE (.*)$", r.stdout, re.M)
    if not m:
        raise RuntimeError(f"the probe job printed no result: {r.stdout[-1500:]} {r.stderr[-1500:]}")
    return json.loads(m.group(1))


def submitted_job(suite, check):
    got = _submitted_probe(suite)
    suite.probe = got
    root = os.geteuid() == 0
    check("I0 a submitted job's driver holds its own credential and runs in its own folder",
          got["credential"] and got["tmpdir"].startswith(suite.job_dir) and
          (not root or got["uid"] != 0),
          f"uid {got['uid']}, cwd {got['cwd']}, TMPDIR {got['tmpdir']}")
    for what in ("token up the tree", "token by path"):
        check(f"I1 a submitted job cannot read the cluster's token ({what})", _refused(got[what]), got[what])
    check("I1b a submitted job cannot list the head's session directory or its tables",
          _refused(got["session listed"]) and _refused(got["head tables"]),
          f"session: {got['session listed']}; tables: {got['head tables']}")
    daemon = {k: v for k, v in got.items() if "daemon" in k}
    check("I2 a submitted job cannot read a daemon's environment or open its descriptors (the store's memory)",
          all(_refused(v) for k, v in daemon.items() if not k.startswith("signal")),
          "; ".join(f"{k}: {v}" for k, v in daemon.items() if not k.startswith("signal")))
    signals = {k: v for k, v in got.items() if k.startswith("signal")}
    check("I3 a submitted job cannot signal the head, the node or job K's workers",
          signals and all(_refused(v) for v in signals.values()),
          "; ".join(f"{k}: {v}" for k, v in signals.items()))
    environs = {k: v for k, v in got.items() if k.startswith("environ of K")}
    check("I4 a submitted job cannot read job K's workers' environments (K's credential)",
          environs and all(_refused(v) for v in environs.values()),
          "; ".join(f"{k}: {v}" for k, v in environs.items()))
    check("I5 a submitted job cannot write into job K's folder", _refused(got["K's folder"]), got["K's folder"])


def worker_probes(suite, check):
    c = suite.cluster
    a = suite.attacker
    k_workers = [p for p, w in c.workers().items() if int(w[0], 16) == suite.k]
    results = {"token": a.ask(f"probe {os.path.join(c.session, 'token')}") or "no answer",
               "head environ": a.ask(f"probe /proc/{c.head_pid}/environ") or "no answer",
               "node environ": a.ask(f"probe /proc/{c.node_pid}/environ") or "no answer"}
    for pid in k_workers[:2]:
        results[f"K's worker {pid} environ"] = a.ask(f"probe /proc/{pid}/environ") or "no answer"
    check("I6 job J's workers cannot read the token, the daemons' or job K's workers' environments",
          all(r.startswith("probe ") and _refused(r[6:]) for r in results.values()),
          "; ".join(f"{k}: {v}" for k, v in results.items()))
    sig = {"head": a.ask(f"signal {c.head_pid}") or "no answer",
           "node": a.ask(f"signal {c.node_pid}") or "no answer"}
    for pid in k_workers[:2]:
        sig[f"K's worker {pid}"] = a.ask(f"signal {pid}") or "no answer"
    check("I7 job J's workers cannot signal the daemons or job K's workers",
          all(r.startswith("signal ") and _refused(r[7:]) for r in sig.values()),
          "; ".join(f"{k}: {v}" for k, v in sig.items()))


ATTACKS = [submitted_job, worker_probes]
