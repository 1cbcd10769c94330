"""Merges the JSON of `celer microbenchmark` and the peers into one table:
workload, celer (embedded), celer on a local cluster (with --cluster), Ray (Python), Ray's
C++ API (with --ray-cpp), Dask, and celer's ratio to each (the cluster's figure when there is
one: like the peers', it runs in separate processes). A peer's JSON that is missing (it
could not run) is reported with the reason given on the command line.

    python table.py celer.json ray.json dask.json [--cluster celer-cluster.json]
                    [--ray-cpp ray-cpp.json] [--missing-ray WHY] [--missing-ray-cpp WHY]
                    [--missing-dask WHY] [--missing-cluster WHY]
"""

import argparse
import json
import os


def load(path):
    if not path or not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def fmt(v):
    if v is None:
        return "-"
    return f"{v:.0f}" if v >= 100 else f"{v:.3g}"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("celer")
    p.add_argument("ray")
    p.add_argument("dask")
    p.add_argument("--cluster", default="")
    p.add_argument("--missing-cluster", default="")
    p.add_argument("--ray-cpp", default="")
    p.add_argument("--missing-ray", default="")
    p.add_argument("--missing-ray-cpp", default="")
    p.add_argument("--missing-dask", default="")
    a = p.parse_args()
    celer, ray, dask = load(a.celer), load(a.ray), load(a.dask)
    if celer is None:
        raise SystemExit("no celer results")

    def by_name(doc):
        return {r["name"]: r for r in doc["results"]} if doc else {}

    cluster = load(a.cluster)
    ray_cpp = load(a.ray_cpp)
    c, r, d, k = by_name(celer), by_name(ray), by_name(dask), by_name(cluster)
    rc = by_name(ray_cpp)
    with_cpp = bool(a.ray_cpp)
    print(f"celer ({celer.get('mode', '')}"
          f"{', and on a local cluster' if cluster else ''}) vs "
          f"{ray['system'] if ray else 'Ray: missing'} vs "
          + (f"{ray_cpp['system'] if ray_cpp else 'Ray C++: missing'} vs " if with_cpp else "")
          + f"{dask['system'] if dask else 'Dask: missing'}; {celer.get('duration_s')} s trials")
    if cluster:
        print("ratios compare celer's cluster column (separate processes, like the peers)")
    print()
    head = (f"{'workload':<44} {'embedded':>9} {'cluster':>9} {'Ray':>9}"
            + (f" {'Ray C++':>9}" if with_cpp else "") + f" {'Dask':>9} {'/Ray':>7}"
            + (f" {'/RayC++':>7}" if with_cpp else "") + f" {'/Dask':>7}")
    print(head)
    print("-" * len(head))
    floor = []
    for name, cr in c.items():
        if name.startswith("floor_"):
            floor.append(cr)
            continue
        cv = cr.get("value")
        kv = k.get(name, {}).get("value")
        rv = r.get(name, {}).get("value")
        dv = d.get(name, {}).get("value")
        cppv = rc.get(name, {}).get("value")
        base = kv if cluster else cv

        def ratio(v):
            return f"{base / v:.1f}x" if base and v else "-"

        print(f"{name:<44} {fmt(cv):>9} {fmt(kv):>9} {fmt(rv):>9}"
              + (f" {fmt(cppv):>9}" if with_cpp else "") + f" {fmt(dv):>9} {ratio(rv):>7}"
              + (f" {ratio(cppv):>7}" if with_cpp else "") + f" {ratio(dv):>7}")
    units = {n: x.get("unit", "") for n, x in c.items()}
    print("\nGB per second for *_gigabytes, operations per second otherwise.")
    if floor:
        print("\nThe floor on this machine (no runtime):")
        for f in floor:
            print(f"  {f['name']:<44} {fmt(f['value']):>10}  {units.get(f['name'], '')}")
    notes = []
    if a.cluster and cluster is None:
        notes.append(f"celer cluster column missing: {a.missing_cluster or 'it did not run'}")
    peers = [(ray, a.missing_ray, "Ray")]
    if with_cpp:
        peers.append((ray_cpp, a.missing_ray_cpp, "Ray C++"))
    peers.append((dask, a.missing_dask, "Dask"))
    for doc, missing, label in peers:
        if doc is None:
            notes.append(f"{label} missing: {missing or 'it did not run'}")
        else:
            for x in doc["results"]:
                if "skipped" in x:
                    notes.append(f"{label} has no {x['name']}: {x['skipped']}")
    for doc, label in ((celer, "embedded"), (cluster, "cluster")):
        for x in (doc or {}).get("results", []):
            if "skipped" in x:
                notes.append(f"celer ({label}) skipped {x['name']}: {x['skipped']}")
    if notes:
        print()
        for n in notes:
            print(n)


if __name__ == "__main__":
    main()
