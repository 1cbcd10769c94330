"""Checks the peers of celer-preprocess against a plain single-process reference of the
pipeline (bench/README.md, "celer-preprocess's peers"): same keys, labels, and the 258
features to 1e-5. Also the dev-size input generator.

    python bench/peers/preprocess_check.py generate DIR [--catalogs 4] [--items 1000] [--seed 1]
    python bench/peers/preprocess_check.py check [--input DIR] [--peers ray,dask] [--workers 2]
    python bench/peers/preprocess_check.py compare INPUT OUTPUT_DIR   (any Parquet output)

`check` without --input generates a small input (3 catalogs x 400 items) in a temporary
folder, runs each peer on it and compares. `compare` checks one output folder (a peer's, or
later celer-preprocess's once it writes the same Parquet schema).

The generated catalogs have the real ones' shape: catalog-NN.jsonl, one JSON object a line,
{"id":"c03-000117","catalog":3,"category":"k07","label":7,"title":...,"description":...,
"price":59.5,"rating":4.2}; 24 categories of Zipf-skewed size; the mean description
length varies by category from 8 to 400 words. Titles and descriptions mix case and hold
some non-ASCII letters (É, ß, ü), non-ASCII spaces (U+00A0, U+2003, which do not split),
tabs and runs of spaces, so that "ASCII lowercase" and "ASCII whitespace" are exercised.
"""

import argparse
import glob
import json
import math
import os
import random
import subprocess
import sys
import tempfile

import numpy as np
import xxhash

HERE = os.path.dirname(os.path.abspath(__file__))

WORDS = ("Red Blue GREEN steel Cotton wool lamp chair Table cable phone case USB-C charger "
         "organic coffee tea Mug glass bottle Pack set of kit pro max mini ultra light heavy "
         "duty outdoor indoor garden kitchen office desk Café Crème naïve Straße Über ÉCLAIR "
         "smörgåsbord 12V 3.5mm 100% x2 (new) deluxe!").split()
ODD_SPACES = [" ", " ", " ", " ", " ", "  ", "\t", " \u00a0", "\u2003", " \n "]
CATEGORIES = 24


def generate(d, catalogs, items, seed):
    rng = random.Random(seed)
    os.makedirs(d, exist_ok=True)
    zipf = [1.0 / (k + 1) ** 1.1 for k in range(CATEGORIES)]
    mean_words = [round(8 * (400 / 8) ** (k / (CATEGORIES - 1))) for k in range(CATEGORIES)]
    rng.shuffle(mean_words)  # length is not tied to the category's size

    def text(n):
        out = []
        for i in range(n):
            if i:
                out.append(rng.choice(ODD_SPACES))
            out.append(rng.choice(WORDS) if rng.random() < 0.7 else f"w{rng.randrange(5000)}")
        return "".join(out)

    for c in range(catalogs):
        with open(os.path.join(d, f"catalog-{c:02d}.jsonl"), "w", encoding="utf-8") as f:
            for i in range(items):
                k = rng.choices(range(CATEGORIES), weights=zipf)[0]
                m = mean_words[k]
                n = max(8, min(400, int(rng.gauss(m, m / 4))))
                price = round(rng.lognormvariate(3.5, 1.0), 2)
                if rng.random() < 0.1:
                    price = float(int(price))  # some prices written as integers
                rec = {"id": f"c{c:02d}-{i:06d}", "catalog": c, "category": f"k{k:02d}",
                       "label": k, "title": text(rng.randint(2, 8)), "description": text(n),
                       "price": int(price) if price == int(price) else price,
                       "rating": round(rng.uniform(1, 5), 1)}
                f.write(json.dumps(rec, ensure_ascii=rng.random() < 0.5) + "\n")


