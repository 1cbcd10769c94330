// celer-bench-scheduler: the cluster scheduler's policy code (runtime/src/scheduler) driven
// with simulated nodes, no processes and no network. Two measurements:
//
//  1. place() decisions per second at 10, 100 and 1,000 nodes of a mixed cluster kept about
//     80% busy, so that requests start now, wait, and (rarely) can never run.
//  2. The makespan of 1,000 equal GPU tasks on a mixed cluster, placed by spread (round-robin)
//     and by speed_weighted, executed by a simulation that keeps its own per-node queues and
//     device timelines (the view only decides where each task goes).
//  3. preemption_target() choices per second at 10, 100 and 1,000 nodes whose every GPU is
//     held by a preemptible actor: the head's cost for each request that must wait while
//     preemptible actors run (the actors handed to the view once, set_preemptible, as the
//     head does; the choices are timed).
//
//   build/bench/celer-bench-scheduler [--smoke] [--duration S] [--json FILE]
//
// Every placement is checked against a ledger kept here; a wrong one prints "CHECK FAILED"
// and the program exits 1.
#include "scheduler/cluster_view.hpp"
#include "scheduler/labels.hpp"

#include <celer/gpu.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

using namespace celer;
using scheduling::cluster_view;
using kind = scheduling_strategy::kind;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr std::int64_t unit = protocol::resource_unit;
int failures = 0;

/// A broken invariant: counted (the exit status), printed, and the run goes on.
void check(bool ok, const std::string& what) {
  if (ok) return;
  if (++failures <= 10) std::cout << "CHECK FAILED: " << what << "\n";
}

std::vector<gpu::device> declared(const std::string& spec) {
  if (spec.empty()) return {};
  auto d = gpu::parse_declared(spec);
  if (!d) {
    std::cerr << "bad GPU declaration " << spec << ": " << d.error().message() << "\n";
    std::exit(2);
  }
  return *d;
}

protocol::resource_set amounts(double cpus, double gpus) {
  auto r = protocol::make_request(cpus, gpus, /*memory=*/0, /*custom=*/{});
  if (!r) {
    std::cerr << "bad request: " << r.error().message() << "\n";
    std::exit(2);
  }
  return *r;
}

const char* name_of(kind how) {
  switch (how) {
  case kind::hybrid: return "hybrid";
  case kind::spread: return "spread";
  case kind::node_affinity: return "node_affinity";
  case kind::speed_weighted: return "speed_weighted";
  case kind::placement_group: return "placement_group";
  }
  return "?";
}

/// Whether a device satisfies what the placement asks of each device.
bool device_ok(const gpu::device& d, const protocol::placement& p) {
  return d.memory_bytes >= p.gpu_memory_bytes &&
         (p.accelerator_type.empty() || gpu::matches_accelerator(d, p.accelerator_type));
}

struct mean_std {
  double mean = 0, std = 0;
};

mean_std summarize(const std::vector<double>& v) {
  mean_std s;
  if (v.empty()) return s;
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  if (v.size() < 2) return s;
  double sq = 0;
  for (double x : v) sq += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(sq / static_cast<double>(v.size() - 1));
  return s;
}

// ---- 1. decisions per second -------------------------------------------------------------

/// A simulated node as this program books it, independently of the view.
struct sim_node {
  node_id id;
  std::map<std::string, std::string> labels;
  std::vector<gpu::device> gpus;
  std::int64_t cpus = 0, cpus_free = 0;
  std::vector<std::int64_t> gpu_free;
};

/// Work placed `now` and not yet finished.
struct running {
  std::size_t node;
  protocol::resource_set need;
  std::vector<protocol::gpu_share> gpus;
};

struct request {
  protocol::resource_set need;
  protocol::placement p;
  double gpus = 0;
};

struct decision_run {
  std::size_t nodes = 0;
  std::vector<double> per_second;  ///< one per trial
  std::uint64_t now = 0, wait = 0, never = 0;
  double busy_sum = 0;  ///< the cluster's busiest-resource share, summed per request
};

