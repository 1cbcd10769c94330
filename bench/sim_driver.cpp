// The real driver of celer-bench-sim-cluster (sim_driver.hpp).
#include "sim_driver.hpp"

#include <celer/celer.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <vector>

namespace {

// Never run here or on a real worker: the simulated agents answer with the first argument.
std::int64_t sim_echo(std::int64_t x) { return x; }
struct sim_actor {
  std::int64_t echo(std::int64_t x) { return x; }
};
sim_actor* make_sim_actor() { return new sim_actor(); }

} // namespace

CELER_REMOTE(sim_echo, make_sim_actor, &sim_actor::echo);

namespace celer::bench {
namespace {

using clock_type = std::chrono::steady_clock;
constexpr auto wait_at_most = std::chrono::seconds(120);

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

/// The value at quantile `q` (0..1) of `v`, sorted in place.
double quantile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto at = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(at, v.size() - 1)];
}

} // namespace

int run_sim_driver(const sim_driver_options& o) {
  nlohmann::json out;
  std::uint64_t wrong = 0;
  // Only the simulated agents have `sim_node`: the driver's own node spills every request.
  const celer::task_options task_opts{.num_cpus = 1, .resources = {{"sim_node", 1}}};
  celer::actor_options actor_opts;
  actor_opts.num_cpus = 0;
  actor_opts.resources = {{"sim_node", 1}};
  try {
    celer::init();
    {
      std::vector<double> ms;
      ms.reserve(static_cast<std::size_t>(o.latency_tasks));
      for (int i = 0; i < o.latency_tasks; ++i) {
        const auto t0 = clock_type::now();
        auto r = celer::task(sim_echo).options(task_opts).remote(std::int64_t{i});
        const auto v = celer::get(r, wait_at_most);
        ms.push_back(seconds_since(t0) * 1e3);
        if (v != i) ++wrong;
      }
      const double mean = ms.empty() ? 0 : [&] {
        double s = 0;
        for (double x : ms) s += x;
        return s / static_cast<double>(ms.size());
      }();
      out["latency"] = {{"tasks", ms.size()},
                        {"mean_ms", mean},
                        {"p50_ms", quantile(ms, 0.5)},
                        {"p99_ms", quantile(ms, 0.99)},
                        {"max_ms", ms.empty() ? 0 : ms.back()}};
    }
    {
      const auto t0 = clock_type::now();
      std::vector<celer::object_ref<std::int64_t>> refs;
      refs.reserve(static_cast<std::size_t>(o.batch_tasks));
      for (int i = 0; i < o.batch_tasks; ++i) {
        refs.push_back(celer::task(sim_echo).options(task_opts).remote(std::int64_t{i}));
      }
      const auto got = celer::get(refs, wait_at_most);
      const double s = seconds_since(t0);
      for (std::size_t i = 0; i < got.size(); ++i) {
        if (got[i] != static_cast<std::int64_t>(i)) ++wrong;
      }
      out["batch"] = {{"tasks", got.size()},
                      {"seconds", s},
                      {"per_second", s > 0 ? static_cast<double>(got.size()) / s : 0}};
    }
    {
      const auto t0 = clock_type::now();
      std::vector<celer::actor_handle<sim_actor>> actors;
      actors.reserve(static_cast<std::size_t>(o.actors));
      for (int i = 0; i < o.actors; ++i) {
        actors.push_back(celer::actor(make_sim_actor).options(actor_opts).remote());
      }
      std::vector<celer::object_ref<std::int64_t>> calls;
      calls.reserve(actors.size());
      for (std::size_t i = 0; i < actors.size(); ++i) {
        calls.push_back(actors[i].task(&sim_actor::echo).remote(static_cast<std::int64_t>(i)));
      }
      const auto got = celer::get(calls, wait_at_most);
      const double s = seconds_since(t0);
      for (std::size_t i = 0; i < got.size(); ++i) {
        if (got[i] != static_cast<std::int64_t>(i)) ++wrong;
      }
      out["actors"] = {{"actors", got.size()},
                       {"seconds", s},
                       {"per_second", s > 0 ? static_cast<double>(got.size()) / s : 0}};
    }
    out["wrong_results"] = wrong;
    celer::shutdown();
  } catch (const std::exception& e) {
    out["error"] = e.what();
    std::cerr << "celer-bench-sim-cluster driver: " << e.what() << "\n";
  }
  if (!o.json.empty()) std::ofstream(o.json) << out.dump(2) << "\n";
  return out.contains("error") || wrong > 0 ? 1 : 0;
}

} // namespace celer::bench
