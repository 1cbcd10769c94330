"""Checks the peers of celer-preprocess against a plain single-process reference of the
pipeline (bench/README.md, "celer-preprocess's peers"): same keys, labels, and the 258
features to 1e-5. Also the dev-size input generator.

    python bench/peers/preprocess_check.py generate DIR [--catalogs 4] [--items 1000] [--seed 1]
    python bench/peers/preprocess_check.py check [--input DIR] [--peers ray,dask] [--workers 2]
    python bench/peers/preprocess_check.py compare INPUT OUTPUT_DIR
    python bench/peers/preprocess_check.py self-test [--verbose]

`check` without --input generates a small input (3 catalogs x 400 items) in a temporary
folder, runs each peer on it and compares. `compare` checks one output folder: a
celer-preprocess output directory (it has a manifest.json: CELERRC1 shards of schema
f32:258, read by celerrc1.py, every CRC and the manifest's key checksum checked) or any
Parquet output of the peers' schema. `self-test` runs `compare` on synthetic
celer-preprocess directories written from the reference (OK) and on tampered copies
(FAILED).

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


class Rows:
    """Compares output rows with the reference as they come: each key once and in the
    input, the same label, the 258 features within 1e-5 (a NaN or inf differs). Keeps the
    first problems of each kind and counts them all."""

    KEEP = 10  # problems kept per kind

    def __init__(self, ref):
        self.ref, self.seen, self.worst = ref, set(), 0.0
        self.problems = {}  # kind -> [count, first messages]

    def problem(self, kind, msg):
        c = self.problems.setdefault(kind, [0, []])
        c[0] += 1
        if len(c[1]) < self.KEEP:
            c[1].append(msg)

    def add(self, k, lab, f):
        if k in self.seen:
            self.problem("twice", f"key {k} written twice")
        self.seen.add(k)
        if k not in self.ref:
            self.problem("extra", f"key {k} is not in the input")
            return
        rlab, rf = self.ref[k]
        if lab != rlab:
            self.problem("label", f"key {k}: label {lab}, expected {rlab}")
        diff = np.abs(f.astype(np.float64) - rf)
        d = float(np.max(diff))
        if not d <= 1e-5:  # NaN compares false
            at = int(np.argmax(np.where(np.isnan(diff), np.inf, diff)))
            self.problem("features", f"key {k}: features differ by {d:.3g} (at {at}: "
                                     f"{float(f[at]):.8g}, expected {float(rf[at]):.8g})")
        if d > self.worst or d != d:
            self.worst = d

    def finish(self, complete=True):
        missing = sorted(set(self.ref) - self.seen)
        if missing and complete:
            self.problem("missing", f"{len(missing)} input items not written (first: "
                                    f"{', '.join(missing[:5])})")
        print(f"  {len(self.seen)} items compared, largest feature difference {self.worst:.3g}")
        out = []
        for count, first in self.problems.values():
            out.extend(first)
            if count > len(first):
                out.append(f"... and {count - len(first)} more like the last")
        return out


def compare(ref, out_dir):
    """The problems (empty: OK) of an output folder against the reference: a
    celer-preprocess output directory (it has a manifest.json) or Parquet files."""
    if os.path.isfile(os.path.join(out_dir, "manifest.json")):
        return compare_records(ref, out_dir)
    import pyarrow.parquet as pq
    files = sorted(glob.glob(os.path.join(out_dir, "**", "*.parquet"), recursive=True))
    if not files:
        return [f"no Parquet files and no manifest.json in {out_dir}"]
    rows = Rows(ref)
    for path in files:
        t = pq.read_table(path)
        keys = t.column("key").to_pylist()
        labels = t.column("label").to_pylist()
        feats = np.asarray(t.column("features").combine_chunks().flatten(),
                           dtype=np.float32).reshape(len(keys), -1)
        if feats.shape[1] != 258:
            rows.problem("shape", f"{path}: {feats.shape[1]} features, not 258")
            continue
        for k, lab, f in zip(keys, labels, feats):
            rows.add(k, lab, f)
    return rows.finish()


def key_checksum(keys):
    """celer's key_digest: sum of XXH64(key, seed 0x6b6579) mod 2^64, 16 lower-case hex."""
    total = 0
    for k in keys:
        total += xxhash.xxh64_intdigest(k, seed=0x6B6579)
    return f"{total & (2**64 - 1):016x}"


def compare_records(ref, out_dir):
    """celer-preprocess's output directory (bench/peers/celerrc1.py reads it): manifest.json
    and CELERRC1 shards of schema f32:258 (payload: the 258 features as little-endian
    float32; key: the item's id; label: its label). Every shard's CRCs are checked (a damaged
    shard stops the comparison), then the rows as compare()'s, then the manifest's key
    checksum against the keys written and the input's ids."""
    sys.path.insert(0, HERE)
    import celerrc1
    try:
        m = celerrc1.read_manifest(out_dir)
    except celerrc1.RecordFileError as e:
        return [str(e)]
    problems = []
    if m["schema"] != "f32:258":
        return [f"{out_dir}: schema {m['schema']!r}, expected 'f32:258' (258 float32 features)"]
    print(f"  {len(m['shards'])} shards, {m['items']} records (manifest.json)")
    rows = Rows(ref)
    written = []
    complete = True
    try:
        for _, key, label, payload in celerrc1.read_output(out_dir, verify=True,
                                                            check_keys=False):
            written.append(key)
            try:
                k = key.decode("utf-8")
            except UnicodeDecodeError:
                k = repr(key)
            rows.add(k, label, np.frombuffer(payload, dtype="<f4"))
    except celerrc1.RecordFileError as e:
        problems.append(str(e) + " (the comparison stops there)")
        complete = False
    problems += rows.finish(complete)
    if complete:
        print("  every shard's CRCs checked")
        got, want = key_checksum(written), m["key_checksum"]
        expected = key_checksum(k.encode() for k in ref)
        if got != want:
            problems.append(f"manifest.json: key_checksum {want}, over the {len(written)} keys "
                            f"written {got}")
        if want != expected:
            problems.append(f"manifest.json: key_checksum {want}, over the input's "
                            f"{len(ref)} ids {expected}")
        if got == want == expected:
            print(f"  key checksum {got}: the manifest's, the records' and the input's")
    return problems