def reference(d):
    """The pipeline written plainly, one item at a time: {key: (label, features)}."""
    items = []
    for path in sorted(glob.glob(os.path.join(d, "catalog-*.jsonl"))):
        with open(path, "rb") as f:
            for line in f:
                if line.strip():
                    items.append(json.loads(line))
    stats = {}
    for field in ("price", "rating"):
        xs = [float(it[field]) for it in items]
        mean = math.fsum(xs) / len(xs)
        std = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / len(xs))
        stats[field] = (mean, std)
    out = {}
    for it in items:
        text = (it["title"] + " " + it["description"]).encode("utf-8")
        lowered = bytes(b + 32 if 65 <= b <= 90 else b for b in text)
        tokens = []
        cur = bytearray()
        for b in lowered:
            if b in b" \t\n\v\f\r":
                if cur:
                    tokens.append(bytes(cur))
                    cur = bytearray()
            else:
                cur.append(b)
        if cur:
            tokens.append(bytes(cur))
        feats = np.zeros(258, dtype=np.float32)
        for t in tokens:
            feats[xxhash.xxh64_intdigest(t, seed=0) % 256] += 1
        for j, field in enumerate(("price", "rating")):
            mean, std = stats[field]
            feats[256 + j] = 0.0 if std == 0 else (float(it[field]) - mean) / std
        assert it["id"] not in out, f"duplicate id {it['id']}"
        out[it["id"]] = (int(it["label"]), feats)
    return out


def compare(ref, out_dir):
    import pyarrow.parquet as pq
    files = sorted(glob.glob(os.path.join(out_dir, "**", "*.parquet"), recursive=True))
    if not files:
        return [f"no Parquet files in {out_dir}"]
    problems = []
    seen = set()
    worst = 0.0
    for path in files:
        t = pq.read_table(path)
        keys = t.column("key").to_pylist()
        labels = t.column("label").to_pylist()
        feats = np.asarray(t.column("features").combine_chunks().flatten(),
                           dtype=np.float32).reshape(len(keys), -1)
        if feats.shape[1] != 258:
            problems.append(f"{path}: {feats.shape[1]} features, not 258")
            continue
        for k, lab, f in zip(keys, labels, feats):
            if k in seen:
                problems.append(f"key {k} written twice")
            seen.add(k)
            if k not in ref:
                problems.append(f"key {k} is not in the input")
                continue
            rlab, rf = ref[k]
            if lab != rlab:
                problems.append(f"key {k}: label {lab}, expected {rlab}")
            d = float(np.max(np.abs(f - rf)))
            worst = max(worst, d)
            if d > 1e-5:
                problems.append(f"key {k}: features differ by {d:.3g} (at "
                                f"{int(np.argmax(np.abs(f - rf)))})")
        if len(problems) > 20:
            break
    missing = len(set(ref) - seen)
    if missing:
        problems.append(f"{missing} input items not written")
    print(f"  {len(seen)} items compared, largest feature difference {worst:.3g}")
    return problems


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate")
    g.add_argument("dir")
    g.add_argument("--catalogs", type=int, default=4)
    g.add_argument("--items", type=int, default=1000)
    g.add_argument("--seed", type=int, default=1)
    c = sub.add_parser("check")
    c.add_argument("--input", default="")
    c.add_argument("--peers", default="ray,dask")
    c.add_argument("--workers", type=int, default=2)
    m = sub.add_parser("compare")
    m.add_argument("input")
    m.add_argument("output")
    a = p.parse_args()

    if a.cmd == "generate":
        generate(a.dir, a.catalogs, a.items, a.seed)
        return
    if a.cmd == "compare":
        problems = compare(reference(a.input), a.output)
        for x in problems[:20]:
            print("  " + x)
        print("OK" if not problems else "FAILED")
        sys.exit(1 if problems else 0)

    tmp = tempfile.mkdtemp(prefix="celer-pp-check.")
    inp = a.input or os.path.join(tmp, "input")
    if not a.input:
        generate(inp, 3, 400, 7)
    ref = reference(inp)
    print(f"reference: {len(ref)} items from {inp}")
    failed = False
    for peer in a.peers.split(","):
        script, flag = {"ray": ("ray_preprocess.py", "--parallelism"),
                        "dask": ("dask_preprocess.py", "--workers")}[peer]
        out = os.path.join(tmp, f"out-{peer}")
        r = subprocess.run([sys.executable, os.path.join(HERE, script), "--input", inp,
                            "--output", out, flag, str(a.workers)])
        if r.returncode != 0:
            print(f"{peer}: FAILED (exit {r.returncode})")
            failed = True
            continue
        problems = compare(ref, out)
        for x in problems[:20]:
            print("  " + x)
        print(f"{peer}: {'OK' if not problems else 'FAILED'}")
        failed |= bool(problems)
    print(f"(files in {tmp})")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
