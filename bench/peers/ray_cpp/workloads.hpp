// The remote functions and actors of Ray's microbenchmark (python/ray/_private/ray_perf.py,
// as bench/peers/ray_perf.py runs it), written in Ray's C++ API. workloads.cpp is compiled
// twice: into the driver (ray_cpp_perf), whose RAY_REMOTE registrations name the functions
// it calls, and into libray_cpp_workloads.so, which Ray's C++ workers (ray/cpp/default_worker)
// load from the driver's code_search_path to run them. Built by build.sh against the
// headers and libray_api.so of the `ray-cpp` wheel, with -std=c++17
// -D_GLIBCXX_USE_CXX11_ABI=0 (the wheel's ABI), so nothing here may use C++20.
#pragma once

#include <ray/api.h>

#include <string>
#include <vector>

namespace ray_cpp_bench {

/// The CPUs each task asks for: Python's @ray.remote default (1), which the C++ API does
/// not apply by itself (a C++ task with no resources set asks for none).
inline const std::unordered_map<std::string, double>& task_resources() {
  static const std::unordered_map<std::string, double> one_cpu{{"CPU", 1.0}};
  return one_cpu;
}

std::string small_value();
int do_put_small();

/// Ray's `Actor` (num_cpus=0: a C++ actor with no resources set asks for none).
class bench_actor {
 public:
  static bench_actor* create();
  std::string small_value();
  std::string small_value_arg(int x);
  int small_value_batch(int n);
};

/// Ray's `Client`: calls on a server actor. Python's client keeps a list of handles; here
/// the server's handle comes as an argument of each call, as in Ray's own C++ tests (the
/// C++ API passes one `ActorHandle` argument, not a vector of them), so the 1:n workload
/// calls the client once per server. A handle a C++ actor kept from one call to the next,
/// or looked up by name, took calls that never reached the server after the first batch
/// or so (Ray 2.60); given per call, they still hang in some runs (docs/benchmarks.md,
/// "The Ray C++ column").
class client {
 public:
  static client* create();
  int call_batch(ray::ActorHandle<bench_actor> server, int n);
  int call_batch_arg(ray::ActorHandle<bench_actor> server, int n);
};

/// Ray's `work(actors, n)`: n calls spread over the named actors, their results fetched.
int work(std::vector<std::string> actor_names, int n);

/// The named actors' handles; throws if one is not found.
std::vector<ray::ActorHandle<bench_actor>> find_actors(const std::vector<std::string>& names);

/// Throws unless every value is "ok".
void check_ok(const std::vector<std::shared_ptr<std::string>>& got);

}  // namespace ray_cpp_bench
