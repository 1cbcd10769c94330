"""PyTorch's gloo allreduce, the peer of `celer-bench-allreduce` (docs/benchmarks.md,
"Allreduce"): the same sizes of float32, summed across the same number of processes on this
machine, timed the same way (median over rounds of the slowest rank, after a barrier).

Debian's `python3-torch` is the same 1.13 build as `libtorch-dev`, so the difference is the
runtime's transport, not the arithmetic. A bench-only dependency:

    apt-get install python3-torch
    python3 bench/peers/gloo_allreduce.py [--members 2] [--sizes-mb 1,10,100] [--rounds 5]
"""

import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def member(rank, size, sizes, rounds, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=size)
    times = []
    for nbytes in sizes:
        t = torch.empty(nbytes // 4, dtype=torch.float32)
        mine = []
        for r in range(-1, rounds):
            t.fill_(rank + 1)
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(t)
            took = time.perf_counter() - start
            want = size * (size + 1) / 2
            assert t[0].item() == want and t[-1].item() == want, "wrong sum"
            if r >= 0:
                mine.append(took)
        times.append(mine)
    out[rank] = times
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--members", type=int, default=2)
    p.add_argument("--sizes-mb", default="1,10,100")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--port", type=int, default=29531)
    a = p.parse_args()
    sizes = [int(float(s) * 1e6) // 4 * 4 for s in a.sizes_mb.split(",")]
    with mp.Manager() as m:
        out = m.dict()
        mp.spawn(member, args=(a.members, sizes, a.rounds, a.port, out), nprocs=a.members, join=True)
        results = dict(out)
    print(f"gloo allreduce (torch {torch.__version__}, float32 sum), {a.members} processes")
    print(f"{'size':>10} {'median ms':>12} {'algbw GB/s':>14} {'busbw GB/s':>14}")
    n = a.members
    for i, nbytes in enumerate(sizes):
        rounds = [max(results[r][i][k] for r in range(n)) for k in range(a.rounds)]
        t = statistics.median(rounds)
        print(f"{nbytes / 1e6:8.1f} MB {t * 1e3:12.2f} {nbytes / t / 1e9:14.3f} {nbytes * 2 * (n - 1) / n / t / 1e9:14.3f}")


if __name__ == "__main__":
    main()
