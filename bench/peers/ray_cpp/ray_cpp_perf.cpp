// ray_cpp_perf: Ray's microbenchmark workloads (bench/peers/ray_perf.py, Ray's own
// python/ray/_private/ray_perf.py) in Ray's C++ API, under the names, sizes and units of
// `celer microbenchmark`, measured the same way: a warm-up of half a trial, then 4 trials
// of --duration seconds; operations (or GB) per second, mean +- standard deviation. Every
// workload checks its results. It connects to a running Ray cluster (run.sh starts one:
// `ray start --head --node-ip-address=<this host's IP>`; the C++ driver must connect to that
// IP, not 127.0.0.1) and gives Ray's C++ workers the shared library of the remote functions
// through code_search_path.
//
//   ray_cpp_perf --address IP:PORT --code-search-path LIB [--duration S]
//                [--only PATTERN | --workload NAME] [--json FILE] [--system NAME] [--smoke]
//   ray_cpp_perf --list [--only PATTERN]     each workload's name and "measured" or "skipped"
//
// run.sh runs each workload in a driver of its own (--workload): in one driver (one Ray
// job), an actor's nested tasks (multi_client_tasks_async) waited forever for workers once
// the driver's own tasks had run before them (Ray 2.60, 2 CPUs).
#include "workloads.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace ray_cpp_bench;

struct options {
  std::string address;
  std::string code_search_path;
  std::string only;
  std::string json;
  std::string system = "ray C++";
  double duration = 2.0;
  bool smoke = false;
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

bool selected(const options& o, const std::string& name) {
  return o.only.empty() || name.find(o.only) != std::string::npos;
}

/// The JSON of bench/peers/common.py and `celer microbenchmark`, which table.py reads.
void write_json(const options& o, const std::vector<result>& results) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : results) {
    if (r.skipped.empty()) {
      rows.push_back({{"name", r.name}, {"value", r.mean}, {"std", r.stddev}, {"unit", r.unit}});
    } else {
      rows.push_back({{"name", r.name}, {"skipped", r.skipped}});
    }
  }
  const nlohmann::json doc{{"system", o.system}, {"duration_s", o.duration}, {"results", rows}};
  std::ofstream(o.json) << doc.dump(2) << "\n";
}

class runner {
 public:
  explicit runner(options o) : o_(std::move(o)) {
    std::printf("%-48s %28s  %s\n", "workload", "mean +- std", "unit");
  }

  bool selected(const std::string& name) const { return ::selected(o_, name); }

  /// Ray's timeit: warm up, then 4 trials of `duration`; `multiplier` operations per call.
  void timeit(const std::string& name, const std::function<void()>& fn, double multiplier = 1,
              const std::string& unit = "per second") {
    if (!selected(name)) return;
    const double warmup = o_.smoke ? 0 : o_.duration / 2;
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
      } while (seconds_since(t0) < o_.duration);
      stats.push_back(multiplier * static_cast<double>(n) / seconds_since(t0));
    }
    result r{name, unit, 0, 0, {}};
    r.mean = std::accumulate(stats.begin(), stats.end(), 0.0) / static_cast<double>(stats.size());
    for (double s : stats) r.stddev += (s - r.mean) * (s - r.mean);
    r.stddev = std::sqrt(r.stddev / static_cast<double>(stats.size()));
    record(std::move(r));
  }

  void skip(const std::string& name, const std::string& why) {
    if (selected(name)) record({name, "", 0, 0, why});
  }

  const std::vector<result>& results() const { return results_; }

 private:
  void record(result r) {
    if (!r.skipped.empty()) {
      std::printf("%-48s %28s  (skipped: %s)\n", r.name.c_str(), "-", r.skipped.c_str());
    } else {
      const std::string figure = format(r.mean) + " +- " + format(r.stddev);
      std::printf("%-48s %28s  %s\n", r.name.c_str(), figure.c_str(), r.unit.c_str());
    }
    std::fflush(stdout);
    results_.push_back(std::move(r));
    if (!o_.json.empty()) write_json(o_, results_);  // after every row: a crash keeps the rest
  }

  options o_;
  std::vector<result> results_;
};

