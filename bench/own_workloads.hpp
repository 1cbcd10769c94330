#pragma once
// celer's own microbenchmark workloads beside Ray's (microbenchmark.cpp runs them): a
// streaming generator read value by value, coroutine actors (Ray's async actors), and the
// running task that cancel_running_task_latency cancels.

#include <celer/celer.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>

/// Streams `n` small values from one task and reads each as it comes (`backpressure`: the
/// generator's window, -1 for none); throws if one is missing or wrong.
void read_stream(std::int64_t n, int backpressure);

/// A coroutine actor: a method that returns at once, and one that parks until `gate` is ready.
struct async_bench_actor {
  celer::future<std::string> small_value();
  celer::future<std::int32_t> after(celer::object_ref<std::int32_t> gate, std::int32_t i);
};
async_bench_actor* make_async_bench_actor();

/// The gate async_actor_calls_parked's calls await: wait(round) returns once open(round)
/// was called (two threads: a wait blocks one).
struct bench_gate {
  std::int32_t wait(std::int32_t round);
  bool open(std::int32_t round);

  std::mutex m;
  std::condition_variable cv;
  std::int32_t opened = 0;
};
bench_gate* make_bench_gate();

/// Set by spin_until_cancelled as it starts and as it sees its cancel (embedded: the driver
/// and the workers share this process).
extern std::atomic<bool> spinner_started, spinner_stopped;
/// Spins until celer::is_cancelled(); returns 0.
std::int32_t spin_until_cancelled();
