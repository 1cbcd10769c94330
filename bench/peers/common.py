"""Shared by the peer benchmarks: Ray's timeit (warm-up, then 4 trials) and the same table
and JSON as `celer microbenchmark`, so that bench/compare.sh can put them side by side."""

import argparse
import json
import math
import signal
import time


class Overtime(Exception):
    pass


def _overtime(signum, frame):
    raise Overtime()


def parse_args(system, max_seconds=0.0):
    p = argparse.ArgumentParser(description=f"celer's microbenchmark workloads on {system}")
    p.add_argument("--only", default="", help="run workloads whose name contains this")
    p.add_argument("--json", default="", help="write the results here")
    p.add_argument("--duration", type=float, default=2.0, help="seconds per trial")
    p.add_argument("--num-cpus", type=int, default=0, help="CPUs to give the system (0: all)")
    p.add_argument("--smoke", action="store_true", help="tiny sizes, 0.05 s trials")
    p.add_argument("--max-seconds", type=float, default=max_seconds,
                   help="give up on a workload (reported as skipped) after this long; 0: never")
    a = p.parse_args()
    if a.smoke:
        a.duration = min(a.duration, 0.05)
    return a


class Runner:
    def __init__(self, system, args):
        self.system = system
        self.args = args
        self.results = []
        print(f"{'workload':<48} {'mean +- std':>28}  unit", flush=True)

    def selected(self, name):
        return self.args.only in name

    def _row(self, r):
        if "skipped" in r:
            print(f"{r['name']:<48} {'-':>28}  (skipped: {r['skipped']})", flush=True)
        else:
            fig = f"{fmt(r['value'])} +- {fmt(r['std'])}"
            print(f"{r['name']:<48} {fig:>28}  {r['unit']}", flush=True)
        self.results.append(r)
        self.finish()  # after every row, so that an interrupted run keeps what it measured

    def timeit(self, name, fn, multiplier=1, unit="per second"):
        if not self.selected(name):
            return
        cap = self.args.max_seconds
        if cap <= 0:
            self._timeit(name, fn, multiplier, unit)
            return
        old = signal.signal(signal.SIGALRM, _overtime)
        signal.setitimer(signal.ITIMER_REAL, cap)
        try:
            self._timeit(name, fn, multiplier, unit)
        except Overtime:
            self._row({"name": name, "skipped": f"not finished within {cap:.0f} s at Ray's sizes "
                                                f"(--max-seconds)"})
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)

    def _timeit(self, name, fn, multiplier, unit):
        warmup = 0 if self.args.smoke else self.args.duration / 2
        count = 0
        start = time.perf_counter()
        while True:
            fn()
            count += 1
            if time.perf_counter() - start >= warmup:
                break
        step = count // 10 + 1
        stats = []
        for _ in range(4):
            n = 0
            start = time.perf_counter()
            while True:
                for _ in range(step):
                    fn()
                n += step
                if time.perf_counter() - start >= self.args.duration:
                    break
            stats.append(multiplier * n / (time.perf_counter() - start))
        mean = sum(stats) / len(stats)
        std = math.sqrt(sum((s - mean) ** 2 for s in stats) / len(stats))
        self._row({"name": name, "value": mean, "std": std, "unit": unit})

    def skip(self, name, why):
        if self.selected(name):
            self._row({"name": name, "skipped": why})

    def finish(self):
        if self.args.json:
            with open(self.args.json, "w") as f:
                json.dump({"system": self.system, "duration_s": self.args.duration,
                           "results": self.results}, f, indent=2)


def fmt(v):
    return f"{v:.0f}" if v >= 100 else f"{v:.3g}"
