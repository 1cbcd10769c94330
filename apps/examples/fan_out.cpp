// Fan-out / fan-in: split work into many tasks, run them in parallel, combine the results.
// Estimates pi by Monte Carlo: each task throws darts, a final task sums the hits.
//
//   celer-example-fan_out [--tasks N] [--darts-per-task N] [--celer-num-cpus N]
#include "report_errors.hpp"

#include <celer/celer.hpp>

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <vector>

/// Counts darts that land inside the unit quarter circle.
std::int64_t count_hits(std::int64_t darts, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::int64_t hits = 0;
  for (std::int64_t i = 0; i < darts; ++i) {
    const double x = u(gen), y = u(gen);
    hits += (x * x + y * y <= 1.0) ? 1 : 0;
  }
  return hits;
}

/// Fan-in: sums the partial counts (the refs were resolved to values before the call).
std::int64_t sum(std::vector<std::int64_t> parts) {
  std::int64_t total = 0;
  for (auto p : parts) total += p;
  return total;
}

CELER_REMOTE(count_hits, sum);

int main(int argc, char** argv) {
  std::int64_t tasks = 64, darts = 200'000;
  for (int i = 1; i + 1 < argc; ++i) {
    std::string a = argv[i];
    if (a == "--tasks") tasks = std::atoll(argv[i + 1]);
    if (a == "--darts-per-task") darts = std::atoll(argv[i + 1]);
  }
  return report_errors([&] {
    celer::init(argc, argv);

    std::vector<celer::object_ref<std::int64_t>> parts;
    for (std::int64_t t = 0; t < tasks; ++t) {
      parts.push_back(celer::task(count_hits).remote(darts, static_cast<std::uint64_t>(t + 1)));
    }
    // Fan in remotely: a task that takes the list of partial results.
    std::vector<std::int64_t> values = celer::get(parts);
    auto total = celer::get(celer::task(sum).remote(values));

    const double pi = 4.0 * static_cast<double>(total) / static_cast<double>(tasks * darts);
    std::cout << "tasks: " << tasks << ", darts: " << tasks * darts << ", pi ~ " << pi << "\n";
    celer::shutdown();
    return (pi > 3.1 && pi < 3.2) ? 0 : 1;
  });
}
