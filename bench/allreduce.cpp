// celer-bench-allreduce: what celer::collective's ring allreduce moves, as nccl-tests count
// it: for each size, the median time of an allreduce of that many bytes of float32 (sum)
// over `--members` actors, the algorithm bandwidth (size / time) and the bus bandwidth
// (2(n-1)/n * size / time: what each link carried).
//
//   build/bench/celer-bench-allreduce [--members 2] [--sizes-mb 1,10,100] [--rounds 5]
//   tests/cluster/with_cluster.sh build/runtime/celer --nodes 1 --cpus 2 --
//       build/bench/celer-bench-allreduce --spread          (members in worker processes)
//   ... --hierarchy by_node     (reduce on each node, then across nodes' leaders, then broadcast)
//   ... --sign                  (group::allreduce_sign: 1 bit a value, the mean; busbw counts float32's bytes)
//
// Embedded (no CELER_ADDRESS), the members are threads of this process and a message is a
// move; on a cluster each member is a worker process and every message crosses a socket.
// Every result is checked (each element the sum of the members' values); a wrong one exits 1.
#include <celer/actors/collective.hpp>
#include <celer/celer.hpp>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace col = celer::collective;
using clock_type = std::chrono::steady_clock;

namespace {

struct bench_member {
  bench_member(int size, int rank, std::int64_t chunk_bytes, int hierarchy, bool sign)
    : size(size), rank(rank), chunk(chunk_bytes), hierarchy(hierarchy), sign(sign) {}
  /// Joins, then for each size: one warm-up and `rounds` timed allreduces, each after a
  /// barrier. Returns, per size, the seconds of each timed round and 1 if every result checked;
  /// then its local group's size and its process id.
  std::vector<double> run(std::vector<std::int64_t> sizes, int rounds) {
    auto g = col::group::join({.name = "bench", .world_size = size, .rank = rank,
                               .chunk_bytes = static_cast<std::size_t>(chunk),
                               .hierarchy = static_cast<col::grouping>(hierarchy)});
    if (!g) throw std::runtime_error(g.error().message());
    std::vector<double> out;
    for (const auto bytes : sizes) {
      std::vector<float> v(static_cast<std::size_t>(bytes) / sizeof(float));
      col::sign_feedback feedback;
      bool ok = true;
      for (int r = -1; r < rounds; ++r) {
        std::fill(v.begin(), v.end(), static_cast<float>(rank + 1));
        if (auto b = g->barrier(); !b) throw std::runtime_error(b.error().message());
        const auto start = clock_type::now();
        if (auto a = sign ? g->allreduce_sign(std::span(v), feedback) : g->allreduce(std::span(v)); !a) {
          throw std::runtime_error(a.error().message());
        }
        const double took = std::chrono::duration<double>(clock_type::now() - start).count();
        // The sign allreduce gives the mean, exact here: each member's values are one constant.
        const float want = sign ? static_cast<float>(size + 1) / 2 : static_cast<float>(size * (size + 1) / 2);
        ok = ok && v.front() == want && v.back() == want && v[v.size() / 2] == want;
        if (r >= 0) out.push_back(took);
      }
      out.push_back(ok ? 1 : 0);
    }
    out.push_back(g->local_size());
    out.push_back(static_cast<double>(::getpid()));
    return out;
  }
  int size, rank;
  std::int64_t chunk;
  int hierarchy;
  bool sign;
};
bench_member* make_bench_member(int size, int rank, std::int64_t chunk, int hierarchy, bool sign) {
  return new bench_member(size, rank, chunk, hierarchy, sign);
}

CELER_REMOTE(make_bench_member, &bench_member::run);

} // namespace