std::vector<ray::ObjectRef<std::string>> small_values(int n) {
  std::vector<ray::ObjectRef<std::string>> refs;
  refs.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) refs.push_back(ray::Task(small_value).SetResources(task_resources()).Remote());
  return refs;
}

/// `n` actors, each named (for `client` and `work`, which find them by name), each having
/// answered one call: a handle another worker looks up or is given while the actor is still
/// being created takes calls that never reach it (Ray 2.60's C++ API).
std::vector<ray::ActorHandle<bench_actor>> make_actors(int n, std::vector<std::string>* names = nullptr,
                                                       int max_concurrency = 1) {
  static int made = 0;
  std::vector<ray::ActorHandle<bench_actor>> actors;
  for (int i = 0; i < n; ++i) {
    const std::string name = "bench_actor_" + std::to_string(made++);
    actors.push_back(ray::Actor(bench_actor::create).SetName(name).SetMaxConcurrency(max_concurrency).Remote());
    if (names != nullptr) names->push_back(name);
  }
  for (auto& a : actors) check_ok({ray::Get(a.Task(&bench_actor::small_value).Remote())});
  return actors;
}

void kill_all(std::vector<ray::ActorHandle<bench_actor>>& actors) {
  for (auto& a : actors) a.Kill();
}

/// One workload of the table: how to measure it, or why it cannot be.
struct workload {
  std::string name;
  std::function<void(runner&)> measure;  // empty when skipped
  std::string skipped;
};

