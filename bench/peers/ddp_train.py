"""PyTorch DistributedDataParallel on gloo (CPU), the peer of `celer-train` (docs/benchmarks.md,
"Training: celer-train against PyTorch DDP"): the same model, data, split, optimiser, batch
and step count as celer-train's config (config/train/digits-mlp.yaml by default), trained
by N processes, each with the intra-op threads celer-train gives a worker, and timed the
same way: samples trained over all workers / seconds of training (from the first step to
the last, after start-up, without validation).

What is matched, read from the same YAML: the MLP of <celer/actors/torch/model.hpp>
(Flatten, then depth x [Linear(in, width), ReLU, Dropout if dropout > 0], Linear(width,
10)), built after torch.manual_seed(seed) with PyTorch's default initialisation, as LibTorch
builds it (DDP broadcasts rank 0's weights, as celer-train does); Adam/AdamW/SGD with lr, weight_decay, momentum;
cross-entropy; batch_size samples per worker a step; steps = epochs x ceil(train / (batch
x workers)) or max_steps; threads = max(1, round(cpus_per_worker)). The data is the repo's
data/digits/digits.csv.gz (pixels / 16), split as celer::actors::split does it (20% of each
class held out, seed 20240601) by replaying libstdc++'s std::shuffle over std::mt19937_64,
so the validation samples are the same. What differs: the shards and batch order
(torch's DistributedSampler, seeded, padded to equal shards) and the gradient averaging
(DDP's bucketed allreduce overlapped with backward, against celer-train's one allreduce
after backward).

Debian's `python3-torch` is the same 1.13 build as `libtorch-dev`; run it with Debian's
python (pyenv's `python3` has no torch):

    /usr/bin/python3 bench/peers/ddp_train.py [--workers 2] [--config config/train/digits-mlp.yaml]
        [--epochs E] [--max-steps N] [--cpus-per-worker C] [--batch-size B] [--json]
"""

import argparse
import gzip
import json
import math
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# celer-train's validation split (apps/train/worker.cpp).
VALIDATION_FRACTION = 0.2
SPLIT_SEED = 20240601

M64 = (1 << 64) - 1


class MT19937_64:
    """std::mt19937_64, bit for bit."""

    def __init__(self, seed):
        self.mt = [0] * 312
        self.mt[0] = seed & M64
        for i in range(1, 312):
            prev = self.mt[i - 1]
            self.mt[i] = (6364136223846793005 * (prev ^ (prev >> 62)) + i) & M64
        self.index = 312

    def _twist(self):
        mt = self.mt
        for i in range(312):
            x = (mt[i] & 0xFFFFFFFF80000000) | (mt[(i + 1) % 312] & 0x7FFFFFFF)
            xa = x >> 1
            if x & 1:
                xa ^= 0xB5026F5AA96619E9
            mt[i] = mt[(i + 156) % 312] ^ xa
        self.index = 0

    def __call__(self):
        if self.index >= 312:
            self._twist()
        y = self.mt[self.index]
        self.index += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        return y & M64


def uniform_below(g, n):
    """std::uniform_int_distribution<uint64>{0, n - 1}(g) as libstdc++ 12 draws it from a
    64-bit engine: Lemire's nearly divisionless method on 128-bit products."""
    product = g() * n
    low = product & M64
    if low < n:
        threshold = ((1 << 64) - n) % n
        while low < threshold:
            product = g() * n
            low = product & M64
    return product >> 64


def libstdcxx_shuffle(v, g):
    """std::shuffle(v.begin(), v.end(), g) as libstdc++ 12 does it: two swap positions from
    one draw while n * n fits the engine's range."""
    n = len(v)
    if n == 0:
        return
    assert M64 // n >= n, "only the two-at-a-time path is replayed"
    i = 1
    if n % 2 == 0:
        j = uniform_below(g, 2)
        v[i], v[j] = v[j], v[i]
        i += 1
    while i != n:
        swap_range = i + 1
        x = uniform_below(g, swap_range * (swap_range + 1))
        first, second = x // (swap_range + 1), x % (swap_range + 1)
        v[i], v[first] = v[first], v[i]
        i += 1
        v[i], v[second] = v[second], v[i]
        i += 1