class decision_bench {
public:
  decision_bench(std::size_t count, std::uint64_t seed) : rng_(seed) {
    const std::vector<std::string> kinds{"A100-80GB:8@2", "A100-40GB:4@2", "V100-16GB:4@1",
                                         "V100-32GB:8@1", "", ""};
    for (std::size_t i = 0; i < count; ++i) {
      sim_node n;
      n.id = node_id::random();
      n.labels = {{"zone", zones_[rng_() % 3]}};
      if (rng_() % 4 == 0) n.labels["kind"] = "spot";
      n.gpus = declared(kinds[rng_() % kinds.size()]);
      n.gpu_free.assign(n.gpus.size(), unit);
      n.cpus = 16 + static_cast<std::int64_t>(rng_() % 4) * 16;  // 16, 32, 48, 64
      n.cpus_free = n.cpus * unit;
      cpu_total_ += n.cpus * unit;
      gpu_total_ += static_cast<std::int64_t>(n.gpus.size()) * unit;
      view_.add_node(n.id, amounts(static_cast<double>(n.cpus), static_cast<double>(n.gpus.size())),
                     n.labels, n.gpus);
      where_[n.id] = nodes_.size();
      nodes_.push_back(std::move(n));
    }
  }

  /// Places requests until `seconds` of place() time have accumulated; returns the
  /// decisions made and the place() seconds (clock reads included).
  std::pair<std::uint64_t, double> trial(double seconds, decision_run& out) {
    std::uint64_t made = 0;
    clock_type::duration spent{};
    const auto budget = std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(seconds));
    while (spent < budget) {
      keep_busy();
      out.busy_sum += busy();
      const auto r = next_request();
      const auto t0 = clock_type::now();
      const auto d = view_.place(r.need, r.p);
      spent += clock_type::now() - t0;
      ++made;
      book(r, d, out);
    }
    return {made, std::chrono::duration<double>(spent).count()};
  }

