"""The synthetic tuning benchmark of docs/benchmarks.md on Ray Tune: 64 trials of a trainable
with a known learning curve and a fixed compute cost per iteration, under ASHA, with the
same CPU count as celer-tune's run (`celer-tune --config config/tune/synthetic.yaml`).
Prints wall time, the tuning overhead per trial and per iteration, and the best value.
Needs `pip install "ray[tune]"`.

    python bench/peers/ray_tune_synthetic.py [--num-cpus 2] [--trials 64] [--cost-ms 20]
        [--max-t 27] [--json FILE]

The trainable (the same in celer-tune's `synthetic` data): trial i of n takes the point
(x, y) of the Halton sequence (bases 2 and 3) at index i + 1, so both systems evaluate the
same 64 configurations; after iteration t its score is
q(x, y) * (1 - exp(-t / 5)), with q = 1 - (x - 0.3)^2 - (y - 0.7)^2, and each iteration
spins the CPU for cost_ms first. ASHA: max_t 27, grace period 1, reduction factor 3,
maximising the score.
"""

import argparse
import json
import math
import time

import ray
from ray import tune
from ray.tune.schedulers import ASHAScheduler


def halton(i, base):
    f, r = 1.0, 0.0
    while i > 0:
        f /= base
        r += f * (i % base)
        i //= base
    return r


def point(i):
    return halton(i + 1, 2), halton(i + 1, 3)


def score(x, y, t):
    q = 1 - (x - 0.3) ** 2 - (y - 0.7) ** 2
    return q * (1 - math.exp(-t / 5))


def spin(ms):
    end = time.perf_counter() + ms / 1000.0
    while time.perf_counter() < end:
        pass


def trainable(config):
    x, y = point(config["i"])
    for t in range(1, config["max_t"] + 1):
        spin(config["cost_ms"])
        tune.report({"score": score(x, y, t)})


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-cpus", type=int, default=2)
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--cost-ms", type=float, default=20.0)
    p.add_argument("--max-t", type=int, default=27)
    p.add_argument("--json", default="")
    a = p.parse_args()
    ray.init(num_cpus=a.num_cpus, include_dashboard=False, log_to_driver=False)
    start = time.perf_counter()
    tuner = tune.Tuner(
        tune.with_resources(trainable, {"cpu": 1}),
        param_space={"i": tune.grid_search(list(range(a.trials))), "cost_ms": a.cost_ms,
                     "max_t": a.max_t},
        tune_config=tune.TuneConfig(
            metric="score", mode="max",
            scheduler=ASHAScheduler(max_t=a.max_t, grace_period=1, reduction_factor=3)),
        run_config=tune.RunConfig(verbose=0, storage_path="/tmp/ray_tune_synthetic"),
    )
    results = tuner.fit()
    wall = time.perf_counter() - start
    iterations = sum(int(r.metrics.get("training_iteration", 0)) for r in results)
    best = results.get_best_result().metrics["score"]
    compute = iterations * a.cost_ms / 1000.0
    overhead = wall * a.num_cpus - compute
    out = {"system": "ray_tune", "ray": ray.__version__, "wall_s": wall, "trials": len(results),
           "iterations": iterations, "best": best,
           "overhead_per_trial_ms": 1000 * overhead / len(results),
           "overhead_per_iteration_ms": 1000 * overhead / max(iterations, 1)}
    print(f"ray tune {ray.__version__}: {len(results)} trials, {iterations} iterations in "
          f"{wall:.1f} s; best {best:.4f}; overhead {out['overhead_per_trial_ms']:.0f} ms per "
          f"trial, {out['overhead_per_iteration_ms']:.1f} ms per iteration "
          f"(CPU-seconds beyond the {compute:.1f} s of compute, over {a.num_cpus} CPUs)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f)
    ray.shutdown()


if __name__ == "__main__":
    main()