def load_digits(path):
    """data/digits/digits.csv.gz: 64 pixels 0..16 and a class a line; pixels scaled to [0, 1]."""
    xs, ys = [], []
    with gzip.open(path, "rt") as f:
        for line in f:
            if line.strip():
                v = [int(t) for t in line.split(",")]
                xs.append([p / 16.0 for p in v[:64]])
                ys.append(v[64])
    return xs, ys


def split(ys, fraction, seed):
    """celer::actors::split: the row indices of (train, validation)."""
    by_class = {}
    for i, y in enumerate(ys):
        by_class.setdefault(y, []).append(i)
    g = MT19937_64(seed)
    train, valid = [], []
    for label in sorted(by_class):
        rows = by_class[label]
        libstdcxx_shuffle(rows, g)
        n_valid = int(fraction * len(rows) + 0.5)
        valid += rows[:n_valid]
        train += rows[n_valid:]
    libstdcxx_shuffle(train, g)
    libstdcxx_shuffle(valid, g)
    return train, valid


def make_model(cfg, features, classes):
    """<celer/actors/torch/model.hpp>'s mlp."""
    torch.manual_seed(cfg["seed"])
    layers = [nn.Flatten()]
    width_in = features
    for _ in range(cfg["depth"]):
        layers += [nn.Linear(width_in, cfg["width"]), nn.ReLU()]
        if cfg["dropout"] > 0:
            layers.append(nn.Dropout(cfg["dropout"]))
        width_in = cfg["width"]
    layers.append(nn.Linear(width_in, classes))
    return nn.Sequential(*layers)


def make_optimizer(cfg, params):
    if cfg["optimizer"] == "adam":
        return torch.optim.Adam(params, lr=cfg["lr"], weight_decay=cfg["weight_decay"])
    if cfg["optimizer"] == "adamw":
        return torch.optim.AdamW(params, lr=cfg["lr"], weight_decay=cfg["weight_decay"])
    return torch.optim.SGD(params, lr=cfg["lr"], momentum=cfg["momentum"], weight_decay=cfg["weight_decay"])


