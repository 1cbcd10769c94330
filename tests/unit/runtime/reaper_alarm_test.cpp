// When a core's lease reaper wakes (core/reaper_alarm.hpp): at its deadline, when a lease
// goes idle while it waits untold, and at the stop.
#include "core/reaper_alarm.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <thread>

using namespace celer;

namespace {

/// A reaper on its own thread: sleeps on `alarm` until `done`, as run_reaper does.
struct reaper {
  std::mutex m;
  reaper_alarm alarm;
  bool asleep = false;
  bool done = false;
  std::promise<void> finished;
  std::thread thread;

  explicit reaper(reaper_alarm::time_point until) {
    thread = std::thread([this, until] {
      std::unique_lock lock(m);
      asleep = true;
      while (!done) alarm.sleep(lock, until);
      finished.set_value();
    });
  }
  ~reaper() {
    {
      std::lock_guard lock(m);
      done = true;
      alarm.wake();  // lets it end if the test failed to
    }
    thread.join();
  }
  /// Returns once the reaper waits in sleep (it holds `m` from setting `asleep` until then).
  void await_asleep() {
    for (;;) {
      std::lock_guard lock(m);
      if (asleep) return;
      std::this_thread::yield();
    }
  }
};

} // namespace

TEST_CASE("a reaper waiting untold wakes when a lease goes idle", "[core][reaper_alarm]") {
  reaper r(reaper_alarm::time_point::max());
  r.await_asleep();
  auto finished = r.finished.get_future();
  {
    std::lock_guard lock(r.m);
    CHECK(r.alarm.wakes() == reaper_alarm::time_point::max());
    r.done = true;
    r.alarm.lease_went_idle();
  }
  CHECK(finished.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
}

TEST_CASE("the stop wakes a reaper waiting for a distant deadline", "[core][reaper_alarm]") {
  const auto distant = std::chrono::steady_clock::now() + std::chrono::hours(1);
  reaper r(distant);
  r.await_asleep();
  auto finished = r.finished.get_future();
  {
    std::lock_guard lock(r.m);
    CHECK(r.alarm.wakes() == distant);
    r.done = true;
    r.alarm.wake();
  }
  CHECK(finished.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
}

TEST_CASE("a reaper whose deadline has passed wakes at once and remembers it", "[core][reaper_alarm]") {
  std::mutex m;
  reaper_alarm alarm;
  const auto past = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  std::unique_lock lock(m);
  alarm.sleep(lock, past);  // returns: nothing to wait for
  CHECK(lock.owns_lock());
  CHECK(alarm.wakes() == past);
}
