"""Shared by ray_preprocess.py and dask_preprocess.py (the peers of `celer-preprocess`):
the per-batch feature code both run (so they differ only in how the system moves the data),
the output's Parquet schema, the peak-memory sampler and the summary line / JSON.

The pipeline (bench/README.md, "celer-preprocess's peers") per item:
  text     = title + " " + description, as UTF-8 bytes
  tokens   = text lowercased in ASCII only (bytes.lower()), split on runs of ASCII
             whitespace (bytes.split(): space, \\t \\n \\v \\f \\r), empty tokens dropped
  counts   = 256 float32, counts[xxh64(token, seed=0) % 256] += 1 for each token
  features = counts ++ (price - mean) / std ++ (rating - mean) / std   (258 float32)
where mean and std (population, ddof=0) are over all items, in float64; std == 0 gives 0.
"""

import argparse
import json
import os
import shutil
import threading
import time

import numpy as np
import psutil
import pyarrow as pa
import xxhash

BUCKETS = 256
FEATURES = BUCKETS + 2
CHUNK = 4096  # items per bincount inside a batch (bounds the flat index list)

OUTPUT_SCHEMA = pa.schema([
    ("key", pa.string()),
    ("label", pa.int32()),
    ("features", pa.list_(pa.float32(), FEATURES)),
])

# The catalog's fields, given to Arrow's JSON reader so that every file gets the same types
# (a price written as 60 in one file and 59.5 in another would otherwise differ).
INPUT_SCHEMA = pa.schema([
    ("id", pa.string()),
    ("catalog", pa.int64()),
    ("category", pa.string()),
    ("label", pa.int64()),
    ("title", pa.string()),
    ("description", pa.string()),
    ("price", pa.float64()),
    ("rating", pa.float64()),
])


def bag_of_words(titles, descriptions):
    """(n, 256) float32 hashed-token counts for n items."""
    xxh = xxhash.xxh64_intdigest
    n = len(titles)
    out = np.empty((n, BUCKETS), dtype=np.float32)
    for start in range(0, n, CHUNK):
        stop = min(n, start + CHUNK)
        flat = []
        for i in range(start, stop):
            base = (i - start) * BUCKETS
            toks = (titles[i] + " " + descriptions[i]).encode().lower().split()
            flat.extend([base + (xxh(t) & 255) for t in toks])
        counts = np.bincount(np.asarray(flat, dtype=np.int64), minlength=(stop - start) * BUCKETS)
        out[start:stop] = counts.reshape(stop - start, BUCKETS)
    return out


def moments(x):
    """(count, sum, sum of squared deviations from the part's mean) of a float64 array."""
    x = np.asarray(x, dtype=np.float64)
    if len(x) == 0:
        return (0, 0.0, 0.0)
    return (len(x), float(x.sum()), float(((x - x.mean()) ** 2).sum()))


def combine(parts):
    """Chan et al.'s pairwise combination of moments(): (mean, population std)."""
    n, s, m2 = 0, 0.0, 0.0
    for pn, ps, pm2 in parts:
        if pn == 0:
            continue
        if n == 0:
            n, s, m2 = pn, ps, pm2
            continue
        delta = ps / pn - s / n
        m2 += pm2 + delta * delta * n * pn / (n + pn)
        n += pn
        s += ps
    if n == 0:
        return 0.0, 0.0
    return s / n, float(np.sqrt(m2 / n))


def zscore(x, mean, std):
    x = np.asarray(x, dtype=np.float64)
    if std == 0:
        return np.zeros(len(x), dtype=np.float32)
    return ((x - mean) / std).astype(np.float32)


def output_table(keys, labels, counts, price, rating, stats):
    """The output rows of a batch as an Arrow table with OUTPUT_SCHEMA."""
    n = len(keys)
    feats = np.empty((n, FEATURES), dtype=np.float32)
    feats[:, :BUCKETS] = counts
    feats[:, BUCKETS] = zscore(price, *stats["price"])
    feats[:, BUCKETS + 1] = zscore(rating, *stats["rating"])
    features = pa.FixedSizeListArray.from_arrays(pa.array(feats.reshape(-1)), FEATURES)
    return pa.Table.from_arrays(
        [pa.array(keys, type=pa.string()), pa.array(np.asarray(labels, dtype=np.int32)),
         features], schema=OUTPUT_SCHEMA)


