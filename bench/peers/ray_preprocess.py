"""celer-preprocess's pipeline on Ray Data (bench/README.md, "celer-preprocess's peers"):
read_json (Arrow's reader, one read task per file) -> map_batches: tokenise and hash ->
materialize -> map_batches: the moments of price and rating per batch, combined on the
driver into the mean and population std -> map_batches: normalise, build the 258
features -> write_parquet. (Dataset.aggregate(Mean, Std) gives the same figures but costs
5-9 s more here, whatever the size: it starts aggregator actors.) Counts the rows written from the
Parquet footers. Needs `pip install ray xxhash psutil numpy pyarrow pandas`.

    python bench/peers/ray_preprocess.py --input DIR --output OUT [--parallelism N] [--json FILE]

Time: from before read_json to after the last file is written and counted; ray.init is
left out. Memory: bench/peers/preprocess_common.py's PeakMemory over the driver and all its
descendants (GCS, raylet, workers), started after ray.init.
"""

import os
import sys

from ray import cloudpickle  # Ray pickles with its own copy
import pyarrow.json as pajson
import ray

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import preprocess_common as pc  # noqa: E402

cloudpickle.register_pickle_by_value(pc)  # the workers need not find the module

BATCH = 4096


def featurize(batch):
    return {
        "key": batch["id"],
        "label": batch["label"],
        "counts": pc.bag_of_words(batch["title"], batch["description"]),
        "price": batch["price"],
        "rating": batch["rating"],
    }


def partial_moments(batch):
    return {"price": [pc.moments(batch["price"])], "rating": [pc.moments(batch["rating"])]}


def normalise(batch, stats):
    return pc.output_table(batch["key"], batch["label"], batch["counts"], batch["price"],
                           batch["rating"], stats)


def pipeline(files, out):
    """Runs the pipeline; (items written, stats, seconds per phase)."""
    start = pc.clock()
    ds = ray.data.read_json(files, parse_options=pajson.ParseOptions(explicit_schema=pc.INPUT_SCHEMA))
    featured = ds.map_batches(featurize, batch_format="numpy", batch_size=BATCH).materialize()
    t_featured = pc.clock()
    parts = featured.select_columns(["price", "rating"]).map_batches(
        partial_moments, batch_format="numpy", batch_size=BATCH).take_all()
    stats = {f: pc.combine([tuple(p[f]) for p in parts]) for f in ("price", "rating")}
    t_stats = pc.clock()
    featured.map_batches(normalise, batch_format="numpy", batch_size=BATCH,
                         fn_kwargs={"stats": stats}).write_parquet(out)
    items = pc.count_rows(out)
    end = pc.clock()
    return items, stats, {"read_tokenise_hash": t_featured - start, "stats": t_stats - t_featured,
                          "normalise_write": end - t_stats}


def main():
    args = pc.parse_args("Ray Data", "--parallelism")
    files = pc.catalog_files(args.input)
    pc.prepare_output(args.output)
    ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    system = "ray " + ray.__version__
    if args.warmup:
        pc.warmup(pipeline, files, args.output, args.workers)
    with pc.PeakMemory() as mem:
        start = pc.clock()
        items, stats, phases = pipeline(files, args.output)
        seconds = pc.clock() - start
    pc.report(args, system, items, seconds, mem,
              {"memory_counted": "sum of RSS and of PSS of the driver and its descendants "
                                 "(GCS, raylet, workers); the object store is /dev/shm "
                                 "mapped by them, so it is in their RSS (once per process "
                                 "that touched a page) and in their PSS (once)",
               "stats": stats, "phases_s": phases})
    ray.shutdown()


if __name__ == "__main__":
    main()
