"""celer's microbenchmark workloads on Ray, as in Ray's own ray_perf.py, with the names and
units `celer microbenchmark` prints. Needs `pip install ray numpy`.

    python bench/peers/ray_perf.py [--num-cpus N] [--duration S] [--json FILE] [--only PAT]
"""

import multiprocessing

import numpy as np
import ray

from common import Runner, parse_args


@ray.remote(num_cpus=0)
class Actor:
    def small_value(self):
        return b"ok"

    def small_value_arg(self, x):
        return b"ok"

    def small_value_batch(self, n):
        ray.get([small_value.remote() for _ in range(n)])
        return n


@ray.remote(num_cpus=0)
class Client:
    def __init__(self, servers):
        self.servers = servers if isinstance(servers, list) else [servers]

    def small_value_batch(self, n):
        results = []
        for s in self.servers:
            results.extend([s.small_value.remote() for _ in range(n)])
        ray.get(results)
        return len(results)

    def small_value_batch_arg(self, n):
        x = ray.put(0)
        results = []
        for s in self.servers:
            results.extend([s.small_value_arg.remote(x) for _ in range(n)])
        ray.get(results)
        return len(results)


@ray.remote(num_cpus=0)
class AsyncActor:
    async def small_value(self):
        return b"ok"

    async def after(self, gate, i):
        # The gate comes in a list, so that Ray passes the ref rather than its value.
        return (await gate[0]) + i


@ray.remote(num_cpus=0, max_concurrency=2)
class Gate:
    def __init__(self):
        import threading
        self.opened = 0
        self.cv = threading.Condition()

    def wait(self, round_):
        with self.cv:
            self.cv.wait_for(lambda: self.opened >= round_)
        return 0

    def open(self, round_):
        with self.cv:
            self.opened = round_
            self.cv.notify_all()
        return True


@ray.remote(num_returns="streaming")
def stream_values(n):
    for i in range(n):
        yield i


def read_stream(n, backpressure):
    options = {} if backpressure < 0 else {"_generator_backpressure_num_objects": backpressure}
    i = 0
    for ref in stream_values.options(**options).remote(n):
        assert ray.get(ref) == i
        i += 1
    assert i == n


@ray.remote
def small_value():
    return b"ok"


@ray.remote
def do_put_small():
    for _ in range(100):
        ray.put(0)
    return 100


@ray.remote
def create_object_containing_ref():
    return [ray.put(1) for _ in range(10000)]


@ray.remote
def work(actors, n):
    ray.get([actors[i % len(actors)].small_value.remote() for i in range(n)])
    return n


