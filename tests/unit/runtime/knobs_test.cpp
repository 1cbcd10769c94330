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

TEST_CASE("the token knob is never taken from the command line, only from CELER_TOKEN",
          "[knobs][security]") {
  for (const char* arg : {"--celer-token=s3cret", "--celer-token"}) {
    const char* args[] = {"prog", arg, "s3cret"};
    try {
      (void)load_knobs(3, const_cast<char**>(args));
      FAIL("the token was taken from the command line");
    } catch (const exception& e) {
      REQUIRE(e.code() == error_code::invalid_argument);
      const std::string what = e.what();
      REQUIRE(what.find("CELER_TOKEN") != std::string::npos);
      REQUIRE(what.find("s3cret") == std::string::npos);  // the error does not repeat it
    }
  }
  ::setenv("CELER_TOKEN", "from-the-environment", 1);
  auto k = load_knobs(0, nullptr);
  ::unsetenv("CELER_TOKEN");
  REQUIRE(k.token == "from-the-environment");
  bool listed = false;
  for (const auto& info : knob_list()) {
    if (std::string(info.name) == "token") {
      listed = true;
      REQUIRE_FALSE(info.command_line);
    } else {
      REQUIRE(info.command_line);
    }
  }
  REQUIRE(listed);
}
