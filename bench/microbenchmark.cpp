// celer-microbenchmark (run as `celer microbenchmark`): the workloads of Ray's
// microbenchmark (python/ray/_private/ray_perf.py), under the same names and units, measured
// the way Ray measures them: a warm-up, then 4 trials, each repeating the workload for
// --duration seconds; the figure is operations (or GB) per second, mean ± standard
// deviation over the trials. Every workload checks its results; a wrong one stops the run.
//
//   celer microbenchmark [--address ADDR] [--only PATTERN] [--json FILE] [--duration S]
//                        [--smoke] [--queued-tasks N]
//
// queued_tasks_* (celer's own, not Ray's) is not a timeit loop: N no-op tasks are submitted
// at once while gate actors hold every CPU, so none runs yet; the driver's memory growth
// over that submission, divided by N, is the bytes per queued task. Then the gates go, every
// result is read, and the end-to-end rate is N over the submission plus the drain.
#include "floor/floor.hpp"
#include "own_workloads.hpp"

#include <celer/celer.hpp>

#include <nlohmann/json.hpp>

#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

namespace {

// ---------------------------------------------------------------- remote functions

std::string small_value() { return "ok"; }

void check_ok(const std::vector<std::string>& got) {
  for (const auto& v : got) {
    if (v != "ok") throw std::runtime_error("a workload returned '" + v + "', not 'ok'");
  }
}

int small_value_batch(int n) {
  std::vector<celer::object_ref<std::string>> refs;
  refs.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) refs.push_back(celer::task(small_value).remote());
  check_ok(celer::get(refs));
  return n;
}

int do_put_small() {
  for (int i = 0; i < 100; ++i) (void)celer::put(0);
  return 100;
}

std::vector<celer::object_ref<int>> create_object_containing_ref() {
  std::vector<celer::object_ref<int>> refs;
  refs.reserve(10000);
  for (int i = 0; i < 10000; ++i) refs.push_back(celer::put(1));
  return refs;
}

struct bench_actor {
  std::string small_value() const { return "ok"; }
  std::string small_value_arg(int) const { return "ok"; }
  int small_value_batch(int n) const { return ::small_value_batch(n); }
};
bench_actor* make_bench_actor() { return new bench_actor(); }

struct client {
  explicit client(std::vector<celer::actor_handle<bench_actor>> s) : servers(std::move(s)) {}
  int small_value_batch(int n) {
    std::vector<celer::object_ref<std::string>> refs;
    for (auto& s : servers) {
      for (int i = 0; i < n; ++i) refs.push_back(s.task(&bench_actor::small_value).remote());
    }
    check_ok(celer::get(refs));
    return static_cast<int>(refs.size());
  }
  int small_value_batch_arg(int n) {
    auto x = celer::put(0);
    std::vector<celer::object_ref<std::string>> refs;
    for (auto& s : servers) {
      for (int i = 0; i < n; ++i) refs.push_back(s.task(&bench_actor::small_value_arg).remote(x));
    }
    check_ok(celer::get(refs));
    return static_cast<int>(refs.size());
  }
  std::vector<celer::actor_handle<bench_actor>> servers;
};
client* make_client(std::vector<celer::actor_handle<bench_actor>> servers) {
  return new client(std::move(servers));
}

int work(std::vector<celer::actor_handle<bench_actor>> actors, int n) {
  std::vector<celer::object_ref<std::string>> refs;
  refs.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    refs.push_back(actors[static_cast<std::size_t>(i) % actors.size()]
                     .task(&bench_actor::small_value)
                     .remote());
  }
  check_ok(celer::get(refs));
  return n;
}

/// `size` bytes, each its index's low byte plus `seed`.
celer::bytes make_bytes(std::int64_t size, int seed) {
  celer::bytes b(static_cast<std::size_t>(size));
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::uint8_t>(i + static_cast<unsigned>(seed));
  return b;
}

void check_bytes(const celer::bytes& b, std::size_t size, int seed) {
  if (b.size() != size) throw std::runtime_error("an object came back with the wrong size");
  for (std::size_t i = 0; i < size; i += 4093) {
    if (b.data()[i] != static_cast<std::uint8_t>(i + static_cast<unsigned>(seed))) {
      throw std::runtime_error("an object came back with the wrong bytes");
    }
  }
}

CELER_REMOTE(make_bytes);

/// The queued-task workload's task: does nothing, returns 1 (the sum checks every result).
std::int32_t noop_task() { return 1; }