def synthetic_output(ref, out_dir, shards=3, change=None):
    """A celer-preprocess output directory holding the reference's rows (bench/peers/
    celerrc1.py's writer): item i to shard i % shards, in sorted-key order. `change(records)`
    may alter the list of (key, label, float32 array) first."""
    sys.path.insert(0, HERE)
    import celerrc1
    recs = [(k, lab, f.copy()) for k, (lab, f) in sorted(ref.items())]
    if change:
        change(recs)
    parts = [[(k, lab, np.asarray(f, dtype="<f4").tobytes()) for k, lab, f in recs[j::shards]]
             for j in range(shards)]
    return celerrc1.write_output(out_dir, "f32:258", parts, classes=CATEGORIES)


def self_test(verbose=False):
    """compare on synthetic celer-preprocess output directories: the reference's own rows
    (OK), then tampered copies (FAILED, saying what)."""
    import shutil
    tmp = tempfile.mkdtemp(prefix="celer-pp-selftest.")
    inp = os.path.join(tmp, "input")
    generate(inp, 2, 150, 3)
    ref = reference(inp)
    keys = sorted(ref)

    def feature(recs):
        recs[7][2][3] += 1e-3
        recs[9][2][257] += 2e-5

    def label(recs):
        recs[11] = (recs[11][0], recs[11][1] + 1, recs[11][2])

    def nan(recs):
        recs[5][2][256] = np.nan

    def rewrite_checksum(d):
        with open(os.path.join(d, "manifest.json")) as f:
            mm = json.load(f)
        mm["key_checksum"] = "0123456789abcdef"
        with open(os.path.join(d, "manifest.json"), "w") as f:
            json.dump(mm, f)

    def flip(d):
        path = os.path.join(d, "shard-00001.rec")
        with open(path, "r+b") as f:
            f.seek(400)
            b = f.read(1)
            f.seek(400)
            f.write(bytes([b[0] ^ 4]))

    cases = [  # name, change to the records, change to the directory, words expected
        ("ok", None, None, ["OK", f"key checksum"]),
        ("feature", feature, None, [f"key {keys[7]}: features differ by 0.001 (at 3",
                                    f"key {keys[9]}: features differ by 2e-05 (at 257"]),
        ("label", label, None, [f"key {keys[11]}: label {ref[keys[11]][0] + 1}, expected"]),
        ("nan", nan, None, [f"key {keys[5]}: features differ by nan (at 256"]),
        ("dropped", lambda r: r.pop(20), None, [f"1 input items not written (first: {keys[20]})",
                                                "over the input's 300 ids"]),
        ("twice", lambda r: r.append(r[30]), None, [f"key {keys[30]} written twice"]),
        ("extra", lambda r: r.append(("zz-000001", 1, r[0][2])), None,
         ["key zz-000001 is not in the input"]),
        ("checksum", None, rewrite_checksum, ["key_checksum 0123456789abcdef, over the 300"]),
        ("flipped", None, flip, ["shard-00001.rec: checksum mismatch in record"]),
    ]
    failed = 0
    for name, change, damage, words in cases:
        d = os.path.join(tmp, f"out-{name}")
        synthetic_output(ref, d, change=change)
        if damage:
            damage(d)
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "compare", inp, d],
                           capture_output=True, text=True)
        want_rc = 0 if name == "ok" else 1
        last = r.stdout.strip().splitlines()[-1:] or [""]
        good = (r.returncode == want_rc and last[0] == ("OK" if want_rc == 0 else "FAILED")
                and all(w in r.stdout for w in words))
        print(f"{name}: exit {r.returncode}, {last[0]}: {'as expected' if good else 'NOT AS EXPECTED'}")
        if not good or verbose:
            print("    " + r.stdout.strip().replace("\n", "\n    "))
            if r.stderr:
                print("    stderr: " + r.stderr.strip()[-2000:])
        failed += not good
    if failed:
        print(f"self-test: {failed} of {len(cases)} cases FAILED (files in {tmp})")
        sys.exit(1)
    shutil.rmtree(tmp)
    print(f"self-test: all {len(cases)} cases as expected")


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
    t = sub.add_parser("self-test")
    t.add_argument("--verbose", action="store_true", help="print every case's output")
    a = p.parse_args()

    if a.cmd == "generate":
        generate(a.dir, a.catalogs, a.items, a.seed)
        return
    if a.cmd == "self-test":
        self_test(a.verbose)
        return
    if a.cmd == "compare":
        problems = compare(reference(a.input), a.output)
        for x in problems[:40]:
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
        for x in problems[:40]:
            print("  " + x)
        print(f"{peer}: {'OK' if not problems else 'FAILED'}")
        failed |= bool(problems)
    print(f"(files in {tmp})")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