def main():
    args = parse_args("Ray")
    batch = 20 if args.smoke else 1000
    multi_n, multi_m = (20, 2) if args.smoke else (10000, 4)
    direct_n = 20 if args.smoke else 5000
    arg_n = 20 if args.smoke else 1000
    n_cpu = max(1, multiprocessing.cpu_count() // 2)
    big = np.zeros((1 if args.smoke else 100) * 1024 * 1024, dtype=np.int64)

    ray.init(num_cpus=args.num_cpus or None, include_dashboard=False, log_to_driver=False)
    r = Runner("ray " + ray.__version__, args)
    value = ray.put(0)
    r.timeit("single_client_get_calls", lambda: ray.get(value))
    r.timeit("single_client_put_calls", lambda: ray.put(0))
    r.timeit("multi_client_put_calls", lambda: ray.get([do_put_small.remote() for _ in range(10)]), 1000)
    r.timeit("single_client_put_gigabytes", lambda: ray.put(big), big.nbytes / 1e9, "GB per second")
    r.timeit("single_client_tasks_and_get_batch",
             lambda: ray.get([small_value.remote() for _ in range(batch)]))
    holder = create_object_containing_ref.remote()
    r.timeit("single_client_get_object_containing_10k_refs", lambda: ray.get(holder))

    def wait_refs():
        not_ready = [small_value.remote() for _ in range(batch)]
        while not_ready:
            _, not_ready = ray.wait(not_ready)

    r.timeit("single_client_wait_1k_refs", wait_refs)
    r.timeit("single_client_tasks_sync", lambda: ray.get(small_value.remote()))
    r.timeit("single_client_tasks_async",
             lambda: ray.get([small_value.remote() for _ in range(batch)]), batch)
    if r.selected("multi_client_tasks_async"):
        actors = [Actor.remote() for _ in range(multi_m)]
        r.timeit("multi_client_tasks_async",
                 lambda: ray.get([a.small_value_batch.remote(multi_n) for a in actors]),
                 multi_n * multi_m)
    if r.selected("1_1_actor_calls_sync"):
        a = Actor.remote()
        r.timeit("1_1_actor_calls_sync", lambda: ray.get(a.small_value.remote()))
    if r.selected("1_1_actor_calls_async"):
        a = Actor.remote()
        r.timeit("1_1_actor_calls_async",
                 lambda: ray.get([a.small_value.remote() for _ in range(batch)]), batch)
    if r.selected("1_1_actor_calls_concurrent"):
        a = Actor.options(max_concurrency=16).remote()
        r.timeit("1_1_actor_calls_concurrent",
                 lambda: ray.get([a.small_value.remote() for _ in range(batch)]), batch)
    if r.selected("1_1_async_actor_calls_sync"):
        a = AsyncActor.remote()
        r.timeit("1_1_async_actor_calls_sync", lambda: ray.get(a.small_value.remote()))
    if r.selected("1_1_async_actor_calls_async"):
        a = AsyncActor.remote()
        r.timeit("1_1_async_actor_calls_async",
                 lambda: ray.get([a.small_value.remote() for _ in range(batch)]), batch)
    if r.selected("async_actor_calls_parked"):
        a = AsyncActor.remote()
        gate = Gate.remote()
        rounds = [0]

        def parked():
            rounds[0] += 1
            opened = gate.wait.remote(rounds[0])
            refs = [a.after.remote([opened], i) for i in range(batch)]
            assert ray.get(gate.open.remote(rounds[0]))
            assert ray.get(refs) == list(range(batch))
        r.timeit("async_actor_calls_parked", parked, batch)
    if r.selected("1_n_actor_calls_async"):
        actors = [Actor.remote() for _ in range(n_cpu)]
        client = Client.remote(actors)
        r.timeit("1_n_actor_calls_async", lambda: ray.get(client.small_value_batch.remote(direct_n)),
                 direct_n * n_cpu)
    if r.selected("n_n_actor_calls_async"):
        actors = [Actor.remote() for _ in range(n_cpu)]
        r.timeit("n_n_actor_calls_async",
                 lambda: ray.get([work.remote(actors, direct_n) for _ in range(multi_m)]),
                 multi_m * direct_n)
    if r.selected("n_n_actor_calls_with_arg_async"):
        clients = [Client.remote(Actor.remote()) for _ in range(n_cpu)]
        r.timeit("n_n_actor_calls_with_arg_async",
                 lambda: ray.get([c.small_value_batch_arg.remote(arg_n) for c in clients]),
                 arg_n * len(clients))
    if r.selected("generator_values_per_second"):
        r.timeit("generator_values_per_second", lambda: read_stream(1000, -1), 1000)
    if r.selected("generator_values_backpressure_per_second"):
        r.timeit("generator_values_backpressure_per_second", lambda: read_stream(1000, 16), 1000)
    if r.selected("placement_group_create/removal"):
        from ray.util.placement_group import placement_group, remove_placement_group

        def create_remove(n=100):
            pgs = [placement_group([{"CPU": 0.01}]) for _ in range(n)]
            for pg in pgs:
                pg.wait(timeout_seconds=30)
            for pg in pgs:
                remove_placement_group(pg)
        r.timeit("placement_group_create/removal", create_remove, 100)
    ray.shutdown()
    r.finish()


if __name__ == "__main__":
    main()
