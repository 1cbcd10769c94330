#include "own_workloads.hpp"

#include <stdexcept>
#include <thread>

namespace {
/// `n` small values, streamed from one running task to its caller.
celer::generator<std::int64_t> stream_values(std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) co_yield i;
}
} // namespace

void read_stream(std::int64_t n, int backpressure) {
  celer::task_options opts;
  opts.generator_backpressure = backpressure;
  auto s = celer::task(stream_values).options(opts).remote(n);
  std::int64_t i = 0;
  for (const auto& ref : s) {
    if (celer::get(ref) != i) throw std::runtime_error("a stream's value came back wrong");
    ++i;
  }
  if (i != n) throw std::runtime_error("a stream ended early");
}

celer::future<std::string> async_bench_actor::small_value() { co_return std::string("ok"); }
celer::future<std::int32_t> async_bench_actor::after(celer::object_ref<std::int32_t> gate, std::int32_t i) {
  co_return co_await gate + i;
}
async_bench_actor* make_async_bench_actor() { return new async_bench_actor(); }

std::int32_t bench_gate::wait(std::int32_t round) {
  std::unique_lock lock(m);
  cv.wait(lock, [&] { return opened >= round; });
  return 0;
}
bool bench_gate::open(std::int32_t round) {
  {
    std::lock_guard lock(m);
    opened = round;
  }
  cv.notify_all();
  return true;
}
bench_gate* make_bench_gate() { return new bench_gate(); }

std::atomic<bool> spinner_started{false}, spinner_stopped{false};
std::int32_t spin_until_cancelled() {
  spinner_started.store(true);
  while (!celer::is_cancelled()) std::this_thread::yield();
  spinner_stopped.store(true);
  return 0;
}

CELER_REMOTE(spin_until_cancelled, stream_values, make_async_bench_actor, &async_bench_actor::small_value, &async_bench_actor::after,
             make_bench_gate, &bench_gate::wait, &bench_gate::open);