int main(int argc, char** argv) {
  celer::serve_if_worker();
  int members = 2, rounds = 5;
  double chunk_mib = 4;
  std::string sizes_text = "1,10,100";
  bool spread = false;
  std::string hierarchy = "none";
  bool sign = false;
  CLI::App app{"celer::collective's ring allreduce: time, algorithm and bus bandwidth per size"};
  app.add_option("--members", members, "members of the group")->check(CLI::Range(1, 64))->capture_default_str();
  app.add_option("--sizes-mb", sizes_text, "sizes in MB (10^6 bytes), comma-separated")->capture_default_str();
  app.add_option("--rounds", rounds, "timed allreduces per size")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--chunk-mib", chunk_mib, "the ring's piece size (at most 8: celer::peer::max_payload)")->check(CLI::Range(0.001, 8.0))->capture_default_str();
  app.add_flag("--spread", spread, "ask each member for one CPU, so that a cluster spreads them over its nodes");
  app.add_option("--hierarchy", hierarchy, "local groups: none (one ring) or by_node")
    ->check(CLI::IsMember({"none", "by_node"}))
    ->capture_default_str();
  app.add_flag("--sign", sign, "time group::allreduce_sign (1 bit a value, error feedback) instead");
  CLI11_PARSE(app, argc, argv);
  std::vector<std::int64_t> sizes;
  std::stringstream in(sizes_text);
  for (std::string s; std::getline(in, s, ',');) sizes.push_back(static_cast<std::int64_t>(std::stod(s) * 1e6) / 4 * 4);

  celer::init();
  std::vector<celer::actor_handle<bench_member>> handles;
  for (int r = 0; r < members; ++r) {
    handles.push_back(celer::actor(make_bench_member)
                        .options({.num_cpus = spread ? 1.0 : 0.0})
                        .remote(members, r, static_cast<std::int64_t>(chunk_mib * (1 << 20)),
                                static_cast<int>(hierarchy == "by_node" ? col::grouping::by_node : col::grouping::none),
                                sign));
  }
  std::vector<celer::object_ref<std::vector<double>>> runs;
  for (auto& h : handles) runs.push_back(h.task(&bench_member::run).remote(sizes, rounds));
  std::vector<std::vector<double>> got;
  for (auto& r : runs) got.push_back(celer::get(r, std::chrono::minutes(10)));
  std::vector<double> pids;
  for (const auto& g : got) pids.push_back(g.back());
  std::sort(pids.begin(), pids.end());
  const auto processes = std::unique(pids.begin(), pids.end()) - pids.begin();
  std::string local_sizes;
  for (const auto& g : got) local_sizes += (local_sizes.empty() ? "" : ",") + std::to_string(static_cast<int>(g[g.size() - 2]));
  std::printf("celer::collective %s, %d members in %ld process(es), %s, pieces of %.1f MiB, "
              "hierarchy %s (local group sizes by rank: %s)\n",
              sign ? "allreduce_sign (1 bit a value, mean)" : "allreduce (float32 sum)", members,
              static_cast<long>(processes), std::getenv("CELER_ADDRESS") ? "cluster" : "embedded", chunk_mib,
              hierarchy.c_str(), local_sizes.c_str());
  std::printf("%10s %12s %14s %14s\n", "size", "median ms", "algbw GB/s", "busbw GB/s");
  int failures = 0;
  for (std::size_t s = 0; s < sizes.size(); ++s) {
    // A round's time is its slowest member's.
    std::vector<double> round_times(static_cast<std::size_t>(rounds), 0.0);
    for (const auto& g : got) {
      const std::size_t base = s * static_cast<std::size_t>(rounds + 1);
      for (int r = 0; r < rounds; ++r)
        round_times[static_cast<std::size_t>(r)] = std::max(round_times[static_cast<std::size_t>(r)], g[base + static_cast<std::size_t>(r)]);
      if (g[base + static_cast<std::size_t>(rounds)] != 1) ++failures;
    }
    std::sort(round_times.begin(), round_times.end());
    const double t = round_times[round_times.size() / 2];
    const double bytes = static_cast<double>(sizes[s]);
    std::printf("%8.1f MB %12.2f %14.3f %14.3f\n", bytes / 1e6, t * 1e3, bytes / t / 1e9,
                bytes * 2.0 * (members - 1) / members / t / 1e9);
  }
  for (auto& h : handles) celer::kill(h);
  celer::shutdown();
  if (failures > 0) {
    std::printf("CHECK FAILED: %d member results were wrong\n", failures);
    return 1;
  }
  return 0;
}
