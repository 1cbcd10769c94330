"""celer's microbenchmark workloads on Dask distributed (a LocalCluster of worker
processes), with the names and units `celer microbenchmark` prints. Where Dask has no
equivalent the row says so. Needs `pip install distributed numpy`.

    python bench/peers/dask_perf.py [--num-cpus N] [--duration S] [--json FILE] [--only PAT]
"""

import multiprocessing

import numpy as np
from distributed import Client, LocalCluster, wait, worker_client

from common import Runner, parse_args


def small_value():
    return b"ok"


class Actor:
    def small_value(self):
        return b"ok"

    def small_value_arg(self, x):
        return b"ok"


def do_put_small():
    with worker_client() as c:  # leaves the worker's thread pool while it waits
        for _ in range(100):
            c.scatter(0)
    return 100


def work(actors, n):
    with worker_client():
        futures = [actors[i % len(actors)].small_value() for i in range(n)]
        for f in futures:
            f.result()
    return n


def small_value_batch(n):
    with worker_client() as c:
        return len(c.gather([c.submit(small_value, pure=False) for _ in range(n)]))


def main():
    # Some workloads take minutes per operation on Dask at Ray's sizes: cap each.
    args = parse_args("Dask", max_seconds=60)
    batch = 20 if args.smoke else 1000
    multi_n, multi_m = (20, 2) if args.smoke else (10000, 4)
    direct_n = 20 if args.smoke else 5000
    n_cpu = max(1, multiprocessing.cpu_count() // 2)
    workers = args.num_cpus or multiprocessing.cpu_count()
    big = np.zeros((1 if args.smoke else 100) * 1024 * 1024, dtype=np.int64)

    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                           dashboard_address=None)
    client = Client(cluster)
    import distributed
    r = Runner("dask distributed " + distributed.__version__, args)
    value = client.scatter(0)
    r.timeit("single_client_get_calls", lambda: value.result())
    r.timeit("single_client_put_calls", lambda: client.scatter(0))
    r.timeit("multi_client_put_calls",
             lambda: client.gather([client.submit(do_put_small, pure=False) for _ in range(10)]),
             1000)
    r.timeit("single_client_put_gigabytes", lambda: client.scatter(big), big.nbytes / 1e9,
             "GB per second")
    r.timeit("single_client_tasks_and_get_batch",
             lambda: client.gather([client.submit(small_value, pure=False) for _ in range(batch)]))
    r.skip("single_client_get_object_containing_10k_refs",
           "Dask futures cannot be returned inside a task's result")

    def wait_refs():
        not_ready = [client.submit(small_value, pure=False) for _ in range(batch)]
        while not_ready:
            not_ready = list(wait(not_ready, return_when="FIRST_COMPLETED").not_done)

    r.timeit("single_client_wait_1k_refs", wait_refs)
    r.timeit("single_client_tasks_sync", lambda: client.submit(small_value, pure=False).result())
    r.timeit("single_client_tasks_async",
             lambda: client.gather([client.submit(small_value, pure=False) for _ in range(batch)]),
             batch)
    r.timeit("multi_client_tasks_async",
             lambda: client.gather([client.submit(small_value_batch, multi_n, pure=False)
                                    for _ in range(multi_m)]), multi_n * multi_m)
    if r.selected("1_1_actor_calls"):
        a = client.submit(Actor, actor=True).result()
        r.timeit("1_1_actor_calls_sync", lambda: a.small_value().result())

        def actor_async():
            for f in [a.small_value() for _ in range(batch)]:
                f.result()

        r.timeit("1_1_actor_calls_async", actor_async, batch)
    r.skip("1_1_actor_calls_concurrent", "Dask actors have no max_concurrency")
    r.skip("1_n_actor_calls_async", "Dask actors cannot be passed to another actor's constructor")
    if r.selected("n_n_actor_calls_async"):
        actors = [client.submit(Actor, actor=True).result() for _ in range(n_cpu)]
        r.timeit("n_n_actor_calls_async",
                 lambda: client.gather([client.submit(work, actors, direct_n, pure=False)
                                        for _ in range(multi_m)]), multi_m * direct_n)
    r.skip("n_n_actor_calls_with_arg_async", "no Dask equivalent of a client actor with a put arg")
    r.skip("placement_group_create/removal", "Dask has no placement groups")
    for name in ("1_1_async_actor_calls_sync", "1_1_async_actor_calls_async", "async_actor_calls_parked"):
        r.skip(name, "not ported to Dask (its async actor methods run on the worker's event loop)")
    for name in ("generator_values_per_second", "generator_values_backpressure_per_second"):
        r.skip(name, "Dask has no streaming generators")
    client.close()
    cluster.close()
    r.finish()


if __name__ == "__main__":
    main()