private:
  /// The share (0..1) of the cluster's busiest resource (CPU or GPU units) in use.
  double busy() const {
    const double c = 1.0 - static_cast<double>(cpu_free_sum()) / static_cast<double>(cpu_total_);
    const double g = gpu_total_ == 0 ? 0 : static_cast<double>(gpu_used_) / static_cast<double>(gpu_total_);
    return std::max(c, g);
  }
  std::int64_t cpu_free_sum() const { return cpu_total_ - cpu_used_; }

  /// Finished work gives its resources back, chosen at random: always above 80% busy, half
  /// of the time above 70%, so the cluster hovers around 80%.
  void keep_busy() {
    const double b = busy();
    if (live_.empty() || b <= 0.7 || (b <= 0.8 && rng_() % 2 == 0)) return;
    const auto k = rng_() % live_.size();
    auto& done = live_[k];
    auto& n = nodes_[done.node];
    const auto cpu = done.need.amounts[protocol::cpu];
    n.cpus_free += cpu;
    cpu_used_ -= cpu;
    for (const auto& s : done.gpus) {
      n.gpu_free[static_cast<std::size_t>(s.index)] += s.amount;
      gpu_used_ -= s.amount;
    }
    view_.release(n.id, done.need, done.gpus);
    live_[k] = std::move(live_.back());
    live_.pop_back();
  }

  request next_request() {
    static const std::vector<double> gpu_sizes{0, 0, 0, 0, 0.25, 0.5, 0.5, 1, 1, 2};
    static const std::vector<kind> strategies{kind::hybrid, kind::spread, kind::speed_weighted};
    request r;
    r.gpus = gpu_sizes[rng_() % gpu_sizes.size()];
    r.need = amounts(1 + static_cast<double>(rng_() % 4), r.gpus);
    r.p.how = strategies[rng_() % strategies.size()];
    if (r.gpus > 0 && rng_() % 3 == 0) r.p.accelerator_type = "A100";
    if (r.gpus > 0 && rng_() % 4 == 0) r.p.gpu_memory_bytes = 32'000'000'000ULL;
    if (rng_() % 5 == 0) r.p.labels.push_back(*scheduling::parse_label_selector("zone=" + zones_[rng_() % 3]));
    if (rng_() % 7 == 0) r.p.labels.push_back(*scheduling::parse_label_selector("kind!=spot"));
    if (rng_() % 1000 == 0) r.p.accelerator_type = "H100";  // exists nowhere: never
    return r;
  }

  /// Whether some node could ever run `r`, by this program's own books.
  bool could_ever(const request& r) const {
    for (const auto& n : nodes_) {
      if (!scheduling::labels_match(n.labels, r.p.labels)) continue;
      if (n.cpus * unit < r.need.amounts.at(protocol::cpu)) continue;
      const auto ok = std::count_if(n.gpus.begin(), n.gpus.end(), [&](const auto& g) { return device_ok(g, r.p); });
      const long wanted = r.gpus <= 1 ? (r.gpus > 0 || r.p.constrains_gpus() ? 1 : 0) : static_cast<long>(r.gpus);
      if (ok >= wanted) return true;
    }
    return false;
  }

  /// Checks a decision against the ledger and books it (outside the timed region).
  void book(const request& r, const cluster_view::decision& d, decision_run& out) {
    if (d.never()) {
      ++out.never;
      check(!could_ever(r), "never() for a request some node could run: " + d.why);
      return;
    }
    const auto it = where_.find(d.target);
    check(it != where_.end(), "placed on an unknown node");
    if (it == where_.end()) return;
    auto& n = nodes_[it->second];
    check(scheduling::labels_match(n.labels, r.p.labels), "placed on a node whose labels do not match");
    check(n.cpus * unit >= r.need.amounts.at(protocol::cpu), "placed on a node with too few CPUs");
    if (!d.now) {
      ++out.wait;
      view_.dequeue(d.target, r.need);  // the simulation drops waiting work at once
      return;
    }
    ++out.now;
    const auto cpu = r.need.amounts.at(protocol::cpu);
    n.cpus_free -= cpu;
    cpu_used_ += cpu;
    check(n.cpus_free >= 0, "CPUs oversubscribed");
    std::int64_t given = 0;
    for (const auto& s : d.gpus) {
      const auto i = static_cast<std::size_t>(s.index);
      check(i < n.gpus.size(), "a device index the node does not have");
      if (i >= n.gpus.size()) return;
      check(device_ok(n.gpus[i], r.p), "placed on a device that does not match");
      n.gpu_free[i] -= s.amount;
      gpu_used_ += s.amount;
      check(n.gpu_free[i] >= 0, "a device oversubscribed");
      given += s.amount;
    }
    check(given == static_cast<std::int64_t>(r.gpus * unit), "GPU units given differ from the request");
    live_.push_back({it->second, r.need, d.gpus});
  }

  std::mt19937_64 rng_;
  const std::vector<std::string> zones_{"a", "b", "c"};
  cluster_view view_;
  std::vector<sim_node> nodes_;
  std::unordered_map<node_id, std::size_t> where_;
  std::vector<running> live_;
  std::int64_t cpu_total_ = 0, cpu_used_ = 0, gpu_total_ = 0, gpu_used_ = 0;
};

/// Nanoseconds of one pair of steady_clock::now() calls (included in every timed place()).
double clock_pair_ns() {
  constexpr int n = 1'000'000;
  clock_type::duration sink{};
  const auto t0 = clock_type::now();
  for (int i = 0; i < n; ++i) {
    const auto a = clock_type::now();
    sink += clock_type::now() - a;
  }
  const auto total = clock_type::now() - t0;
  if (sink.count() < 0) return 0;  // uses sink, so the loop is not optimized away
  return std::chrono::duration<double, std::nano>(total).count() / n;
}

// ---- 3. preemption choices ------------------------------------------------------------------

struct preemption_run {
  std::vector<double> per_second;
  std::uint64_t found = 0, none = 0;
  std::size_t actors = 0;
};