def member(rank, world, cfg, steps, threads, port, data, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(threads)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    x_train, y_train, x_valid, y_valid = data
    model = nn.parallel.DistributedDataParallel(make_model(cfg, x_train.shape[1], 10))
    optimizer = make_optimizer(cfg, model.parameters())
    loss_fn = nn.CrossEntropyLoss()
    sampler = torch.utils.data.distributed.DistributedSampler(
        range(len(y_train)), num_replicas=world, rank=rank, shuffle=True, seed=cfg["seed"])
    batch = cfg["batch_size"]

    model.train()
    samples = 0
    step = 0
    epoch = 0
    dist.barrier()  # every process built and ready: start-up ends here
    began = time.perf_counter()
    while step < steps:
        sampler.set_epoch(epoch)
        order = torch.tensor(list(iter(sampler)), dtype=torch.long)
        for first in range(0, len(order), batch):
            if step == steps:
                break
            idx = order[first:first + batch]
            xb, yb = x_train.index_select(0, idx), y_train.index_select(0, idx)
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()  # DDP averages the gradients across the processes here
            optimizer.step()
            samples += len(idx)
            step += 1
        epoch += 1
    dist.barrier()  # the slowest process's last step ends the training time
    seconds = time.perf_counter() - began
    counted = torch.tensor([samples], dtype=torch.float64)
    dist.all_reduce(counted)
    if rank == 0:
        model.eval()
        with torch.no_grad():
            logits = model.module(x_valid)
            val_loss = loss_fn(logits, y_valid).item()
            val_accuracy = (logits.argmax(1) == y_valid).double().mean().item()
        out["result"] = {"samples": int(counted.item()), "seconds": seconds, "val_loss": val_loss,
                         "val_accuracy": val_accuracy, "epochs": epoch}
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=None, help="processes (default: the config's num_workers)")
    p.add_argument("--config", default=os.path.join(REPO, "config/train/digits-mlp.yaml"))
    p.add_argument("--epochs", type=int, default=None, help="passes over the training split (default: the config's)")
    p.add_argument("--max-steps", type=int, default=None, help="stop after this many steps (default: the config's)")
    p.add_argument("--cpus-per-worker", type=float, default=None, help="intra-op threads = max(1, round(this))")
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--data", default=os.path.join(os.environ.get("CELER_DATA_DIR", os.path.join(REPO, "data")),
                                                  "digits/digits.csv.gz"))
    p.add_argument("--port", type=int, default=0, help="the rendezvous port (default: a free one)")
    p.add_argument("--json", action="store_true", help="print only the JSON line")
    a = p.parse_args()

    with open(a.config) as f:
        cfg = yaml.safe_load(f)
    if cfg.get("data", "digits") != "digits" or cfg.get("model", "mlp") != "mlp" or cfg.get("accumulate_steps", 1) != 1 \
            or cfg.get("compression", "none") != "none":
        sys.exit("ddp_train.py: only the digits MLP, without accumulation or compression, is matched")
    if a.workers is not None:
        cfg["num_workers"] = a.workers
    if a.cpus_per_worker is not None:
        cfg["cpus_per_worker"] = a.cpus_per_worker
    if a.batch_size is not None:
        cfg["batch_size"] = a.batch_size
    if a.epochs is not None:
        cfg["epochs"] = a.epochs
    if a.max_steps is not None:
        cfg["max_steps"] = a.max_steps
    world = cfg["num_workers"]
    # celer-train's worker: torch::set_num_threads(max(1, lround(cpus_per_worker))).
    threads = max(1, int(math.floor(cfg["cpus_per_worker"] + 0.5)))

    xs, ys = load_digits(a.data)
    if cfg.get("limit", 0):
        xs, ys = xs[:cfg["limit"]], ys[:cfg["limit"]]
    train_rows, valid_rows = split(ys, VALIDATION_FRACTION, SPLIT_SEED)
    x = torch.tensor(xs, dtype=torch.float32)
    y = torch.tensor(ys, dtype=torch.long)
    data = (x[train_rows], y[train_rows], x[valid_rows], y[valid_rows])
    # The driver's count (apps/train/driver.cpp): epochs x steps an epoch, or max_steps.
    per_epoch = max(1, -(-len(train_rows) // (cfg["batch_size"] * world)))
    steps = cfg["epochs"] * per_epoch if cfg.get("epochs", 0) > 0 else cfg["max_steps"]
    if cfg.get("max_steps", 0) > 0:
        steps = min(steps, cfg["max_steps"])

    with mp.Manager() as m:
        out = m.dict()
        mp.spawn(member, args=(world, cfg, steps, threads, a.port or free_port(), data, out), nprocs=world, join=True)
        r = dict(out["result"])
    result = {
        "system": "pytorch-ddp-gloo",
        "torch": torch.__version__,
        "workers": world,
        "threads_per_worker": threads,
        "batch_size": cfg["batch_size"],
        "steps": steps,
        "train_samples": len(train_rows),
        "valid_samples": len(valid_rows),
        "samples": r["samples"],
        "train_seconds": round(r["seconds"], 4),
        "samples_per_s": round(r["samples"] / r["seconds"], 1),
        "final_val_accuracy": round(r["val_accuracy"], 4),
        "final_val_loss": round(r["val_loss"], 4),
    }
    if not a.json:
        print(f"ddp_train: digits MLP (depth {cfg['depth']}, width {cfg['width']}) on PyTorch {torch.__version__} DDP/gloo: "
              f"{world} processes x {cfg['batch_size']} samples a step, {threads} thread(s) each, {steps} steps, "
              f"{len(train_rows)} training and {len(valid_rows)} validation samples")
        print(f"ddp_train: final validation accuracy {r['val_accuracy']:.4f} (loss {r['val_loss']:.4f}) after {steps} steps, "
              f"{r['samples'] / r['seconds']:.0f} samples/s ({r['samples']} samples in {r['seconds']:.2f} s of training)")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