/// Holds one CPU while it lives: queued_tasks makes one per CPU so that no task can run.
struct cpu_gate {
  bool ready() const { return true; }
};
cpu_gate* make_cpu_gate() { return new cpu_gate(); }

CELER_REMOTE(noop_task, make_cpu_gate, &cpu_gate::ready);

CELER_REMOTE(small_value, small_value_batch, do_put_small, create_object_containing_ref,
             make_bench_actor, &bench_actor::small_value, &bench_actor::small_value_arg,
             &bench_actor::small_value_batch, make_client, &client::small_value_batch,
             &client::small_value_batch_arg, work);

// ---------------------------------------------------------------- measuring

struct options {
  std::string address;
  std::string only;
  std::string json;
  double duration = 2.0;
  bool smoke = false;
  std::size_t queued_tasks = 1000000;
};

struct result {
  std::string name;
  std::string unit;
  double mean = 0;
  double stddev = 0;
  std::string skipped;  // why, when not run
};

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

std::string format(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, v >= 100 ? "%.0f" : "%.3g", v);
  return buf;
}

void print_row(const result& r) {
  if (!r.skipped.empty()) {
    std::printf("%-48s %28s  (skipped: %s)\n", r.name.c_str(), "-", r.skipped.c_str());
  } else {
    const std::string figure = format(r.mean) + " +- " + format(r.stddev);
    std::printf("%-48s %28s  %s\n", r.name.c_str(), figure.c_str(), r.unit.c_str());
  }
  std::fflush(stdout);
}

/// Ray's timeit: warm up, then 4 trials of `duration`; `multiplier` operations per call.
result timeit(const options& o, const std::string& name, const std::function<void()>& fn,
              double multiplier = 1, const std::string& unit = "per second") {
  const double warmup = o.smoke ? 0 : o.duration / 2;
  std::size_t count = 0;
  const auto w0 = clock_type::now();
  do {
    fn();
    ++count;
  } while (seconds_since(w0) < warmup);
  const std::size_t step = count / 10 + 1;
  std::vector<double> stats;
  for (int trial = 0; trial < 4; ++trial) {
    std::size_t n = 0;
    const auto t0 = clock_type::now();
    do {
      for (std::size_t i = 0; i < step; ++i) fn();
      n += step;
    } while (seconds_since(t0) < o.duration);
    stats.push_back(multiplier * static_cast<double>(n) / seconds_since(t0));
  }
  result r{name, unit, 0, 0, {}};
  r.mean = std::accumulate(stats.begin(), stats.end(), 0.0) / static_cast<double>(stats.size());
  for (double s : stats) r.stddev += (s - r.mean) * (s - r.mean);
  r.stddev = std::sqrt(r.stddev / static_cast<double>(stats.size()));
  return r;
}

bool selected(const options& o, const std::string& name) {
  return o.only.empty() || name.find(o.only) != std::string::npos;
}

/// The JSON bench/peers/table.py reads (and bench/peers/common.py writes for the peers).
void write_json(const std::string& path, const std::vector<result>& results, const options& o) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : results) {
    if (r.skipped.empty()) {
      rows.push_back({{"name", r.name}, {"value", r.mean}, {"std", r.stddev}, {"unit", r.unit}});
    } else {
      rows.push_back({{"name", r.name}, {"skipped", r.skipped}});
    }
  }
  const nlohmann::json doc{{"system", "celer"},
                           {"mode", o.address.empty() ? std::string("embedded") : "cluster " + o.address},
                           {"duration_s", o.duration},
                           {"results", rows}};
  std::ofstream(path) << doc.dump(2) << "\n";
}

/// GB/s of reading objects made on another node (each read pulls one to this node).
result transfer(const options& o, std::size_t bytes, std::size_t count) {
  const std::string here = "node:" + celer::current_node_id().hex();
  std::string other;
  for (const auto& [name, amount] : celer::cluster_resources()) {
    if (name.starts_with("node:") && name != here) other = name;
  }
  if (other.empty()) return {"object_transfer_gigabytes", "", 0, 0, "needs a cluster of two nodes or more"};
  std::vector<double> rates;
  for (int trial = 0; trial < (o.smoke ? 1 : 2); ++trial) {
    std::vector<celer::object_ref<celer::bytes>> made;
    for (std::size_t i = 0; i < count; ++i) {
      made.push_back(celer::task(make_bytes)
                       .options({.num_cpus = 0, .resources = {{other, 0.001}}})
                       .remote(static_cast<std::int64_t>(bytes), static_cast<int>(i)));
    }
    (void)celer::wait(made, made.size());  // made there; none read yet
    for (std::size_t i = 0; i < count; ++i) {
      const auto t0 = clock_type::now();
      const auto b = celer::get(made[i]);
      rates.push_back(static_cast<double>(bytes) / 1e9 / seconds_since(t0));
      check_bytes(b, bytes, static_cast<int>(i));
    }
  }
  result r{"object_transfer_gigabytes", "GB per second", 0, 0, {}};
  r.mean = std::accumulate(rates.begin(), rates.end(), 0.0) / static_cast<double>(rates.size());
  for (double x : rates) r.stddev += (x - r.mean) * (x - r.mean);
  r.stddev = std::sqrt(r.stddev / static_cast<double>(rates.size()));
  return r;
}

