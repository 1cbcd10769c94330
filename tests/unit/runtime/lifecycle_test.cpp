// init and shutdown: twice, out of order, with work in flight; no thread left behind.
#include "unit/runtime/fixtures.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

using namespace celer_test;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

TEST_CASE("init twice is a clear error", "[lifecycle]") {
  scoped_runtime rt;
  try {
    celer::init();
    FAIL("no error");
  } catch (const celer::exception& e) {
    REQUIRE(e.code() == celer::error_code::failed_precondition);
    REQUIRE_THAT(e.what(), Contains("twice"));
  }
  REQUIRE(celer::get(celer::task(add).remote(1, 1)) == 2);
}

TEST_CASE("get after shutdown is a clear error", "[lifecycle]") {
  celer::object_ref<int> r;
  {
    scoped_runtime rt;
    r = celer::task(add).remote(1, 1);
    REQUIRE(celer::get(r) == 2);
  }
  REQUIRE_FALSE(celer::is_initialized());
  try {
    celer::get(r);
    FAIL("no error");
  } catch (const celer::exception& e) {
    REQUIRE(e.code() == celer::error_code::failed_precondition);
    REQUIRE_THAT(e.what(), Contains("not initialized"));
  }
  REQUIRE_THROWS_AS(celer::task(add).remote(1, 1), celer::exception);
  REQUIRE_THROWS_AS(celer::put(1), celer::exception);
}

TEST_CASE("shutdown without init, and twice, does nothing", "[lifecycle]") {
  REQUIRE_NOTHROW(celer::shutdown());
  celer::init({.num_cpus = 1});
  celer::shutdown();
  REQUIRE_NOTHROW(celer::shutdown());
}

TEST_CASE("init after shutdown starts a fresh runtime", "[lifecycle]") {
  for (int round = 0; round < 3; ++round) {
    scoped_runtime rt;
    REQUIRE(celer::get(celer::task(add).remote(round, 1)) == round + 1);
  }
}

TEST_CASE("shutdown with work in flight returns and leaves no thread behind", "[lifecycle][embedded]") {
  // A sanitizer may start a helper thread at the first thread creation; let it happen now.
  std::thread([] {}).join();
  const int before = thread_count();
  const std::string names_before = thread_names();
  celer::init({.num_cpus = 2});
  std::vector<celer::object_ref<int>> refs;
  for (int i = 0; i < 200; ++i) refs.push_back(celer::task(sleep_ms).remote(5));
  auto c = celer::actor(make_counter).remote(0);
  for (int i = 0; i < 50; ++i) c.task(&counter::incr).remote(1);
  auto nested = celer::task(fib).remote(12);
  REQUIRE(thread_count() > before);
  celer::shutdown();
  REQUIRE_FALSE(celer::is_initialized());
  // RocksDB's pool threads (the object store's disk tier) are told to exit at shutdown and
  // finish on their own a moment later.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (thread_count() > before && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CAPTURE(names_before, thread_names());
  // At most as many as before: the joined helper thread above may still have been counted
  // then (its task lingers in /proc for a moment on a busy machine; seen once in CI).
  REQUIRE(thread_count() <= before);
}

TEST_CASE("a get blocked in another thread returns with an error at shutdown", "[lifecycle][embedded]") {
  celer::init({.num_cpus = 1});
  release_gate = false;
  auto r = celer::task(hold_until_released).remote(1);
  std::string error;
  std::thread waiter([&] {
    try {
      celer::get(r);
    } catch (const celer::exception& e) {
      error = e.what();
    }
  });
  // The waiter is inside get (or about to be); shutdown wakes it either way. The gate is
  // released after shutdown began so that the running task can finish.
  std::thread releaser([] {
    std::this_thread::sleep_for(50ms);
    release_gate = true;
  });
  celer::shutdown();
  waiter.join();
  releaser.join();
  // Either the value arrived first, or the waiter was told why it stopped.
  if (!error.empty()) REQUIRE_THAT(error, Contains("shut"));
}

TEST_CASE("init reads --celer-num-cpus from the command line", "[lifecycle][resources][embedded]") {
  const char* args[] = {"prog", "--celer-num-cpus=3", "positional"};
  celer::init(3, const_cast<char**>(args));
  auto total = celer::cluster_resources();
  celer::shutdown();
  REQUIRE(total["CPU"] == 3);
}

TEST_CASE("init with a cluster address and no token says where the token comes from",
          "[lifecycle][embedded]") {
  ::setenv("CELER_TEMP_DIR", "/nonexistent/celer-test", 1);
  try {
    celer::init({.address = "10.0.0.1:6380"});
    celer::shutdown();
    FAIL("no error");
  } catch (const celer::exception& e) {
    REQUIRE(e.code() == celer::error_code::unauthenticated);
    REQUIRE_THAT(e.what(), Contains("10.0.0.1:6380") && Contains("CELER_TOKEN"));
  }
  ::unsetenv("CELER_TEMP_DIR");
  REQUIRE_FALSE(celer::is_initialized());
}

TEST_CASE("init with a cluster address where no head answers fails within its timeout",
          "[lifecycle][embedded]") {
  ::setenv("CELER_TOKEN", "not-a-real-token", 1);
  ::setenv("CELER_CONNECT_TIMEOUT_MS", "200", 1);
  try {
    celer::init({.address = "127.0.0.1:1"});
    celer::shutdown();
    FAIL("no error");
  } catch (const celer::exception& e) {
    REQUIRE(e.code() == celer::error_code::unavailable);
    REQUIRE_THAT(e.what(), Contains("127.0.0.1:1") && Contains("200 ms"));
  }
  ::unsetenv("CELER_TOKEN");
  ::unsetenv("CELER_CONNECT_TIMEOUT_MS");
  REQUIRE_FALSE(celer::is_initialized());
}

TEST_CASE("init with a malformed cluster address names it", "[lifecycle][embedded]") {
  try {
    celer::init({.address = "no-port-here"});
    celer::shutdown();
    FAIL("no error");
  } catch (const celer::exception& e) {
    REQUIRE(e.code() == celer::error_code::invalid_argument);
    REQUIRE_THAT(e.what(), Contains("no-port-here"));
  }
  REQUIRE_FALSE(celer::is_initialized());
}

TEST_CASE("an embedded start removes the disk tiers of runtimes that were killed",
          "[lifecycle][store][embedded]") {
  const char* temp = std::getenv("CELER_TEMP_DIR");
  // No process has this pid (above Linux's largest pid_max).
  const auto stale = std::filesystem::path(temp != nullptr ? temp : "/tmp/celer") /
                     "embedded-999999999-deadbeef" / "objects";
  std::filesystem::create_directories(stale);
  { celer_test::scoped_runtime rt; }
  CHECK_FALSE(std::filesystem::exists(stale.parent_path()));
}
