// Runtime knobs: defaults, CELER_* variables, --celer-* flags, bad values.
#include "config/knobs.hpp"

#include <celer/error.hpp>

#include <catch2/catch.hpp>

#include <cstdlib>

using namespace celer;

TEST_CASE("knobs start at their declared defaults", "[knobs][embedded]") {
  ::unsetenv("CELER_NUM_CPUS");
  auto k = load_knobs(0, nullptr);
  REQUIRE(k.num_cpus == 0);
  REQUIRE(k.address.empty());
  REQUIRE(k.request_timeout_ms == 60000);
  REQUIRE_FALSE(knob_list().empty());
}

TEST_CASE("a CELER_ variable sets a knob and a flag overrides it", "[knobs]") {
  ::setenv("CELER_NUM_CPUS", "3", 1);
  auto from_env = load_knobs(0, nullptr);
  REQUIRE(from_env.num_cpus == 3);
  const char* args[] = {"prog", "--celer-num-cpus", "5", "--celer-address=h:1"};
  auto from_flags = load_knobs(4, const_cast<char**>(args));
  ::unsetenv("CELER_NUM_CPUS");
  REQUIRE(from_flags.num_cpus == 5);
  REQUIRE(from_flags.address == "h:1");
}

TEST_CASE("a knob value that does not parse is a clear error", "[knobs]") {
  const char* args[] = {"prog", "--celer-num-cpus=lots"};
  try {
    (void)load_knobs(2, const_cast<char**>(args));
    FAIL("no error");
  } catch (const exception& e) {
    REQUIRE(e.code() == error_code::invalid_argument);
    REQUIRE(std::string(e.what()).find("lots") != std::string::npos);
  }
  const char* frac[] = {"prog", "--celer-request-timeout-ms=1.5"};
  REQUIRE_THROWS_AS(load_knobs(2, const_cast<char**>(frac)), exception);
}
