"""The work of celer-bench-tune-search (bench/tune_search.cpp) on Optuna: Branin and
Hartmann-6, seeds 0..N-1, 100 sequential trials each, the median best value over the seeds
after 50 trials and after all, in the same table. Needs `pip install optuna`.

    python bench/peers/optuna_tpe.py [--seeds 30] [--trials 100] [--json FILE] [--smoke]
                                     [--methods optuna_random,optuna_tpe,optuna_tpe_univariate]

Methods: optuna_tpe is TPESampler(seed=seed) with every other setting at its default (in
Optuna 5 that is the multivariate TPE for one objective; up to 4.x it was univariate);
optuna_tpe_univariate adds multivariate=False; optuna_random is RandomSampler(seed=seed).
"""

import argparse
import json
import math
import time
import warnings

import numpy as np
import optuna


def branin(x):
    a, b, c = 1.0, 5.1 / (4 * math.pi**2), 5 / math.pi
    r, s, t = 6.0, 10.0, 1 / (8 * math.pi)
    u = x[1] - b * x[0] ** 2 + c * x[0] - r
    return a * u * u + s * (1 - t) * math.cos(x[0]) + s


ALPHA = [1.0, 1.2, 3.0, 3.2]
A = [[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14],
     [3, 3.5, 1.7, 10, 17, 8], [17, 8, 0.05, 10, 0.1, 14]]
P = [[0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886],
     [0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991],
     [0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650],
     [0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381]]


def hartmann6(x):
    total = 0.0
    for i in range(4):
        inner = sum(A[i][j] * (x[j] - P[i][j]) ** 2 for j in range(6))
        total += ALPHA[i] * math.exp(-inner)
    return -total


FUNCTIONS = [
    ("branin", 0.397887, [("x1", -5.0, 10.0), ("x2", 0.0, 15.0)], branin),
    ("hartmann6", -3.32237, [(f"x{i}", 0.0, 1.0) for i in range(1, 7)], hartmann6),
]

METHODS = [
    ("optuna_random", lambda seed: optuna.samplers.RandomSampler(seed=seed)),
    ("optuna_tpe", lambda seed: optuna.samplers.TPESampler(seed=seed)),
    ("optuna_tpe_univariate", lambda seed: optuna.samplers.TPESampler(seed=seed, multivariate=False)),
]


def main():
    p = argparse.ArgumentParser(description="Optuna's TPE and random search on Branin and Hartmann-6")
    p.add_argument("--seeds", type=int, default=30, help="runs per function and method, seeds 0..N-1")
    p.add_argument("--trials", type=int, default=100, help="trials per run")
    p.add_argument("--json", default="", help="also write the figures to FILE")
    p.add_argument("--smoke", action="store_true", help="2 seeds")
    p.add_argument("--methods", default=",".join(m for m, _ in METHODS),
                   help="comma-separated methods to run (default: all)")
    a = p.parse_args()
    if a.smoke:
        a.seeds = min(a.seeds, 2)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)

    out = {"seeds": a.seeds, "trials": a.trials, "optuna": optuna.__version__, "functions": {}}
    print(f"== best value found, median over {a.seeds} seeds [25th-75th percentile]; {a.trials} trials each"
          f" (Optuna {optuna.__version__})")
    print(f"{'function':<10} {'method':<22} {'best@50':>28} {'best@' + str(a.trials):>28} {'ms/trial':>10}")
    for name, minimum, bounds, f in FUNCTIONS:
        out["functions"][name] = {"minimum": minimum, "methods": {}}
        for method, make in METHODS:
            if method not in a.methods.split(","):
                continue
            at50, at_end = [], []
            start = time.perf_counter()
            for seed in range(a.seeds):
                study = optuna.create_study(direction="minimize", sampler=make(seed))
                study.optimize(lambda t: f([t.suggest_float(n, lo, hi) for n, lo, hi in bounds]),
                               n_trials=a.trials)
                values = [t.value for t in study.trials]
                at50.append(min(values[:50]))
                at_end.append(min(values))
            ms = 1000 * (time.perf_counter() - start) / (a.seeds * a.trials)

            def cell(v):
                q = np.percentile(v, [50, 25, 75])
                return f"{q[0]:.5f} [{q[1]:.4f}-{q[2]:.4f}]"

            print(f"{name:<10} {method:<22} {cell(at50):>28} {cell(at_end):>28} {ms:10.3f}", flush=True)
            out["functions"][name]["methods"][method] = {
                "median_best_at_50": float(np.median(at50)), "median_best_at_end": float(np.median(at_end)),
                "best_at_50": at50, "best_at_end": at_end, "ms_per_trial": ms}
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
