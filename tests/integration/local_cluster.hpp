#pragma once
// A real local cluster for the integration tests: the `celer` CLI (CELER_CLI) starts a head
// and node agents as processes on 127.0.0.1 in a private session directory.
#include <catch2/catch.hpp>

#include <celer/celer.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <stdlib.h>

namespace celer_it {

using namespace std::chrono_literals;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

inline std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  ::pclose(p);
  return out;
}

/// A head (node0) and two node agents (node1, node2) with 1 CPU each, in a private
/// session directory; stopped with `celer stop` at the end. Sets CELER_ADDRESS.
struct local_cluster {
  fs::path dir;
  std::string address;
  /// `flags[i]` is added to node i's `celer start` (0: the head's node).
  explicit local_cluster(int node_timeout_ms = 2000, std::vector<std::string> flags = {}) {
    flags.resize(3);
    char tmpl[] = "/tmp/celer-it.XXXXXX";
    dir = ::mkdtemp(tmpl);
    ::setenv("CELER_TEMP_DIR", dir.c_str(), 1);
    ::setenv("CELER_NODE_TIMEOUT_MS", std::to_string(node_timeout_ms).c_str(), 1);
    ::setenv("CELER_HEARTBEAT_MS", "200", 1);
    // Drivers and workers of these tests share folders under /tmp, which jobs' confinement
    // forbids (docs/security.md, "Jobs apart on a machine"; tested by the attacker suite).
    ::setenv("CELER_JOB_ISOLATION", "off", 0);
    const std::string out = run(std::string(CELER_CLI) +
                                " start --head --port 0 --num-cpus 1 --resources '{\"node0\": 1}'"
                                " --labels zone=a,kind=spot " + flags[0]);
    const auto at = out.find("started at ");
    REQUIRE(at != std::string::npos);
    address = out.substr(at + 11, out.find(' ', at + 11) - at - 11);
    for (int i = 1; i <= 2; ++i) {
      const std::string node = run(std::string(CELER_CLI) + " start --address " + address +
                                   " --num-cpus 1 --resources '{\"node" + std::to_string(i) +
                                   "\": 1}' " + flags[static_cast<std::size_t>(i)]);
      REQUIRE_THAT(node, Contains("joined"));
    }
    ::setenv("CELER_ADDRESS", address.c_str(), 1);
  }
  ~local_cluster() {
    if (celer::is_initialized()) celer::shutdown();
    run(std::string(CELER_CLI) + " stop");
    std::error_code ec;
    fs::remove_all(dir, ec);
    ::unsetenv("CELER_ADDRESS");
  }
  [[nodiscard]] std::string status() const { return run(std::string(CELER_CLI) + " status"); }
  [[nodiscard]] std::string logs() const {
    std::string all;
    for (const auto& e : fs::directory_iterator(dir / "session_latest" / "logs")) {
      std::ifstream in(e.path());
      std::stringstream ss;
      ss << in.rdbuf();
      all += ss.str();
    }
    return all;
  }
};

/// detached_test.cpp: one driver's part, when this binary runs as CELERTEST_DETACHED=<role>.
int run_detached_role(const char* role);

inline celer::task_options on_node(int i) {
  return {.num_cpus = 0, .resources = {{"node" + std::to_string(i), 0.01}}};
}

template <class F>
bool eventually(F f, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (f()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return f();
}


} // namespace celer_it
