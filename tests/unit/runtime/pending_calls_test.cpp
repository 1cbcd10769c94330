// actor_options::max_pending_calls: back-pressure on a caller that calls an actor faster than
// it runs, as Ray's PendingCallsLimitExceeded. Embedded and (the suite's pass against a
// local cluster) on a cluster: the actor and the test share a folder, since the actor may
// be another process.
#include "unit/runtime/fixtures.hpp"
#include "unit/runtime/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

using namespace celer_test;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

struct desk {
  /// Returns `n` once `dir`/release exists (at most a minute).
  int hold(std::string dir, int n) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!fs::exists(fs::path(dir) / "release") && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return n;
  }
};
desk* make_desk() { return new desk; }

CELER_REMOTE(make_desk, &desk::hold);

/// Creates `dir`/release when the test ends, however it ends, so no call holds shutdown.
struct release_at_end {
  std::string dir;
  ~release_at_end() { std::ofstream(fs::path(dir) / "release") << "1"; }
};

} // namespace

TEST_CASE("a call beyond max_pending_calls fails at once with resource_exhausted, and calls "
          "go again once earlier ones are answered", "[api][actor][pending_calls]") {
  scoped_runtime rt;
  temp_dir dir("celer-pending");
  const std::string d = dir.path.string();
  release_at_end release{d};
  auto a = celer::actor(make_desk).options({.max_pending_calls = 2}).remote();
  auto first = a.task(&desk::hold).remote(d, 1);
  auto second = a.task(&desk::hold).remote(d, 2);
  try {
    (void)a.task(&desk::hold).remote(d, 3);
    FAIL("a third pending call was accepted");
  } catch (const celer::exception& e) {
    CHECK(e.code() == celer::error_code::resource_exhausted);
    CHECK_THAT(e.what(), Contains("desk::hold: actor") && Contains("has 2 calls from this process "
                                                                  "pending, its max_pending_calls"));
  }
  std::ofstream(fs::path(d) / "release") << "1";
  CHECK(celer::get(first) == 1);
  CHECK(celer::get(second) == 2);
  // Answered: room again.
  CHECK(celer::get(a.task(&desk::hold).remote(d, 4)) == 4);

  // Without the option there is no limit.
  auto free = celer::actor(make_desk).remote();
  std::vector<celer::object_ref<int>> many;
  for (int i = 0; i < 50; ++i) many.push_back(free.task(&desk::hold).remote(d, i));
  CHECK(celer::get(many.back()) == 49);
}

TEST_CASE("max_pending_calls takes -1 or a positive count", "[api][actor][pending_calls]") {
  scoped_runtime rt;
  CHECK_THROWS_WITH(celer::actor(make_desk).options({.max_pending_calls = 0}).remote(),
                    Contains("max_pending_calls takes -1 (no limit) or 1 or more, got 0"));
  CHECK_THROWS_AS(celer::actor(make_desk).options({.max_pending_calls = -2}).remote(), celer::exception);
}