/// GB/s of spilling (puts into a full store, each moving an older object to disk) and of
/// restoring (reading spilled objects back), in an embedded runtime with a store of
/// `count` objects' size.
std::vector<result> spill_and_restore(std::size_t bytes, std::size_t count) {
  celer::init({.object_store_memory = static_cast<double>(bytes * count + (1u << 20))});
  std::vector<celer::object_ref<celer::bytes>> first, second;
  std::vector<celer::bytes> values;
  for (std::size_t i = 0; i < 2 * count; ++i) {
    values.push_back(make_bytes(static_cast<std::int64_t>(bytes), static_cast<int>(i)));
  }
  for (std::size_t i = 0; i < count; ++i) first.push_back(celer::put(values[i]));
  const auto before = celer::local_object_store_stats();
  auto t0 = clock_type::now();
  for (std::size_t i = 0; i < count; ++i) second.push_back(celer::put(values[count + i]));
  const double spill_s = seconds_since(t0);
  const auto spilled = celer::local_object_store_stats();
  second.clear();  // freed: the restores below need not spill again
  const auto deadline = clock_type::now() + std::chrono::seconds(30);
  while (celer::local_object_store_stats().objects_in_memory > 0) {
    if (clock_type::now() > deadline) throw std::runtime_error("freed objects stayed in the store");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  t0 = clock_type::now();
  for (std::size_t i = 0; i < count; ++i) check_bytes(celer::get(first[i]), bytes, static_cast<int>(i));
  const double restore_s = seconds_since(t0);
  const auto restored = celer::local_object_store_stats();
  first.clear();
  celer::shutdown();
  const double spill_bytes = static_cast<double>(spilled.spilled_bytes - before.spilled_bytes);
  const double restore_bytes = static_cast<double>(restored.restored_bytes - before.restored_bytes);
  if (spill_bytes < static_cast<double>(bytes) || restore_bytes < static_cast<double>(bytes)) {
    throw std::runtime_error("the store did not spill and restore as expected");
  }
  return {{"object_spill_gigabytes", "GB per second", spill_bytes / 1e9 / spill_s, 0, {}},
          {"object_restore_gigabytes", "GB per second", restore_bytes / 1e9 / restore_s, 0, {}}};
}

/// This process's memory now: resident (/proc/self/statm) and malloc's bytes in use
/// (mallinfo2: every arena, mmapped chunks too).
struct memory_sample {
  double rss = 0;
  double heap = 0;
};

memory_sample sample_memory() {
  long pages = 0;
  long resident = 0;
  std::ifstream("/proc/self/statm") >> pages >> resident;
  const auto m = mallinfo2();
  return {static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)),
          static_cast<double>(m.uordblks + m.hblkhd)};
}

/// The most this process has been resident (bytes).
double peak_rss() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) * 1024;
}

