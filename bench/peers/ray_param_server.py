"""The parameter server of bench/param_server.cpp on Ray, with numpy arrays: one actor holds
N float32 weights; W tasks each pull them, compute a gradient and push it, R rounds. Prints
MB/s moved (pulled + pushed), mean of T trials, in the same line format. Needs
`pip install ray numpy`.

    python bench/peers/ray_param_server.py [--floats N] [--workers W] [--rounds R]
        [--trials T] [--num-cpus C] [--address HOST:PORT] [--json FILE]
"""

import argparse
import json
import math
import time

import numpy as np
import ray


@ray.remote(num_cpus=0)
class ParameterServer:
    def __init__(self, n):
        self.weights = np.ones(n, dtype=np.float32)
        self.version = 0

    def pull(self):
        return self.weights

    def push(self, grad):
        self.weights -= 0.01 * grad
        self.version += 1
        return self.version


@ray.remote(num_cpus=1)
def worker(ps, rounds):
    moved = 0.0
    for _ in range(rounds):
        w = ray.get(ps.pull.remote())
        grad = 0.001 * w
        ray.get(ps.push.remote(grad))
        moved += 2.0 * w.nbytes
    return moved


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--floats", type=int, default=1 << 20)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--rounds", type=int, default=50)
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--num-cpus", type=int, default=0)
    p.add_argument("--address", default="", help="an existing Ray cluster (default: start one)")
    p.add_argument("--json", default="")
    a = p.parse_args()
    if a.address:
        ray.init(address=a.address)
    else:
        ray.init(num_cpus=a.num_cpus or None, include_dashboard=False)
    mbs = []
    for _ in range(a.trials):
        ps = ParameterServer.remote(a.floats)
        ray.get(ps.push.remote(np.zeros(a.floats, dtype=np.float32)))
        start = time.perf_counter()
        moved = sum(ray.get([worker.remote(ps, a.rounds) for _ in range(a.workers)]))
        mbs.append(moved / (time.perf_counter() - start) / 1e6)
        ray.kill(ps)
    mean = sum(mbs) / len(mbs)
    std = math.sqrt(sum((m - mean) ** 2 for m in mbs) / len(mbs))
    print(f"param_server_ray_numpy_mb_per_s {mean:.1f} +- {std:.1f}  ({a.floats} floats, "
          f"{a.workers} workers, {a.rounds} rounds, {a.trials} trials)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"name": "param_server_ray_numpy_mb_per_s", "mean": mean, "std": std,
                       "floats": a.floats, "workers": a.workers, "rounds": a.rounds,
                       "trials": mbs}, f)
    ray.shutdown()


if __name__ == "__main__":
    main()
