// A core piece's stop (core/stop_latch.hpp): the first stop stands, and refused calls are
// told why.
#include "core/stop_latch.hpp"

#include <catch2/catch.hpp>

using namespace celer;

TEST_CASE("a stop latch is open until its first stop", "[core][stop_latch]") {
  const stop_latch stop;
  CHECK_FALSE(stop.stopped());
  CHECK(stop.reason().empty());
}

TEST_CASE("the first stop's reason and code stand", "[core][stop_latch]") {
  stop_latch stop;
  CHECK(stop.stop("the job ended", error_code::cancelled));
  CHECK_FALSE(stop.stop("shutdown called"));
  CHECK_FALSE(stop.stop("again", error_code::internal));
  CHECK(stop.stopped());
  CHECK(stop.reason() == "the job ended");
  CHECK(stop.code_or(error_code::failed_precondition) == error_code::cancelled);
  // With a code, the reason is the whole message.
  CHECK(stop.message() == "the job ended");
}

TEST_CASE("a stop without a code tells refused calls that celer is shutting down",
          "[core][stop_latch]") {
  stop_latch stop;
  CHECK(stop.stop("shutdown called"));
  CHECK(stop.code_or(error_code::failed_precondition) == error_code::failed_precondition);
  CHECK(stop.message() == "celer is shutting down: shutdown called");
}