/// One actor of one CPU per CPU of the cluster, ready and holding its CPU (checked with
/// available_resources): a task submitted now waits for a lease.
std::vector<celer::actor_handle<cpu_gate>> hold_every_cpu() {
  const auto total = celer::cluster_resources();
  const auto cpus = total.contains("CPU") ? static_cast<int>(std::lround(total.at("CPU"))) : 0;
  std::vector<celer::actor_handle<cpu_gate>> gates;
  for (int i = 0; i < cpus; ++i) gates.push_back(celer::actor(make_cpu_gate).options({.num_cpus = 1}).remote());
  for (auto& g : gates) {
    if (!celer::get(g.task(&cpu_gate::ready).remote())) throw std::runtime_error("a gate actor did not start");
  }
  // The head hears of the gates' CPUs with the nodes' heartbeats.
  const auto deadline = clock_type::now() + std::chrono::seconds(30);
  for (;;) {
    const auto free = celer::available_resources();
    if (!free.contains("CPU") || free.at("CPU") < 1) break;
    if (clock_type::now() > deadline) throw std::runtime_error("the gate actors did not take every CPU");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return gates;
}

/// Mean and standard deviation over 4 trials of the mean of `sample` (microseconds), each
/// trial sampling for `duration`.
result latency(const options& o, const std::string& name, const std::string& unit,
               const std::function<double()>& sample) {
  for (int i = 0; i < 10; ++i) (void)sample();  // warm-up
  std::vector<double> trials;
  for (int trial = 0; trial < 4; ++trial) {
    double sum = 0;
    std::size_t n = 0;
    const auto t0 = clock_type::now();
    do {
      sum += sample();
      ++n;
    } while (seconds_since(t0) < o.duration);
    trials.push_back(sum / static_cast<double>(n));
  }
  result r{name, unit, 0, 0, {}};
  r.mean = std::accumulate(trials.begin(), trials.end(), 0.0) / 4;
  for (double t : trials) r.stddev += (t - r.mean) * (t - r.mean);
  r.stddev = std::sqrt(r.stddev / 4);
  return r;
}

/// celer::cancel's latency (celer's own workloads): from cancel() until get() throws
/// task_cancelled_error for a task waiting for CPUs (every CPU held by a gate), and, embedded,
/// from cancel() until a running task that polls celer::is_cancelled() has stopped.
std::vector<result> cancel_latency(const options& o, bool embedded) {
  std::vector<result> out;
  {
    auto gates = hold_every_cpu();
    out.push_back(latency(o, "cancel_queued_task_latency", "microseconds (cancel until get throws)", [] {
      auto r = celer::task(noop_task).remote();
      const auto t0 = clock_type::now();
      if (!celer::cancel(r)) throw std::runtime_error("a queued task was not cancelled");
      try {
        (void)celer::get(r);
        throw std::runtime_error("a cancelled task returned");
      } catch (const celer::task_cancelled_error&) {
      }
      return seconds_since(t0) * 1e6;
    }));
    for (auto& g : gates) celer::kill(g);
  }
  if (!embedded) {
    out.push_back({"cancel_running_task_latency", "", 0, 0,
                   "times the task's own stop through memory shared with it: embedded only"});
    return out;
  }
  out.push_back(latency(o, "cancel_running_task_latency", "microseconds (cancel until the task stopped)", [] {
    spinner_started.store(false);
    spinner_stopped.store(false);
    auto r = celer::task(spin_until_cancelled).remote();
    while (!spinner_started.load()) std::this_thread::yield();
    const auto t0 = clock_type::now();
    if (!celer::cancel(r)) throw std::runtime_error("a running task was not cancelled");
    while (!spinner_stopped.load()) std::this_thread::yield();
    const double us = seconds_since(t0) * 1e6;
    try {
      (void)celer::get(r);
      throw std::runtime_error("a cancelled task returned");
    } catch (const celer::task_cancelled_error&) {
    }
    return us;
  }));
  return out;
}

/// `n` no-op tasks submitted at once, held back, then run. The hold: one actor of one CPU
/// per CPU of the cluster, created and ready before the first submission (checked with
/// available_resources), so that every lease request waits; the gates are killed once all
/// are submitted. The memory growth over the submission is the driver's cost of a queued
/// task: its record in the submitter, its result's entry in the reference table, and the
/// object_ref the program keeps for it (80 bytes in the vector, plus what it shares).
std::vector<result> queued_tasks(std::size_t n) {
  auto gates = hold_every_cpu();
  const auto cpus = gates.size();
  malloc_trim(0);  // what earlier workloads freed is not counted as this one's
  const auto before = sample_memory();
  std::vector<celer::object_ref<std::int32_t>> refs;
  refs.reserve(n);
  const auto t0 = clock_type::now();
  for (std::size_t i = 0; i < n; ++i) refs.push_back(celer::task(noop_task).remote());
  const double submit_s = seconds_since(t0);
  const auto queued = sample_memory();
  const auto t1 = clock_type::now();
  for (auto& g : gates) celer::kill(g);
  std::int64_t sum = 0;
  for (auto v : celer::get(refs)) sum += v;
  const double drain_s = seconds_since(t1);
  if (sum != static_cast<std::int64_t>(n)) throw std::runtime_error("a queued task returned a wrong value");
  const double per = static_cast<double>(n);
  std::printf("# queued_tasks: %zu tasks behind %zu gate(s); submitted in %.3f s, drained in %.3f s; "
              "rss %.1f -> %.1f MB, heap %.1f -> %.1f MB\n",
              n, cpus, submit_s, drain_s, before.rss / 1e6, queued.rss / 1e6, before.heap / 1e6,
              queued.heap / 1e6);
  return {{"queued_tasks_per_second", "per second", per / (submit_s + drain_s), 0, {}},
          {"queued_tasks_submit_per_second", "per second", per / submit_s, 0, {}},
          {"queued_task_rss_bytes", "bytes per queued task", (queued.rss - before.rss) / per, 0, {}},
          {"queued_task_heap_bytes", "bytes per queued task", (queued.heap - before.heap) / per, 0, {}},
          {"queued_tasks_driver_peak_megabytes", "MB (VmHWM)", peak_rss() / 1e6, 0, {}}};
}

} // namespace

