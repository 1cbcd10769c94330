// Ray's microbenchmark workloads in Ray's C++ API: see workloads.hpp.
#include "workloads.hpp"

#include <stdexcept>

namespace ray_cpp_bench {

void check_ok(const std::vector<std::shared_ptr<std::string>>& got) {
  for (const auto& v : got) {
    if (!v || *v != "ok") throw std::runtime_error("a workload returned something other than 'ok'");
  }
}

std::string small_value() { return "ok"; }

int do_put_small() {
  for (int i = 0; i < 100; ++i) (void)ray::Put(0);
  return 100;
}

bench_actor* bench_actor::create() { return new bench_actor(); }

std::string bench_actor::small_value() { return "ok"; }

std::string bench_actor::small_value_arg(int /*x*/) { return "ok"; }

int bench_actor::small_value_batch(int n) {
  std::vector<ray::ObjectRef<std::string>> refs;
  refs.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    refs.push_back(ray::Task(ray_cpp_bench::small_value).SetResources(task_resources()).Remote());
  }
  check_ok(ray::Get(refs));
  return n;
}

client* client::create() { return new client(); }

int client::call_batch(ray::ActorHandle<bench_actor> server, int n) {
  std::vector<ray::ObjectRef<std::string>> refs;
  for (int i = 0; i < n; ++i) refs.push_back(server.Task(&bench_actor::small_value).Remote());
  check_ok(ray::Get(refs));
  return n;
}

int client::call_batch_arg(ray::ActorHandle<bench_actor> server, int n) {
  auto x = ray::Put(0);
  std::vector<ray::ObjectRef<std::string>> refs;
  // An ObjectRef passed for an int parameter: the worker gets the value, as in Python.
  for (int i = 0; i < n; ++i) refs.push_back(server.Task(&bench_actor::small_value_arg).Remote(x));
  check_ok(ray::Get(refs));
  return n;
}

int work(std::vector<std::string> actor_names, int n) {
  auto handles = find_actors(actor_names);
  std::vector<ray::ObjectRef<std::string>> refs;
  refs.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    refs.push_back(handles[static_cast<std::size_t>(i) % handles.size()].Task(&bench_actor::small_value).Remote());
  }
  check_ok(ray::Get(refs));
  return n;
}

std::vector<ray::ActorHandle<bench_actor>> find_actors(const std::vector<std::string>& names) {
  std::vector<ray::ActorHandle<bench_actor>> handles;
  for (const auto& name : names) {
    auto h = ray::GetActor<bench_actor>(name);
    if (!h) throw std::runtime_error("no actor named " + name);
    handles.push_back(*h);
  }
  return handles;
}

RAY_REMOTE(small_value, do_put_small, work, bench_actor::create, &bench_actor::small_value,
           &bench_actor::small_value_arg, &bench_actor::small_value_batch, client::create,
           &client::call_batch, &client::call_batch_arg);

}  // namespace ray_cpp_bench