/// `count` mixed nodes, every GPU held by a one-GPU preemptible actor of priority -3..0;
/// times preemption_target() for one- and two-GPU requests (a third of them for an A100)
/// at priority 1, and checks each answer: a live node that can fit the request once its
/// actors of lower priority stop.
preemption_run run_preemption(std::size_t count, double seconds, int trials) {
  std::mt19937_64 rng(20261130);
  const std::vector<std::string> kinds{"A100-80GB:8@2", "A100-40GB:4@2", "V100-16GB:4@1",
                                       "V100-32GB:8@1"};
  cluster_view view;
  std::vector<cluster_view::preemptible> actors;
  for (std::size_t i = 0; i < count; ++i) {
    const node_id id = node_id::random();
    auto gpus = declared(kinds[rng() % kinds.size()]);
    const auto n = gpus.size();
    view.add_node(id, amounts(32, static_cast<double>(n)), {}, std::move(gpus));
    protocol::placement here;
    here.how = kind::node_affinity;
    here.node = id;
    for (std::size_t g = 0; g < n; ++g) {
      const auto need = amounts(1, 1);
      auto d = view.place(need, here);
      check(d.now, "could not fill a node");
      actors.push_back({id, need, d.gpus, -static_cast<std::int32_t>(rng() % 4), actors.size()});
    }
  }
  // Grouped by node once, as the head does when an actor that opted in starts or stops.
  view.set_preemptible(actors);
  preemption_run out;
  out.actors = actors.size();
  auto one_call = [&](clock_type::duration& spent) {
    const double gpus = rng() % 2 == 0 ? 1 : 2;
    protocol::placement p;
    if (rng() % 3 == 0) p.accelerator_type = "A100";
    const auto need = amounts(1, gpus);
    const auto t0 = clock_type::now();
    const auto target = view.preemption_target(need, p, 1);
    spent += clock_type::now() - t0;
    if (!target) {
      ++out.none;
      return;
    }
    ++out.found;
    // Its node with every lower-priority actor stopped must fit the request.
    auto after = *view.find(*target);
    for (const auto& a : actors) {
      if (a.node != *target || a.priority >= 1) continue;
      after.available.add(a.holds);
      after.gpus.give_back(a.gpus);
    }
    check(cluster_view::fits_now(after, need, p), "preemption_target chose a node without room");
  };
  const auto budget = std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(seconds));
  clock_type::duration warm{};
  while (warm < budget / 2) one_call(warm);
  for (int t = 0; t < trials; ++t) {
    clock_type::duration spent{};
    std::uint64_t made = 0;
    while (spent < budget) {
      one_call(spent);
      ++made;
    }
    out.per_second.push_back(static_cast<double>(made) / std::chrono::duration<double>(spent).count());
  }
  return out;
}

// ---- 2. makespan ---------------------------------------------------------------------------

struct makespan_run {
  double makespan = 0;
  std::vector<int> per_node;
  std::map<std::string, int> per_model;
};

/// Places `tasks` tasks of 1 CPU + 1 GPU, all at t=0, with `how`, then runs each node's
/// queue on its own devices: in placement order, each task goes to the device that frees
/// first (faster on ties) and takes 1/speed there. The view's device choice is not used.
makespan_run run_makespan(const std::vector<std::string>& shape, kind how, int tasks) {
  cluster_view view;
  std::vector<node_id> ids;
  std::vector<std::vector<gpu::device>> devices;
  for (const auto& spec : shape) {
    ids.push_back(node_id::random());
    devices.push_back(declared(spec));
    view.add_node(ids.back(), amounts(16, static_cast<double>(devices.back().size())), {}, devices.back());
  }
  std::vector<std::vector<int>> queue(shape.size());  // task numbers, in placement order
  protocol::placement p;
  p.how = how;
  const auto need = amounts(1, 1);
  for (int t = 0; t < tasks; ++t) {
    const auto d = view.place(need, p);
    check(!d.never(), std::string("a task can never run under ") + name_of(how));
    const auto it = std::find(ids.begin(), ids.end(), d.target);
    check(it != ids.end(), "a task placed on an unknown node");
    if (d.never() || it == ids.end()) continue;
    const auto n = static_cast<std::size_t>(it - ids.begin());
    if (d.now) {
      check(d.gpus.size() == 1 && d.gpus[0].amount == unit &&
              static_cast<std::size_t>(d.gpus[0].index) < devices[n].size(),
            "a `now` task did not get one whole device of its node");
    }
    queue[n].push_back(t);
  }
  makespan_run out;
  for (std::size_t n = 0; n < shape.size(); ++n) {
    out.per_node.push_back(static_cast<int>(queue[n].size()));
    std::vector<double> free_at(devices[n].size(), 0.0);
    for (std::size_t k = 0; k < queue[n].size(); ++k) {
      std::size_t best = 0;
      for (std::size_t g = 1; g < free_at.size(); ++g) {
        if (free_at[g] < free_at[best] ||
            (free_at[g] == free_at[best] && devices[n][g].speed > devices[n][best].speed)) {
          best = g;
        }
      }
      free_at[best] += 1.0 / devices[n][best].speed;
      out.makespan = std::max(out.makespan, free_at[best]);
      char speed[16];
      std::snprintf(speed, sizeof speed, "@%g", devices[n][best].speed);
      ++out.per_model[devices[n][best].model + speed];
    }
  }
  check(out.makespan > 0, "makespan <= 0");
  int placed = 0;
  for (int c : out.per_node) placed += c;
  check(placed == tasks, "not every task was placed");
  return out;
}

} // namespace

