#include <celer/gpu.hpp>

#include <catch2/catch.hpp>

using namespace celer::gpu;

TEST_CASE("the speed probe reports an error rather than failing where it cannot run", "[probe]") {
  // Without a driver: unavailable. With one, a device index that does not exist.
  auto speed = probe_speed(/*index=*/1 << 20);
  REQUIRE_FALSE(speed);
  CHECK(speed.error().code() == celer::error_code::unavailable);
  CHECK_THAT(speed.error().message(), Catch::Contains("GPU speed probe"));
}

TEST_CASE("the speed probe measures a positive speed on a real device", "[gpu]") {
  auto speed = probe_speed(0);
  if (!speed) {
    WARN("no CUDA device to probe (" << speed.error().message() << "); skipped");
    return;
  }
  CHECK(*speed > 0);
  // A second run measures the same device within a factor of two.
  auto again = probe_speed(0);
  REQUIRE(again);
  CHECK(*again > *speed / 2);
  CHECK(*again < *speed * 2);
}
