// Detached actors on a real local cluster: one driver process makes a detached actor in a
// shared namespace and exits; later drivers (other processes, other jobs) find it by name
// and call it, with values larger than the store's inline limit both ways; a submitted job
// finds it only when its submission lets it into the namespace; `celer list actors` shows
// it detached; `celer::kill` from yet another driver ends it. Each driver is this binary run
// again with CELERTEST_DETACHED=<role> (run_detached_role, called from main).
#include "local_cluster.hpp"

#include <celer/celer.hpp>

#include <iostream>
#include <string>

#include <unistd.h>

using namespace std::chrono_literals;
using namespace celer_it;

namespace {

constexpr const char* shared_ns = "it-shared";

/// A counter that outlives the driver that made it.
struct counter {
  int value = 0;
  int add(int n) { return value += n; }
  /// `size` bytes: above inline_object_bytes, so a same-job caller would read it from the store.
  std::string blob(int size) const { return std::string(static_cast<std::size_t>(size), 'b'); }
  std::size_t length(std::string s) const { return s.size(); }
  std::string job() const { return celer::get_runtime_context().job.hex(); }
};
counter* make_counter(int start) { return new counter{start}; }

CELER_REMOTE(make_counter, &counter::add, &counter::blob, &counter::length, &counter::job);

celer::actor_handle<counter> find_counter() { return celer::get_actor<counter>("counter", shared_ns); }

/// One driver's part; what it finds goes to stdout, one fact a line.
void drive(const std::string& role) {
  celer::init();
  if (role == "create") {
    auto c = celer::actor(make_counter)
               .options({.name = "counter", .name_space = shared_ns, .lifetime = celer::lifetime::detached})
               .remote(10);
    std::cout << "value " << celer::get(c.task(&counter::add).remote(1), 60s) << std::endl;
    // Its job is its namespace's, not this driver's.
    std::cout << "same job " << (celer::get(c.task(&counter::job).remote(), 60s) ==
                                 celer::get_runtime_context().job.hex())
              << std::endl;
    // A plain named actor of this job in the same namespace: it ends with the job.
    auto plain = celer::actor(make_counter).options({.name = "plain", .name_space = shared_ns}).remote(0);
    (void)celer::get(plain.task(&counter::add).remote(1), 60s);
  } else if (role == "use") {
    try {
      auto c = find_counter();
      std::cout << "value " << celer::get(c.task(&counter::add).remote(5), 60s) << std::endl;
      std::cout << "blob " << celer::get(c.task(&counter::blob).remote(300000), 60s).size() << std::endl;
      std::cout << "length " << celer::get(c.task(&counter::length).remote(std::string(200000, 'x')), 60s)
                << std::endl;
      try {
        (void)celer::get(c.task(&counter::length).remote(celer::put(std::string(10, 'y'))), 60s);
        std::cout << "ref taken" << std::endl;
      } catch (const celer::exception& e) {
        std::cout << "ref refused " << (e.code() == celer::error_code::invalid_argument) << std::endl;
      }
    } catch (const celer::exception& e) {
      std::cout << "counter missing " << (e.code() == celer::error_code::not_found) << std::endl;
    }
    try {
      (void)celer::get_actor<counter>("plain", shared_ns);
      std::cout << "plain found" << std::endl;
    } catch (const celer::exception&) {
      std::cout << "plain gone" << std::endl;
    }
  } else if (role == "kill") {
    celer::kill(find_counter());
    std::cout << "killed" << std::endl;
  }
  celer::shutdown();
}

std::string driver(const std::string& role) {
  return run("CELERTEST_DETACHED=" + role + " /proc/" + std::to_string(::getpid()) + "/exe");
}

std::string self_exe() { return fs::read_symlink("/proc/self/exe").string(); }

} // namespace

namespace celer_it {

int run_detached_role(const char* role) {
  try {
    drive(role);
    return 0;
  } catch (const std::exception& e) {
    std::cout << "failed: " << e.what() << std::endl;
    return 1;
  }
}

} // namespace celer_it

TEST_CASE("a detached actor outlives its driver; later drivers let into its namespace find and call it",
          "[cluster][detached]") {
  local_cluster cluster;
  const auto made = driver("create");
  INFO(made);
  REQUIRE_THAT(made, Contains("value 11"));
  REQUIRE_THAT(made, Contains("same job 0"));

  // Its driver (and job) ended; the actor did not.
  const auto later = driver("use");
  INFO(later);
  CHECK_THAT(later, Contains("value 16"));
  CHECK_THAT(later, Contains("blob 300000"));    // above the inline limit, inline across jobs
  CHECK_THAT(later, Contains("length 200000"));  // the same for an argument
  CHECK_THAT(later, Contains("ref refused 1"));  // no store is shared between jobs
  CHECK_THAT(later, Contains("plain gone"));     // the plain actor ended with its job
  // The head publishes what it lists at its heartbeats: asked too soon, it says to try again.
  std::string listed;
  CHECK(eventually(
    [&] {
      listed = run(std::string(CELER_CLI) + " list actors");
      return listed.find("LIFETIME") != std::string::npos && listed.find("detached") != std::string::npos;
    },
    30s));
  INFO(listed);

  // A submitted job sees it only when its submission lets it into the namespace.
  const std::string exe = self_exe();
  const auto outsider = run(std::string(CELER_CLI) + " submit --follow --env CELERTEST_DETACHED=use -- " + exe);
  INFO(outsider);
  CHECK_THAT(outsider, Contains("counter missing 1"));
  const auto insider = run(std::string(CELER_CLI) + " submit --follow --namespace " + shared_ns +
                           " --env CELERTEST_DETACHED=use -- " + exe);
  INFO(insider);
  CHECK_THAT(insider, Contains("value 21"));

  const auto killed = driver("kill");
  INFO(killed);
  REQUIRE_THAT(killed, Contains("killed"));
  REQUIRE(eventually([&] { return driver("use").find("counter missing 1") != std::string::npos; }, 30s));
}