/// Every workload, in the order of `celer microbenchmark`.
std::vector<workload> workloads(const options& o) {
  // Sizes of Ray's ray_perf.py (and of `celer microbenchmark`); --smoke shrinks them.
  const int batch = o.smoke ? 20 : 1000;
  const int multi_n = o.smoke ? 20 : 10000;
  const int multi_m = o.smoke ? 2 : 4;
  const int direct_n = o.smoke ? 20 : 5000;
  const int arg_n = o.smoke ? 20 : 1000;
  const int n_cpu = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / 2);
  const std::size_t big_bytes = o.smoke ? (8u << 20) : (800u << 20);  // 100M int64 in Ray
  const std::string celer_only = "celer's own workload (Ray's microbenchmark has none)";
  std::vector<workload> w;
  w.push_back({"single_client_get_calls", [](runner& r) {
    auto value = ray::Put(0);
    r.timeit("single_client_get_calls", [&] {
      if (*ray::Get(value) != 0) throw std::runtime_error("get returned a wrong value");
    });
  }, {}});
  w.push_back({"single_client_put_calls", [](runner& r) {
    r.timeit("single_client_put_calls", [] { (void)ray::Put(0); });
  }, {}});
  w.push_back({"multi_client_put_calls", [](runner& r) {
    r.timeit("multi_client_put_calls", [] {
      std::vector<ray::ObjectRef<int>> refs;
      for (int i = 0; i < 10; ++i) refs.push_back(ray::Task(do_put_small).SetResources(task_resources()).Remote());
      for (const auto& v : ray::Get(refs)) {
        if (*v != 100) throw std::runtime_error("do_put_small returned a wrong count");
      }
    }, 1000);
  }, {}});
  w.push_back({"single_client_put_gigabytes", [=](runner& r) {
    // A std::string is msgpack's raw bytes (one copy into the buffer, one into the store);
    // Python's numpy array is pickled out of band (one copy).
    const std::string big(big_bytes, '\0');
    r.timeit("single_client_put_gigabytes", [&] { (void)ray::Put(big); },
             static_cast<double>(big_bytes) / 1e9, "GB per second");
  }, {}});
  w.push_back({"single_client_tasks_and_get_batch", [=](runner& r) {
    r.timeit("single_client_tasks_and_get_batch", [&] { check_ok(ray::Get(small_values(batch))); });
  }, {}});
  w.push_back({"single_client_get_object_containing_10k_refs", {},
               "Ray's C++ API does not track ObjectRefs inside a value (a task's result holds "
               "only their ids, which keep nothing alive)"});
  w.push_back({"single_client_wait_1k_refs", [=](runner& r) {
    r.timeit("single_client_wait_1k_refs", [&] {
      auto not_ready = small_values(batch);
      while (!not_ready.empty()) {
        auto got = ray::Wait(not_ready, 1, -1);
        not_ready.assign(got.unready.begin(), got.unready.end());
      }
    });
  }, {}});
  w.push_back({"single_client_tasks_sync", [](runner& r) {
    r.timeit("single_client_tasks_sync", [] {
      check_ok({ray::Get(ray::Task(small_value).SetResources(task_resources()).Remote())});
    });
  }, {}});
  w.push_back({"single_client_tasks_async", [=](runner& r) {
    r.timeit("single_client_tasks_async", [&] { check_ok(ray::Get(small_values(batch))); }, batch);
  }, {}});
  w.push_back({"multi_client_tasks_async", [=](runner& r) {
    auto actors = make_actors(multi_m);
    r.timeit("multi_client_tasks_async", [&] {
      std::vector<ray::ObjectRef<int>> refs;
      for (auto& a : actors) refs.push_back(a.Task(&bench_actor::small_value_batch).Remote(multi_n));
      for (const auto& v : ray::Get(refs)) {
        if (*v != multi_n) throw std::runtime_error("a batch returned a wrong count");
      }
    }, multi_n * multi_m);
    kill_all(actors);
  }, {}});
  w.push_back({"1_1_actor_calls_sync", [](runner& r) {
    auto actors = make_actors(1);
    r.timeit("1_1_actor_calls_sync", [&] {
      check_ok({ray::Get(actors[0].Task(&bench_actor::small_value).Remote())});
    });
    kill_all(actors);
  }, {}});
  for (const auto& [name, concurrency] : {std::pair<std::string, int>{"1_1_actor_calls_async", 1},
                                          {"1_1_actor_calls_concurrent", 16}}) {
    w.push_back({name, [=, name = name, concurrency = concurrency](runner& r) {
      auto actors = make_actors(1, nullptr, concurrency);
      r.timeit(name, [&] {
        std::vector<ray::ObjectRef<std::string>> refs;
        for (int i = 0; i < batch; ++i) refs.push_back(actors[0].Task(&bench_actor::small_value).Remote());
        check_ok(ray::Get(refs));
      }, batch);
      kill_all(actors);
    }, {}});
  }
  w.push_back({"1_n_actor_calls_async", [=](runner& r) {
    auto actors = make_actors(n_cpu);
    auto c = ray::Actor(client::create).Remote();
    r.timeit("1_n_actor_calls_async", [&] {
      std::vector<ray::ObjectRef<int>> refs;
      for (auto& a : actors) refs.push_back(c.Task(&client::call_batch).Remote(a, direct_n));
      for (const auto& v : ray::Get(refs)) {
        if (*v != direct_n) throw std::runtime_error("the client made a wrong number of calls");
      }
    }, direct_n * n_cpu);
    c.Kill();
    kill_all(actors);
  }, {}});
  w.push_back({"n_n_actor_calls_async", [=](runner& r) {
    std::vector<std::string> names;
    auto actors = make_actors(n_cpu, &names);
    r.timeit("n_n_actor_calls_async", [&] {
      std::vector<ray::ObjectRef<int>> refs;
      for (int i = 0; i < multi_m; ++i) {
        refs.push_back(ray::Task(work).SetResources(task_resources()).Remote(names, direct_n));
      }
      for (const auto& v : ray::Get(refs)) {
        if (*v != direct_n) throw std::runtime_error("work made a wrong number of calls");
      }
    }, multi_m * direct_n);
    kill_all(actors);
  }, {}});
  w.push_back({"n_n_actor_calls_with_arg_async", [=](runner& r) {
    std::vector<ray::ActorHandle<client>> clients;
    auto actors = make_actors(n_cpu);
    for (int i = 0; i < n_cpu; ++i) clients.push_back(ray::Actor(client::create).Remote());
    r.timeit("n_n_actor_calls_with_arg_async", [&] {
      std::vector<ray::ObjectRef<int>> refs;
      for (std::size_t i = 0; i < clients.size(); ++i) {
        refs.push_back(clients[i].Task(&client::call_batch_arg).Remote(actors[i], arg_n));
      }
      for (const auto& v : ray::Get(refs)) {
        if (*v != arg_n) throw std::runtime_error("a client made a wrong number of calls");
      }
    }, arg_n * static_cast<double>(clients.size()));
    for (auto& c : clients) c.Kill();
    kill_all(actors);
  }, {}});
  w.push_back({"object_transfer_gigabytes", {}, celer_only});
  w.push_back({"placement_group_create/removal", [](runner& r) {
    r.timeit("placement_group_create/removal", [] {
      // As ray_perf.py: 100 groups of one small bundle created, waited for, then removed.
      std::vector<ray::PlacementGroup> groups;
      for (int i = 0; i < 100; ++i) {
        groups.push_back(ray::CreatePlacementGroup(
          ray::PlacementGroupCreationOptions{"", {{{"CPU", 0.01}}}, ray::PlacementStrategy::PACK}));
      }
      for (auto& g : groups) {
        if (!g.Wait(30)) throw std::runtime_error("a placement group was not ready in 30 s");
      }
      for (const auto& g : groups) ray::RemovePlacementGroup(g.GetID());
    }, 100);
  }, {}});
  w.push_back({"object_spill_gigabytes", {}, celer_only});
  w.push_back({"object_restore_gigabytes", {}, celer_only});
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  std::string only_workload;
  bool list = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "ray_cpp_perf: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--address") {
      o.address = value();
    } else if (a == "--code-search-path") {
      o.code_search_path = value();
    } else if (a == "--only") {
      o.only = value();
    } else if (a == "--workload") {
      only_workload = value();
    } else if (a == "--list") {
      list = true;
    } else if (a == "--json") {
      o.json = value();
    } else if (a == "--system") {
      o.system = value();
    } else if (a == "--duration") {
      o.duration = std::stod(value());
    } else if (a == "--smoke") {
      o.smoke = true;
    } else {
      std::cerr << "usage: ray_cpp_perf --address IP:PORT --code-search-path LIB [--duration S] "
                   "[--only PATTERN | --workload NAME] [--json FILE] [--system NAME] [--smoke]\n"
                   "       ray_cpp_perf --list [--only PATTERN]\n";
      return 2;
    }
  }
  if (o.smoke) o.duration = std::min(o.duration, 0.05);
  std::vector<workload> chosen;
  for (auto& w : workloads(o)) {
    if (only_workload.empty() ? selected(o, w.name) : w.name == only_workload) chosen.push_back(std::move(w));
  }
  if (list) {
    for (const auto& w : chosen) std::printf("%s\t%s\n", w.name.c_str(), w.measure ? "measured" : "skipped");
    return 0;
  }
  runner r(o);
  const bool any_measured = std::any_of(chosen.begin(), chosen.end(), [](const workload& w) {
    return static_cast<bool>(w.measure);
  });
  if (any_measured) {
    if (o.address.empty() || o.code_search_path.empty()) {
      std::cerr << "ray_cpp_perf: --address and --code-search-path are needed (run.sh gives them)\n";
      return 2;
    }
    ray::RayConfig config;
    config.address = o.address;
    config.code_search_path = {o.code_search_path};
    ray::Init(config);
  }
  int status = 0;
  try {
    for (const auto& w : chosen) {
      if (w.measure) {
        w.measure(r);
      } else {
        r.skip(w.name, w.skipped);
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "ray_cpp_perf: a workload failed: " << e.what() << "\n";
    status = 1;
  }
  if (any_measured) ray::Shutdown();
  if (!o.json.empty()) write_json(o, r.results());
  return status;
}