def catalog_files(d):
    files = sorted(os.path.join(d, f) for f in os.listdir(d)
                   if f.startswith("catalog-") and f.endswith(".jsonl"))
    if not files:
        raise SystemExit(f"no catalog-*.jsonl in {d}")
    return files


def parse_args(system, workers_flag):
    p = argparse.ArgumentParser(description=f"celer-preprocess's pipeline on {system}")
    p.add_argument("--input", required=True, help="folder of catalog-NN.jsonl")
    p.add_argument("--output", required=True, help="folder for the Parquet output (emptied)")
    p.add_argument(workers_flag, type=int, default=0, dest="workers",
                   help="CPUs / worker processes (0: all)")
    p.add_argument("--json", default="", help="write the result here")
    p.add_argument("--warmup", action="store_true",
                   help="first run the pipeline once, untimed, on the first N files (to "
                        "OUTPUT/warmup, then removed), so that each worker has imported and "
                        "first called what it uses")
    a = p.parse_args()
    a.workers = a.workers or os.cpu_count()
    return a


def prepare_output(d):
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        p = os.path.join(d, f)
        if os.path.isfile(p):
            os.remove(p)


def count_rows(d):
    import pyarrow.parquet as pq
    return sum(pq.ParquetFile(os.path.join(d, f)).metadata.num_rows
               for f in os.listdir(d) if f.endswith(".parquet"))


def warmup(pipeline, files, out, workers):
    scratch = os.path.join(out, "warmup")
    prepare_output(scratch)
    start = clock()
    pipeline(files[:workers], scratch)
    shutil.rmtree(scratch)
    print(f"warm-up: the pipeline on {min(workers, len(files))} files took "
          f"{clock() - start:.2f} s", flush=True)


class PeakMemory:
    """Samples in a thread, every `interval` s, the summed RSS of this process and all its
    descendants, and every `pss_every`-th sample their summed PSS; keeps the peak of each.
    RSS counts a shared page (Ray's object store is a /dev/shm file that the raylet and the
    workers map) once per process that touched it; PSS divides it among them, so the sum
    counts it once. PSS is sampled less often because reading smaps_rollup costs ~2.5 ms a
    process (RSS, from statm, ~0.4 ms): its peak may miss a spike shorter than 0.5 s."""

    def __init__(self, interval=0.05, pss_every=10):
        self.interval = interval
        self.pss_every = pss_every
        self.peak_rss = 0
        self.peak_pss = 0
        self.samples = 0
        self._stop = threading.Event()
        self._me = psutil.Process()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self, pss=True):
        rss = pss_sum = 0
        for p in [self._me] + self._me.children(recursive=True):
            try:
                if pss:
                    m = p.memory_full_info()
                    pss_sum += m.pss
                else:
                    m = p.memory_info()
                rss += m.rss
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        return rss, pss_sum

    def _take(self):
        with_pss = self.samples % self.pss_every == 0
        rss, pss = self.sample(with_pss)
        self.peak_rss = max(self.peak_rss, rss)
        self.peak_pss = max(self.peak_pss, pss)
        self.samples += 1

    def _run(self):
        due = time.perf_counter()
        while not self._stop.is_set():
            self._take()
            due += self.interval
            self._stop.wait(max(0.0, due - time.perf_counter()))

    def __enter__(self):
        self.idle_rss, self.idle_pss = self.sample()
        self.started = time.perf_counter()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.seconds = time.perf_counter() - self.started
        rss, pss = self.sample()
        self.peak_rss = max(self.peak_rss, rss)
        self.peak_pss = max(self.peak_pss, pss)


def report(args, system, items, seconds, mem, extra=None):
    r = {"system": system, "items": items, "seconds": seconds,
         "items_per_s": items / seconds if seconds > 0 else 0.0,
         "peak_rss_bytes": mem.peak_rss, "peak_pss_bytes": mem.peak_pss,
         "idle_rss_bytes": mem.idle_rss, "memory_samples": mem.samples,
         "memory_sample_interval_s": mem.seconds / max(1, mem.samples),
         "workers": args.workers, "warmup": args.warmup}
    r.update(extra or {})
    print(f"{system}: {items} items in {seconds:.2f} s = {r['items_per_s']:.0f} items/s, "
          f"{args.workers} workers, peak RSS {mem.peak_rss / 2**20:.0f} MiB "
          f"(PSS {mem.peak_pss / 2**20:.0f} MiB, idle RSS {mem.idle_rss / 2**20:.0f} MiB)",
          flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(r, f, indent=2)
    return r


def clock():
    return time.perf_counter()
