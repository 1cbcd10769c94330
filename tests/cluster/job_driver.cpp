// The driver program tests/cluster/jobs_test.sh submits with `celer submit`: a celer
// program that connects with the job's credential alone (the head started it), runs tasks
// and an actor, and prints what it did.
//
//   celer-job-driver run N [EXIT]   N steps ("step i: <2*i from a task>, counter <from an
//                                   actor>"), 100 ms apart, then exits EXIT (default 0)
//   celer-job-driver forever        "ready", then "tick i" every 100 ms until stopped
//   celer-job-driver gpu            one task needing a GPU: "gpu task saw CUDA_VISIBLE_DEVICES=<...>"
//   celer-job-driver where          a task, and one needing a GPU, say which program they ran
//                                   in which folder, and what data/greeting.txt there holds:
//                                   "cpu task: <exe> in <cwd>: <greeting>", "gpu task: ..."
// Each starts with "credential: job-only" when it holds no token (as a submitted job must)
// and "priority: <CELER_JOB_PRIORITY>".
#include <celer/celer.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

struct counter {
  int incr(int by) { return value += by; }
  int value = 0;
};

counter* make_counter() { return new counter(); }
int twice(int x) { return 2 * x; }
std::string visible_gpus() {
  const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
  return v == nullptr ? "<unset>" : v;
}

std::string where_am_i() {
  std::string greeting;
  std::getline(std::ifstream("data/greeting.txt"), greeting);  // relative: the job's working directory
  return std::filesystem::read_symlink("/proc/self/exe").string() + " in " + std::filesystem::current_path().string() + ": " +
         greeting;
}

CELER_REMOTE(make_counter, &counter::incr, twice, visible_gpus, where_am_i);

int main(int argc, char** argv) {
  const char* token = std::getenv("CELER_TOKEN");
  std::cout << "credential: " << (token == nullptr && std::getenv("CELER_JOB_CREDENTIAL") != nullptr ? "job-only" : "token")
            << "\npriority: " << (std::getenv("CELER_JOB_PRIORITY") ? std::getenv("CELER_JOB_PRIORITY") : "-") << std::endl;
  celer::init(argc, argv);
  const std::string mode = argc > 1 ? argv[1] : "";
  int code = 2;
  if (mode == "run" && argc > 2) {
    auto c = celer::actor(make_counter).remote();
    const int n = std::atoi(argv[2]);
    for (int i = 1; i <= n; ++i) {
      const int t = celer::get(celer::task(twice).remote(i), std::chrono::seconds(60));
      const int v = celer::get(c.task(&counter::incr).remote(1), std::chrono::seconds(60));
      std::cout << "step " << i << ": " << t << ", counter " << v << std::endl;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    code = argc > 3 ? std::atoi(argv[3]) : 0;
  } else if (mode == "forever") {
    auto c = celer::actor(make_counter).remote();
    (void)celer::get(c.task(&counter::incr).remote(1), std::chrono::seconds(60));
    std::cout << "ready" << std::endl;
    for (int i = 1;; ++i) {
      std::cout << "tick " << i << std::endl;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  } else if (mode == "gpu") {
    auto v = celer::get(celer::task(visible_gpus).options({.num_cpus = 1, .num_gpus = 1}).remote(), std::chrono::seconds(60));
    std::cout << "gpu task saw CUDA_VISIBLE_DEVICES=" << v << std::endl;
    code = 0;
  } else if (mode == "where") {
    std::cout << "cpu task: " << celer::get(celer::task(where_am_i).remote(), std::chrono::seconds(60)) << std::endl;
    std::cout << "gpu task: "
              << celer::get(celer::task(where_am_i).options({.num_cpus = 1, .num_gpus = 1}).remote(), std::chrono::seconds(60))
              << std::endl;
    code = 0;
  } else {
    std::cerr << "usage: celer-job-driver run N [EXIT] | forever | gpu | where\n";
  }
  celer::shutdown();
  return code;
}