int main(int argc, char** argv) {
  bool smoke = false;
  double duration = 1.0;
  std::string json_path;
  CLI::App app{"celer-bench-scheduler: the cluster scheduler's decisions per second and the "
               "makespan of equal GPU tasks under spread and speed_weighted, on simulated nodes"};
  app.add_flag("--smoke", smoke, "10 and 100 nodes, 1 short trial, 200 tasks: checks that it runs");
  app.add_option("--duration", duration, "seconds of place() time per trial (default 1)");
  app.add_option("--json", json_path, "also write the figures to FILE as JSON");
  CLI11_PARSE(app, argc, argv);
  if (smoke) duration = std::min(duration, 0.05);
  const std::vector<std::size_t> node_counts = smoke ? std::vector<std::size_t>{10, 100}
                                                     : std::vector<std::size_t>{10, 100, 1000};
  const int trials = smoke ? 1 : 4;
  const int tasks = smoke ? 200 : 1000;
  nlohmann::json out;
  out["smoke"] = smoke;

  const double pair_ns = clock_pair_ns();
  std::printf("== place() decisions per second (mixed cluster about 80%% busy; seed 20261130)\n"
              "   timed: steady_clock around each place() call, summed; a clock pair costs %.0f ns\n"
              "   and is included. Warm-up of half a trial, then %d trial(s) of %.2f s of place() time.\n",
              pair_ns, trials, duration);
  std::printf("%-34s %14s %10s %7s %7s %7s %7s\n", "", "decisions/s", "+- std", "now", "wait", "never", "busy");
  out["clock_pair_ns"] = pair_ns;
  for (const auto count : node_counts) {
    decision_bench bench(count, 20261130);
    decision_run warm, run;
    run.nodes = count;
    (void)bench.trial(duration / 2, warm);
    std::uint64_t requests = 0;
    for (int t = 0; t < trials; ++t) {
      const auto [made, seconds] = bench.trial(duration, run);
      requests += made;
      run.per_second.push_back(static_cast<double>(made) / seconds);
    }
    const auto s = summarize(run.per_second);
    const double all = static_cast<double>(run.now + run.wait + run.never);
    check(all > 0 && s.mean > 0, "no decisions measured");
    auto share = [&](std::uint64_t c) { return all > 0 ? 100.0 * static_cast<double>(c) / all : 0.0; };
    const std::string label = "place_per_second_" + std::to_string(count) + "_nodes";
    std::printf("%-34s %14.0f %10.0f %6.1f%% %6.1f%% %6.1f%% %6.1f%%\n", label.c_str(), s.mean, s.std,
                share(run.now), share(run.wait), share(run.never), 100.0 * run.busy_sum / std::max(all, 1.0));
    out["decisions"].push_back({{"nodes", count}, {"per_second_mean", s.mean}, {"per_second_std", s.std},
                                {"trials", run.per_second}, {"requests", requests},
                                {"now_share", share(run.now) / 100}, {"wait_share", share(run.wait) / 100},
                                {"never_share", share(run.never) / 100},
                                {"busy_mean", run.busy_sum / std::max(all, 1.0)}});
  }

  struct shape_def {
    std::string name;
    std::vector<std::string> nodes;
  };
  const std::vector<shape_def> shapes{
    {"a: 2x A100-80GB:4@2 + 2x V100-16GB:4@1",
     {"A100-80GB:4@2", "A100-80GB:4@2", "V100-16GB:4@1", "V100-16GB:4@1"}},
    {"b: 1x (2 A100@2 + 2 V100@1) + 3x V100-16GB:4@1",
     {"A100-80GB:2@2,V100-16GB:2@1", "V100-16GB:4@1", "V100-16GB:4@1", "V100-16GB:4@1"}}};
  std::printf("\n== makespan of %d equal tasks (1 CPU + 1 GPU, 1/speed time units), all submitted at t=0\n"
              "   placed by place(); executed by this program's own per-node FIFO queues and device\n"
              "   timelines (a free device takes the node's next task; faster first on ties).\n",
              tasks);
  for (std::size_t si = 0; si < shapes.size(); ++si) {
    const auto& shape = shapes[si];
    double speed_sum = 0;
    for (const auto& spec : shape.nodes) {
      for (const auto& d : declared(spec)) speed_sum += d.speed;
    }
    const double bound = tasks / speed_sum;  // all devices busy until the same instant
    std::printf("shape %s (lower bound %.2f)\n", shape.name.c_str(), bound);
    nlohmann::json js{{"shape", shape.name}, {"nodes", shape.nodes}, {"tasks", tasks}, {"lower_bound", bound}};
    std::map<kind, double> spans;
    for (const auto how : {kind::spread, kind::speed_weighted, kind::hybrid}) {
      const auto r = run_makespan(shape.nodes, how, tasks);
      spans[how] = r.makespan;
      std::string nodes_text, models_text;
      for (int c : r.per_node) nodes_text += (nodes_text.empty() ? "" : "/") + std::to_string(c);
      for (const auto& [m, c] : r.per_model) models_text += (models_text.empty() ? "" : ", ") + m + ": " + std::to_string(c);
      std::printf("  %-15s makespan %7.2f   tasks per node %s   per model %s\n", name_of(how), r.makespan,
                  nodes_text.c_str(), models_text.c_str());
      js["policies"][name_of(how)] = {{"makespan", r.makespan}, {"per_node", r.per_node}, {"per_model", r.per_model}};
    }
    const double gain = 100.0 * (spans[kind::spread] / spans[kind::speed_weighted] - 1.0);
    std::printf("makespan_gain_shape_%c  %+.1f%%  (speed_weighted over spread: makespan_rr / makespan_sw - 1)\n",
                shape.name[0], gain);
    js["gain_percent"] = gain;
    out["makespan"].push_back(js);
  }

  std::printf("\n== preemption_target() choices per second (every GPU held by a preemptible\n"
              "   one-GPU actor of priority -3..0; requests of 1 or 2 GPUs, a third for an A100,\n"
              "   at priority 1; each answer checked)\n");
  std::printf("%-34s %14s %10s %8s %8s\n", "", "choices/s", "+- std", "actors", "found");
  for (const auto count : node_counts) {
    const auto r = run_preemption(count, duration, trials);
    const auto s = summarize(r.per_second);
    check(s.mean > 0 && r.found > 0, "no preemption choices measured");
    const std::string label = "preemption_per_second_" + std::to_string(count) + "_nodes";
    const double share = 100.0 * static_cast<double>(r.found) / static_cast<double>(std::max<std::uint64_t>(1, r.found + r.none));
    std::printf("%-34s %14.0f %10.0f %8zu %7.1f%%\n", label.c_str(), s.mean, s.std, r.actors, share);
    out["preemption"].push_back({{"nodes", count}, {"per_second_mean", s.mean}, {"per_second_std", s.std},
                                 {"trials", r.per_second}, {"actors", r.actors},
                                 {"found_share", share / 100}});
  }

  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << out.dump(2) << "\n";
    check(f.good(), "could not write " + json_path);
  }
  if (failures > 0) {
    std::printf("CHECK FAILED: %d check(s) failed\n", failures);
    return 1;
  }
  std::printf("all checks passed\n");
  return 0;
}
