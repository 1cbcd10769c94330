// Resource arithmetic and end-to-end accounting in the embedded runtime.
#include "protocol/resources.hpp"
#include "unit/runtime/fixtures.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

using namespace celer;
using namespace std::chrono_literals;

TEST_CASE("fractional amounts add up exactly", "[resources]") {
  protocol::resource_set total = *protocol::make_request(0, 1, 0, {});
  protocol::resource_set used;
  for (double f : {0.1, 0.2, 0.7}) used.add(*protocol::make_request(0, f, 0, {}));
  REQUIRE(used.amounts == total.amounts);
  REQUIRE(total.covers(used));
  used.add(*protocol::make_request(0, 0.0001, 0, {}));
  REQUIRE_FALSE(total.covers(used));
  REQUIRE(total.first_short(used) == "GPU");
}

TEST_CASE("bad requests are refused with a reason", "[resources]") {
  REQUIRE_FALSE(protocol::make_request(-1, 0, 0, {}).has_value());
  REQUIRE_FALSE(protocol::make_request(1, 2.5, 0, {}).has_value());
  REQUIRE(protocol::make_request(1, 2, 0, {}).has_value());
  REQUIRE_FALSE(protocol::make_request(1, 0, 0, {{"CPU", 1}}).has_value());
  REQUIRE_FALSE(protocol::make_request(1, 0, 0, {{"x", -2}}).has_value());
}

TEST_CASE("the embedded node offers the configured and default resources", "[resources][embedded]") {
  {
    celer_test::scoped_runtime rt({.num_cpus = 3, .num_gpus = 2, .resources = {{"ssd", 4}}});
    auto total = celer::cluster_resources();
    REQUIRE(total["CPU"] == 3);
    REQUIRE(total["GPU"] == 2);
    REQUIRE(total["ssd"] == 4);
    REQUIRE(total["memory"] > 0);
  }
  celer_test::scoped_runtime rt(celer::init_options{});
  REQUIRE(celer::cluster_resources()["CPU"] == std::max(1u, std::thread::hardware_concurrency()));
}

TEST_CASE("a running task holds its CPUs and a 2-CPU task waits for them", "[resources][embedded]") {
  celer_test::scoped_runtime rt({.num_cpus = 2});
  celer_test::closed_gate gate;
  auto holder = celer::task(celer_test::hold_until_released).remote(1);
  while (celer_test::gate_holders.load() == 0) std::this_thread::sleep_for(1ms);
  REQUIRE(celer::available_resources()["CPU"] == 1);
  auto big = celer::task(celer_test::add).options({.num_cpus = 2}).remote(1, 2);
  auto [ready, pending] = celer::wait(std::vector{big}, 1, 100ms);
  REQUIRE(ready.empty());
  celer_test::release_gate = true;
  REQUIRE(celer::get(big, 30s) == 3);
  REQUIRE(celer::get(holder) == 1);
}

TEST_CASE("custom resources limit how many tasks run at once", "[resources][embedded]") {
  celer_test::scoped_runtime rt({.num_cpus = 4, .resources = {{"licence", 1}}});
  celer_test::closed_gate gate;
  auto first = celer::task(celer_test::hold_until_released)
                 .options({.num_cpus = 0, .resources = {{"licence", 1}}})
                 .remote(1);
  auto second = celer::task(celer_test::hold_until_released)
                  .options({.num_cpus = 0, .resources = {{"licence", 1}}})
                  .remote(2);
  while (celer_test::gate_holders.load() == 0) std::this_thread::sleep_for(1ms);
  REQUIRE(celer::available_resources()["licence"] == 0);
  REQUIRE(celer_test::gate_holders.load() == 1);
  celer_test::release_gate = true;
  REQUIRE(celer::get(first) + celer::get(second) == 3);
}
