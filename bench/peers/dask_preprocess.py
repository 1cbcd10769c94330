"""celer-preprocess's pipeline on Dask (bench/README.md, "celer-preprocess's peers"), on a
distributed.LocalCluster of N one-thread worker processes: dask.bag.read_text (one
partition per file) -> map(json.loads) -> map_partitions: tokenise and hash into one block
of arrays per partition -> persist -> the moments of price and rating per partition,
combined on the client -> per partition: normalise, build the 258 features, write a
Parquet file -> sum the rows written. Needs `pip install dask distributed xxhash psutil
numpy pyarrow`.

    python bench/peers/dask_preprocess.py --input DIR --output OUT [--workers N] [--json FILE]

Time: from before read_text to after the last file is written; starting the cluster is
left out. Memory: bench/peers/preprocess_common.py's PeakMemory over the client process and
all its descendants (the nannies, the workers), started after the cluster.
"""

import json
import os
import sys

import cloudpickle
import dask
import dask.bag as db
import distributed
import pyarrow.parquet as pq
from distributed import Client, LocalCluster

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import preprocess_common as pc  # noqa: E402

cloudpickle.register_pickle_by_value(pc)


def featurize(records):
    records = list(records)
    return [{
        "key": [r["id"] for r in records],
        "label": [r["label"] for r in records],
        "counts": pc.bag_of_words([r["title"] for r in records],
                                  [r["description"] for r in records]),
        "price": [r["price"] for r in records],
        "rating": [r["rating"] for r in records],
    }]


def partial_moments(blocks):
    b = blocks[0]
    return [(pc.moments(b["price"]), pc.moments(b["rating"]))]


def write(blocks, index, stats, out):
    b = blocks[0]
    t = pc.output_table(b["key"], b["label"], b["counts"], b["price"], b["rating"], stats)
    pq.write_table(t, os.path.join(out, f"part-{index:05d}.parquet"))
    return t.num_rows


def pipeline(client, files, out):
    """Runs the pipeline; (items written, stats, seconds per phase)."""
    start = pc.clock()
    featured = db.read_text(files, blocksize=None).map(json.loads).map_partitions(featurize)
    featured = client.persist(featured)
    distributed.wait(featured)
    t_featured = pc.clock()
    parts = featured.map_partitions(partial_moments).compute()
    stats = {"price": pc.combine([p for p, _ in parts]),
             "rating": pc.combine([r for _, r in parts])}
    t_stats = pc.clock()
    writes = [dask.delayed(write)(p, i, stats, out) for i, p in enumerate(featured.to_delayed())]
    items = sum(dask.compute(*writes))
    end = pc.clock()
    return items, stats, {"read_tokenise_hash": t_featured - start, "stats": t_stats - t_featured,
                          "normalise_write": end - t_stats}


def main():
    args = pc.parse_args("Dask", "--workers")
    files = pc.catalog_files(args.input)
    out = os.path.abspath(args.output)
    pc.prepare_output(out)
    cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                           dashboard_address=None)
    client = Client(cluster)
    system = "dask distributed " + distributed.__version__
    if args.warmup:
        pc.warmup(lambda f, o: pipeline(client, f, o), files, out, args.workers)
    with pc.PeakMemory() as mem:
        start = pc.clock()
        items, stats, phases = pipeline(client, files, out)
        seconds = pc.clock() - start
    pc.report(args, system, items, seconds, mem,
              {"memory_counted": "sum of RSS and of PSS of the client process and its "
                                 "descendants (nannies, workers)",
               "stats": stats, "phases_s": phases})
    client.close()
    cluster.close()


if __name__ == "__main__":
    main()