int main(int argc, char** argv) {
  celer::serve_if_worker();
  options o;
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "celer microbenchmark: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--address") {
      o.address = value();
    } else if (a == "--only") {
      o.only = value();
    } else if (a == "--json") {
      o.json = value();
    } else if (a == "--duration") {
      o.duration = std::stod(value());
    } else if (a == "--smoke") {
      o.smoke = true;
    } else if (a == "--queued-tasks") {
      o.queued_tasks = std::stoul(value());
    } else if (a == "-h" || a == "--help") {
      std::cout << "usage: celer microbenchmark [--address HOST:PORT] [--only PATTERN] "
                   "[--json FILE] [--duration SECONDS] [--smoke] [--queued-tasks N]\n"
                   "Runs Ray's microbenchmark workloads on celer (embedded, or on the cluster "
                   "at --address) and prints operations per second, mean +- std of 4 trials.\n"
                   "--smoke: tiny sizes and 0.05 s trials, to check that every workload runs.\n"
                   "--queued-tasks N: tasks of the queued_tasks workload (default 1000000; "
                   "20000 with --smoke); run it alone (--only queued_task) for its peak RSS.\n";
      return 0;
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (o.smoke) {
    o.duration = std::min(o.duration, 0.05);
    o.queued_tasks = std::min<std::size_t>(o.queued_tasks, 20000);
  }
  // Sizes of Ray's ray_perf.py; --smoke shrinks them.
  const int batch = o.smoke ? 20 : 1000;          // tasks / calls per async batch
  const int multi_n = o.smoke ? 20 : 10000;       // multi client tasks: per client
  const int multi_m = o.smoke ? 2 : 4;            // clients
  const int direct_n = o.smoke ? 20 : 5000;       // 1:n, n:n calls
  const int arg_n = o.smoke ? 20 : 1000;          // n:n with arg
  const int n_cpu = std::max(1u, std::thread::hardware_concurrency() / 2);
  const std::size_t big_bytes = o.smoke ? (8u << 20) : (800u << 20);  // 100M int64 in Ray
  // Objects of the transfer, spill and restore workloads (celer's own, not Ray's).
  const std::size_t store_object_bytes = o.smoke ? (4u << 20) : (128u << 20);
  const std::size_t store_objects = 8;

  std::vector<result> results;
  auto record = [&](result r) {
    print_row(r);
    results.push_back(std::move(r));
  };
  std::printf("%-48s %28s  %s\n", "workload", "mean +- std", "unit");

  // The floor, measured before the runtime starts (it forks).
  if (selected(o, "floor_zmq_roundtrip_threads")) {
    record({"floor_zmq_roundtrip_threads", "per second",
            celer::bench::zmq_roundtrips_threads(o.duration), 0, {}});
  }
  if (selected(o, "floor_zmq_roundtrip_processes")) {
    record({"floor_zmq_roundtrip_processes", "per second",
            celer::bench::zmq_roundtrips_processes(o.duration), 0, {}});
  }
  if (selected(o, "floor_memcpy_gigabytes")) {
    record({"floor_memcpy_gigabytes", "GB per second",
            celer::bench::memcpy_gigabytes(o.duration, big_bytes), 0, {}});
  }
  const std::string temp_dir =
    std::getenv("CELER_TEMP_DIR") != nullptr ? std::getenv("CELER_TEMP_DIR") : "/tmp";
  if (selected(o, "floor_file_write_gigabytes")) {
    record({"floor_file_write_gigabytes", "GB per second",
            celer::bench::file_write_gigabytes(o.duration, store_object_bytes, temp_dir), 0, {}});
  }
  if (selected(o, "floor_file_write_kept_gigabytes")) {
    record({"floor_file_write_kept_gigabytes", "GB per second",
            celer::bench::file_write_kept_gigabytes(store_object_bytes, store_objects, temp_dir), 0, {}});
  }

  std::vector<char*> init_args = rest;
  std::string address_flag;
  if (!o.address.empty()) {
    address_flag = "--celer-address=" + o.address;
    init_args.push_back(address_flag.data());
  }
  celer::init(static_cast<int>(init_args.size()), init_args.data());
  try {
    auto value = celer::put(0);
    if (selected(o, "single_client_get_calls")) {
      record(timeit(o, "single_client_get_calls", [&] {
        if (celer::get(value) != 0) throw std::runtime_error("get returned a wrong value");
      }));
    }
    if (selected(o, "single_client_put_calls")) {
      record(timeit(o, "single_client_put_calls", [] { (void)celer::put(0); }));
    }
    if (selected(o, "multi_client_put_calls")) {
      record(timeit(o, "multi_client_put_calls", [] {
        std::vector<celer::object_ref<int>> refs;
        for (int i = 0; i < 10; ++i) refs.push_back(celer::task(do_put_small).remote());
        for (int v : celer::get(refs)) {
          if (v != 100) throw std::runtime_error("do_put_small returned a wrong count");
        }
      }, 1000));
    }
    if (selected(o, "single_client_put_gigabytes")) {
      const celer::bytes big(big_bytes);
      record(timeit(o, "single_client_put_gigabytes", [&] { (void)celer::put(big); },
                    static_cast<double>(big_bytes) / 1e9, "GB per second"));
    }
    if (selected(o, "single_client_tasks_and_get_batch")) {
      record(timeit(o, "single_client_tasks_and_get_batch", [&] {
        std::vector<celer::object_ref<std::string>> refs;
        for (int i = 0; i < batch; ++i) refs.push_back(celer::task(small_value).remote());
        check_ok(celer::get(refs));
      }));
    }
    if (selected(o, "single_client_get_object_containing_10k_refs")) {
      auto holder = celer::task(create_object_containing_ref).remote();
      record(timeit(o, "single_client_get_object_containing_10k_refs", [&] {
        if (celer::get(holder).size() != 10000) throw std::runtime_error("wrong ref count");
      }));
    }
    if (selected(o, "single_client_wait_1k_refs")) {
      record(timeit(o, "single_client_wait_1k_refs", [&] {
        std::vector<celer::object_ref<std::string>> not_ready;
        for (int i = 0; i < batch; ++i) not_ready.push_back(celer::task(small_value).remote());
        while (!not_ready.empty()) not_ready = celer::wait(not_ready, 1).pending;
      }));
    }
    if (selected(o, "single_client_tasks_sync")) {
      record(timeit(o, "single_client_tasks_sync", [] {
        check_ok({celer::get(celer::task(small_value).remote())});
      }));
    }
    if (selected(o, "single_client_tasks_async")) {
      record(timeit(o, "single_client_tasks_async", [&] {
        std::vector<celer::object_ref<std::string>> refs;
        for (int i = 0; i < batch; ++i) refs.push_back(celer::task(small_value).remote());
        check_ok(celer::get(refs));
      }, batch));
    }
    // Actors stay on the driver's node (soft affinity: the head places every actor). On a
    // cluster with a second node for object_transfer_gigabytes (bench/compare.sh starts one
    // with no CPUs), a zero-CPU actor could otherwise land there; tasks ask for a CPU and
    // cannot. Embedded, there is one node and this changes nothing.
    const auto here = celer::scheduling_strategy::node_affinity(celer::current_node_id(), /*soft=*/true);
    const celer::actor_options no_cpu{.num_cpus = 0, .scheduling = here};
    if (selected(o, "multi_client_tasks_async")) {
      std::vector<celer::actor_handle<bench_actor>> actors;
      for (int i = 0; i < multi_m; ++i) actors.push_back(celer::actor(make_bench_actor).options(no_cpu).remote());
      record(timeit(o, "multi_client_tasks_async", [&] {
        std::vector<celer::object_ref<int>> refs;
        for (auto& a : actors) refs.push_back(a.task(&bench_actor::small_value_batch).remote(multi_n));
        for (int v : celer::get(refs)) {
          if (v != multi_n) throw std::runtime_error("a batch returned a wrong count");
        }
      }, multi_n * multi_m));
      for (auto& a : actors) celer::kill(a);
    }
    if (selected(o, "1_1_actor_calls_sync")) {
      auto a = celer::actor(make_bench_actor).options(no_cpu).remote();
      record(timeit(o, "1_1_actor_calls_sync", [&] {
        check_ok({celer::get(a.task(&bench_actor::small_value).remote())});
      }));
      celer::kill(a);
    }
    if (selected(o, "1_1_actor_calls_async")) {
      auto a = celer::actor(make_bench_actor).options(no_cpu).remote();
      record(timeit(o, "1_1_actor_calls_async", [&] {
        std::vector<celer::object_ref<std::string>> refs;
        for (int i = 0; i < batch; ++i) refs.push_back(a.task(&bench_actor::small_value).remote());
        check_ok(celer::get(refs));
      }, batch));
      celer::kill(a);
    }
    if (selected(o, "1_1_actor_calls_concurrent")) {
      auto a = celer::actor(make_bench_actor)
                 .options({.num_cpus = 0, .scheduling = here, .max_concurrency = 16})
                 .remote();
      record(timeit(o, "1_1_actor_calls_concurrent", [&] {
        std::vector<celer::object_ref<std::string>> refs;
        for (int i = 0; i < batch; ++i) refs.push_back(a.task(&bench_actor::small_value).remote());
        check_ok(celer::get(refs));
      }, batch));
      celer::kill(a);
    }
    // Coroutine actors (Ray's async actors): calls of a coroutine method that returns at
    // once, one by one and in batches; then batches of calls that each park on a gate
    // (another actor's call) until it opens: all in flight at once on one thread.
    if (selected(o, "1_1_async_actor_calls_sync")) {
      auto a = celer::actor(make_async_bench_actor).options(no_cpu).remote();
      record(timeit(o, "1_1_async_actor_calls_sync", [&] {
        check_ok({celer::get(a.task(&async_bench_actor::small_value).remote())});
      }));
      celer::kill(a);
    }
    if (selected(o, "1_1_async_actor_calls_async")) {
      auto a = celer::actor(make_async_bench_actor).options(no_cpu).remote();
      record(timeit(o, "1_1_async_actor_calls_async", [&] {
        std::vector<celer::object_ref<std::string>> refs;
        for (int i = 0; i < batch; ++i) refs.push_back(a.task(&async_bench_actor::small_value).remote());
        check_ok(celer::get(refs));
      }, batch));
      celer::kill(a);
    }
    if (selected(o, "async_actor_calls_parked")) {
      auto a = celer::actor(make_async_bench_actor).options(no_cpu).remote();
      auto gate = celer::actor(make_bench_gate).options({.num_cpus = 0, .scheduling = here, .max_concurrency = 2}).remote();
      std::int32_t round = 0;
      record(timeit(o, "async_actor_calls_parked", [&] {
        ++round;
        auto opened = gate.task(&bench_gate::wait).remote(round);
        std::vector<celer::object_ref<std::int32_t>> refs;
        for (int i = 0; i < batch; ++i) refs.push_back(a.task(&async_bench_actor::after).remote(opened, i));
        if (!celer::get(gate.task(&bench_gate::open).remote(round))) throw std::runtime_error("the gate did not open");
        const auto values = celer::get(refs);
        for (int i = 0; i < batch; ++i) {
          if (values[static_cast<std::size_t>(i)] != i) throw std::runtime_error("a parked call returned a wrong value");
        }
      }, batch));
      celer::kill(a);
      celer::kill(gate);
    }
    if (selected(o, "1_n_actor_calls_async")) {
      std::vector<celer::actor_handle<bench_actor>> actors;
      for (int i = 0; i < n_cpu; ++i) actors.push_back(celer::actor(make_bench_actor).options(no_cpu).remote());
      auto c = celer::actor(make_client).options(no_cpu).remote(actors);
      record(timeit(o, "1_n_actor_calls_async", [&] {
        if (celer::get(c.task(&client::small_value_batch).remote(direct_n)) != direct_n * n_cpu) {
          throw std::runtime_error("the client made a wrong number of calls");
        }
      }, direct_n * n_cpu));
      celer::kill(c);
      for (auto& a : actors) celer::kill(a);
    }
    if (selected(o, "n_n_actor_calls_async")) {
      std::vector<celer::actor_handle<bench_actor>> actors;
      for (int i = 0; i < n_cpu; ++i) actors.push_back(celer::actor(make_bench_actor).options(no_cpu).remote());
      record(timeit(o, "n_n_actor_calls_async", [&] {
        std::vector<celer::object_ref<int>> refs;
        for (int i = 0; i < multi_m; ++i) refs.push_back(celer::task(work).remote(actors, direct_n));
        for (int v : celer::get(refs)) {
          if (v != direct_n) throw std::runtime_error("work made a wrong number of calls");
        }
      }, multi_m * direct_n));
      for (auto& a : actors) celer::kill(a);
    }
    if (selected(o, "n_n_actor_calls_with_arg_async")) {
      std::vector<celer::actor_handle<client>> clients;
      std::vector<celer::actor_handle<bench_actor>> actors;
      for (int i = 0; i < n_cpu; ++i) {
        actors.push_back(celer::actor(make_bench_actor).options(no_cpu).remote());
        clients.push_back(celer::actor(make_client).options(no_cpu).remote(
          std::vector<celer::actor_handle<bench_actor>>{actors.back()}));
      }
      record(timeit(o, "n_n_actor_calls_with_arg_async", [&] {
        std::vector<celer::object_ref<int>> refs;
        for (auto& c : clients) refs.push_back(c.task(&client::small_value_batch_arg).remote(arg_n));
        for (int v : celer::get(refs)) {
          if (v != arg_n) throw std::runtime_error("a client made a wrong number of calls");
        }
      }, arg_n * static_cast<double>(clients.size())));
      for (auto& c : clients) celer::kill(c);
      for (auto& a : actors) celer::kill(a);
    }
    if (selected(o, "object_transfer_gigabytes")) record(transfer(o, store_object_bytes, store_objects));
    const bool queued_selected = selected(o, "queued_tasks_per_second") ||
                                 selected(o, "queued_tasks_submit_per_second") ||
                                 selected(o, "queued_task_rss_bytes") ||
                                 selected(o, "queued_task_heap_bytes") ||
                                 selected(o, "queued_tasks_driver_peak_megabytes");
    if (queued_selected) {
      for (auto& r : queued_tasks(o.queued_tasks)) record(std::move(r));
    }
    if (selected(o, "cancel_queued_task_latency") || selected(o, "cancel_running_task_latency")) {
      const char* env_address = std::getenv("CELER_ADDRESS");
      const bool embedded = o.address.empty() && (env_address == nullptr || *env_address == '\0');
      for (auto& r : cancel_latency(o, embedded)) {
        if (selected(o, r.name)) record(std::move(r));
      }
    }
    // Streaming generators (celer's own): one task yields 1,000 small values, the driver
    // reads each as it comes; with a window of 16 the generator waits for the reader.
    if (selected(o, "generator_values_per_second")) {
      record(timeit(o, "generator_values_per_second", [] { read_stream(1000, -1); }, 1000));
    }
    if (selected(o, "generator_values_backpressure_per_second")) {
      record(timeit(o, "generator_values_backpressure_per_second", [] { read_stream(1000, 16); }, 1000));
    }
    if (selected(o, "placement_group_create/removal")) {
      // As Ray's: 100 groups of one small bundle created, waited for, then removed.
      constexpr int groups = 100;
      record(timeit(o, "placement_group_create/removal", [] {
        std::vector<celer::placement_group> made;
        for (int i = 0; i < groups; ++i) {
          made.push_back(celer::create_placement_group({.bundles = {{.num_cpus = 0.01}}}));
        }
        for (const auto& g : made) {
          if (!g.ready(std::chrono::seconds(30))) throw std::runtime_error("a placement group was not ready in 30 s");
        }
        for (const auto& g : made) celer::remove_placement_group(g);
      }, groups));
    }
  } catch (const std::exception& e) {
    std::cerr << "celer microbenchmark: a workload failed: " << e.what() << "\n";
    celer::shutdown();
    return 1;
  }
  celer::shutdown();
  if (selected(o, "object_spill_gigabytes") || selected(o, "object_restore_gigabytes")) {
    const char* env_address = std::getenv("CELER_ADDRESS");
    if (!o.address.empty() || (env_address != nullptr && *env_address != '\0')) {
      const std::string why =
        "needs an embedded store whose capacity it sets (run without --address or CELER_ADDRESS)";
      record({"object_spill_gigabytes", "", 0, 0, why});
      record({"object_restore_gigabytes", "", 0, 0, why});
    } else {
      try {
        for (auto& r : spill_and_restore(store_object_bytes, store_objects)) record(std::move(r));
      } catch (const std::exception& e) {
        std::cerr << "celer microbenchmark: a workload failed: " << e.what() << "\n";
        if (celer::is_initialized()) celer::shutdown();
        return 1;
      }
    }
  }
  if (!o.json.empty()) write_json(o.json, results, o);
  for (const auto& r : results) {
    if (r.skipped.empty() && !(r.mean > 0)) {
      std::cerr << "celer microbenchmark: " << r.name << " reported no positive figure\n";
      return 1;
    }
  }
  return 0;
}
